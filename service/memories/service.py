"""Memory use cases of the API: remember, list, change, forget, and procedural slots.

Search lives in `search.py`; the writes the write path derives from conversations
(extraction, turn storage, compaction) in `writer.py`. All three write through
`MemoryRecorder`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, cast

from service.auth.owner import Owner
from service.errors import ValidationFailed
from service.kit.pagination import Page, decode_newest_first_cursor, newest_first_cursor
from service.kit.resource_headers import (
    NOTHING_TO_MATCH,
    entity_tag,
    require_match,
    require_none_match,
    require_preconditions,
)
from service.kit.types import visible_text
from service.memories.embedding import TextVectors, vectors_for
from service.memories.errors import DuplicateMemory, MemoryNotFound, StoreKeyTaken
from service.memories.filters import MemoryFilter
from service.memories.models import Memory
from service.memories.proposals import PROPOSED_SUPERSEDES, named_replacements, reviewed
from service.memories.recording import (
    ItemLocator,
    MemoryRecorder,
    OwnedCreate,
    in_batch,
    invalid_from,
    jsonable,
    refuse_secrets,
    written,
)
from service.memories.repository import SOURCE_THREAD_FORGOTTEN, ProcedureRow
from service.memories.schemas import (
    MemoriesDeleted,
    MemoryCreate,
    MemoryEventRead,
    MemoryHistory,
    MemoryKind,
    MemoryRead,
    MemoryUpdate,
    MemoryWritten,
    Procedures,
    ProcedureSlotRead,
    ProceduresUpdate,
)
from service.memories.slots import (
    PROCEDURE_SLOTS,
    SlotHolders,
    shown_in_slots,
    slot_filled_by,
    slot_of,
)
from service.memories.store_key import StoreKey
from service.memories.vector_columns import VECTOR_VALUES

# A dry run names this many of the memories it would delete (newest first).
DRY_RUN_SAMPLE = 20


def memory_etag(memory: Memory | MemoryRead) -> str:
    """A memory's entity tag: the same on every route that shows it (by id, by key, org)."""
    read = memory if isinstance(memory, MemoryRead) else MemoryRead.model_validate(memory)
    return entity_tag(read, MemoryRead)


def procedures_etag(procedures: Procedures) -> str:
    """The entity tag of an owner's procedural slots as a whole."""
    return entity_tag(procedures)


def require_memory_match(
    if_match: str | None, memory: Memory | None, *, absent: str = NOTHING_TO_MATCH
) -> None:
    """412 unless `If-Match` allows changing this memory (None: there is none, and `absent`
    says where)."""
    require_match(
        if_match,
        None if memory is None else memory_etag(memory),
        detail="The memory changed since you read it; read it again and retry.",
        absent=absent,
    )


def require_memory_none_match(if_none_match: str | None, memory: Memory) -> None:
    """412 when `If-None-Match` on a write names this memory's state (`*`: any state)."""
    require_none_match(
        if_none_match,
        memory_etag(memory),
        detail="The memory exists in the state If-None-Match names; nothing changed.",
    )


class MemoryService:
    def __init__(self, recorder: MemoryRecorder) -> None:
        self._recorder = recorder
        self._repository = recorder.repository
        self._slots = SlotHolders(recorder)

    # --- writing ----------------------------------------------------------------------------

    async def create(
        self,
        owner: Owner,
        items: list[MemoryCreate],
        locate: ItemLocator = in_batch,
        *,
        ahead: TextVectors | None = None,
    ) -> list[MemoryWritten]:
        """Store memories all-or-nothing for `owner`; exact duplicates return the existing
        memory. `locate` places an item in the request for problems about it; `ahead` holds
        their texts' vectors made before the transaction (`created_texts`).

        An item's `scope`, when given, names the owner's own: organization memory has its own
        owner (and route), so an item with `scope: org` for a user, or `scope: user` for the
        organization, is refused whoever sends it (`_refuse_other_scopes`). A new
        procedural memory of a slot supersedes the slot's memory (`SlotHolders.take`), in
        the items' order: of two items of one slot, the later holds it. Each memory is
        answered as the write leaves it.
        """
        _refuse_other_scopes(owner, items, locate)
        owned = [OwnedCreate(owner, item) for item in items]
        self._recorder.validate_new(owned, locate)
        await self._recorder.hold_writes(owner)
        await self._recorder.check_sources(owned, locate)
        if any(slot_of(item.kind, item.category) for item in items):
            await self._slots.hold(owner)
        else:
            await self._recorder.provision([owner])

        vectors = await vectors_for(self._recorder.embedder, created_texts(items), ahead)

        rows = [
            (
                entry.owner,
                self._recorder.insert_values(entry, None if vectors is None else vectors[index]),
            )
            for index, entry in enumerate(owned)
        ]
        stored = await self._recorder.insert_all_unless_duplicate(rows, postings=False)
        inserted = [memory for memory, duplicate in stored if not duplicate]
        # The batch's postings in one statement, in its transaction (see `MemoryRepository`).
        await self._repository.write_postings([memory.id for memory in inserted])
        await self._repository.add_events(
            [
                self._recorder.event(memory, "add", old_text=None, new_text=memory.text)
                for memory in inserted
            ]
        )
        # The last new memory of each slot holds it: the slot's others, the batch's earlier
        # items among them, are superseded by it.
        holders = {slot_filled_by(memory): memory for memory in inserted}
        holders.pop(None, None)
        superseded: dict[uuid.UUID, Memory] = {}
        for holder in holders.values():
            superseded.update((m.id, m) for m in await self._slots.take(owner, holder))
        self._recorder.schedule_backfill(inserted)
        self._recorder.count_added(inserted)
        # An item a later one superseded is answered as it is now.
        return [
            written(superseded.get(memory.id, memory), duplicate=duplicate)
            for memory, duplicate in stored
        ]

    # --- reading ----------------------------------------------------------------------------

    async def get(
        self, owner: Owner, memory_id: uuid.UUID, *, with_org: bool = False
    ) -> MemoryRead:
        """The owner's memory; `with_org`: or, for a user, the organization's (`_readers`)."""
        memory = await self._repository.get_of(_readers(owner, with_org=with_org), memory_id)
        if memory is None:
            raise MemoryNotFound(f"No memory {memory_id} here.")
        return MemoryRead.model_validate(memory)

    async def _load(
        self, owner: Owner, memory_id: uuid.UUID, *, for_update: bool = False
    ) -> Memory:
        """The owner's memory, for a change. A user's route that names an organization memory
        (which it reads) is told where that memory is changed, rather than that there is none."""
        memory = await self._repository.get(owner, memory_id, for_update=for_update)
        if memory is not None:
            return memory
        if owner.user_id is not None and await self._repository.get(Owner.org(), memory_id):
            raise ValidationFailed(
                f"Memory {memory_id} is the organization's: it is changed and deleted through "
                f"/v1/org/memories/{memory_id}, not a user's route.",
                errors=[
                    {
                        "loc": ["path", "memory_id"],
                        "msg": "an organization memory; only the user's own here",
                        "type": "value",
                    }
                ],
            )
        raise MemoryNotFound(f"No memory {memory_id} here.")

    async def list_page(
        self, memory_filter: MemoryFilter, *, cursor: str | None, limit: int
    ) -> Page[MemoryRead]:
        after = decode_newest_first_cursor(cursor)
        rows = await self._repository.list_page(
            memory_filter.live_unless_asked(), after=after, limit=limit + 1
        )
        return Page[MemoryRead](
            items=[MemoryRead.model_validate(row) for row in rows[:limit]],
            next_cursor=newest_first_cursor(rows, limit),
        )

    async def history(
        self, owner: Owner, memory_id: uuid.UUID, *, with_org: bool = False
    ) -> MemoryHistory:
        """The memory's history, as `get` finds the memory (and after it was deleted)."""
        events = await self._repository.history(_readers(owner, with_org=with_org), memory_id)
        if not events:
            raise MemoryNotFound(f"No memory {memory_id} here.")
        return MemoryHistory(items=[MemoryEventRead.model_validate(event) for event in events])

    # --- changing and forgetting -------------------------------------------------------------

    async def update(
        self,
        owner: Owner,
        memory_id: uuid.UUID,
        change: MemoryUpdate,
        *,
        if_match: str | None = None,
        if_none_match: str | None = None,
        ahead: TextVectors | None = None,
    ) -> MemoryRead:
        """Change a memory under its row lock; with `if_match`, only if it is still in that
        state (so of two writers holding the same tag, the second gets 412), and with
        `if_none_match`, only if it is not (`*`: never, since it exists). `ahead` holds
        the new text's vector made before the transaction (`changed_texts`). A procedural
        memory the change makes live in a slot (restored, or moved there) supersedes the
        slot's memory (`SlotHolders.take`). A keyed memory's new category moves its key there
        (`StoreKey`), unless another memory holds that address (409 `StoreKeyTaken`).

        Confirming a proposed fact applies what it would replace (`metadata
        .proposed_supersedes`, `_confirmed_replacements`, `MemoryRecorder
        .supersede_confirmed`): a reviewer who confirms it says the new fact is true, so the
        facts it contradicts stop being current as if the write path had superseded them."""
        self._recorder.authorize(owner)
        await self._recorder.hold_writes(owner)
        if _may_fill_a_slot(change) or "category" in change.model_fields_set:
            # A kind and a key never change, so the memory read without its lock tells them.
            seen = await self._load(owner, memory_id)
            if _may_fill_a_slot(change) and seen.kind == "procedural":
                # The slot lock before the row lock, as every write to a slot takes them.
                await self._slots.hold(owner)
            if seen.store_key is not None and "category" in change.model_fields_set:
                # The address a keyed memory moves to is locked as a keyed put locks it (after
                # the slot lock, before the row lock), so a put there waits for the move and
                # then finds the memory it moved.
                await self._repository.lock_store_key(
                    owner, seen.kind, change.category, seen.store_key
                )
        if change.lifecycle == "confirmed":
            # The write path reconciles the owner's facts under this lock (taken after the
            # user's write lock, before any row lock, as the write path takes it), so a
            # confirmation that supersedes facts never interleaves with a pass reading them.
            # After the slot and key locks, as a keyed put that restores a memory takes it.
            await self._repository.lock_writers(owner)
        memory = await self._load(owner, memory_id, for_update=True)
        require_memory_match(if_match, memory)
        require_memory_none_match(if_none_match, memory)
        values = _validated_changes(change)
        confirms = values.get("lifecycle") == "confirmed"
        if confirms:
            values.setdefault("needs_review", False)
        replaces = _confirmed_replacements(memory, values)
        values = _changed_values(memory, values)
        if not values:
            # Nothing to change: nothing is written, and the memory keeps its ETag, so a
            # retried PATCH fails no other client's `If-Match`.
            return MemoryRead.model_validate(memory)
        if confirms:
            values["last_confirmed_at"] = datetime.now(UTC)
        takes = _live_text_taken(memory, values)
        if takes is not None:
            await self._refuse_duplicate(owner, memory, takes)
            await self._recorder.forget_expired_holder(owner, memory.kind, takes)
        moved_to = _key_moved_to(memory, values)
        if moved_to is not None:
            await self._recorder.forget_expired_key_holder(owner, moved_to)
        await self._embed_new_text(memory, values, ahead)
        updated = await self._record_update(owner, memory, values)
        if replaces:
            await self._recorder.supersede_confirmed(owner, updated, replaces)
        return updated

    async def _refuse_duplicate(self, owner: Owner, memory: Memory, text_value: str) -> None:
        """409 naming the owner's other live memory of the same kind that says `text_value`,
        if there is one."""
        duplicate = await self._repository.find_live_duplicate(owner, memory.kind, text_value)
        if duplicate is not None and duplicate.id != memory.id:
            raise DuplicateMemory(
                "Another memory already says exactly this.", existing_id=str(duplicate.id)
            )

    async def _refuse_taken_key(self, owner: Owner, memory: Memory, address: StoreKey) -> None:
        """409 naming the owner's other memory at `address`, if there is one."""
        holder = await self._repository.find_by_store_key(
            owner, address.kind, address.category, address.key
        )
        if holder is not None and holder.id != memory.id:
            category = address.category
            where = "no category" if category is None else f"the category {category!r}"
            raise StoreKeyTaken(
                f"The key {address.key!r} already holds another {address.kind} memory in "
                f"{where}; move or delete that memory first.",
                key=address.key,
                kind=address.kind,
                category=address.category,
                existing_id=str(holder.id),
            )

    async def _embed_new_text(
        self, memory: Memory, values: dict[str, Any], ahead: TextVectors | None
    ) -> None:
        """When the change gives the memory a new text, embed it (into `values`)."""
        new_text = values.get("text")
        if new_text is None or new_text == memory.text:
            return
        vectors = await vectors_for(self._recorder.embedder, [new_text], ahead)
        values.update(self._recorder.vector_values(vectors[0] if vectors else None))

    async def _record_update(
        self, owner: Owner, memory: Memory, values: dict[str, Any]
    ) -> MemoryRead:
        """Store the change with the lifecycle's timestamps and its history event; a memory
        whose text was given and that has no vector is queued for the embedding backfill."""
        old_text = memory.text
        filled = slot_filled_by(memory)
        takes = _live_text_taken(memory, values)
        lifecycle = values.get("lifecycle", memory.lifecycle)
        supersedes = lifecycle == "superseded" and memory.lifecycle != "superseded"
        if supersedes:
            values["invalid_at"] = invalid_from(memory, datetime.now(UTC))
        elif lifecycle != "superseded" and memory.lifecycle == "superseded":
            # Restored: true again, and replaced by nothing.
            values.update(invalid_at=None, superseded_by=None)

        # By the API's field names: the attribute `metadata_` is the field `metadata`.
        changes = {
            "metadata" if key == "metadata_" else key: jsonable(value)
            for key, value in values.items()
            if key not in VECTOR_VALUES and key not in {"text", "last_confirmed_at"}
        }
        moved_to = _key_moved_to(memory, values)
        if takes is None and moved_to is None:
            updated = await self._repository.update(memory, values)
        else:
            # The memory's new place (its live text, or its key's new address) is held by a
            # unique index, which decides: its refusal names the memory that holds the place.
            # (A text was looked for above, but a concurrent transaction may have written it
            # since.)
            written = await self._repository.update_unless_taken(memory, values)
            if written is None:
                if moved_to is not None:
                    await self._refuse_taken_key(owner, memory, moved_to)
                    raise StoreKeyTaken("A concurrent change collided with this write; retry.")
                if takes is not None:
                    await self._refuse_duplicate(owner, memory, takes)
                raise DuplicateMemory("A concurrent change collided with this write; retry.")
            updated = written
        action = "supersede" if supersedes else "update"
        await self._repository.add_events(
            [
                self._recorder.event(
                    updated, action, old_text=old_text, new_text=updated.text, changes=changes
                )
            ]
        )
        if "text" in values:
            self._recorder.schedule_backfill([updated])
        slot = slot_filled_by(updated)
        if slot is not None and slot != filled:
            await self._slots.take(owner, updated)
        return MemoryRead.model_validate(updated)

    async def delete(
        self,
        owner: Owner,
        memory_id: uuid.UUID,
        *,
        if_match: str | None = None,
        if_none_match: str | None = None,
    ) -> None:
        self._recorder.authorize(owner)
        await self._recorder.hold_writes(owner)
        memory = await self._load(owner, memory_id, for_update=True)
        require_memory_match(if_match, memory)
        require_memory_none_match(if_none_match, memory)
        await self._recorder.forget([memory])

    async def delete_matching(
        self, memory_filter: MemoryFilter, *, everything: bool, dry_run: bool
    ) -> MemoriesDeleted:
        """Forget exactly the memories the same filter lists (with history): live ones unless
        the filter names lifecycles. Without any condition, `everything` is required and then
        every memory of the owners goes, superseded ones included. With `dry_run`, only count
        them and name the first few."""
        self._recorder.authorize(*memory_filter.owners)
        if memory_filter.has_conditions:
            memory_filter = memory_filter.live_unless_asked()
        elif not everything:
            raise ValidationFailed(
                "Give at least one filter, or all=true to forget every memory here.",
                errors=[{"loc": ["query"], "msg": "no filter given", "type": "missing"}],
            )
        if dry_run:
            count = await self._repository.count(memory_filter)
            sample = await self._repository.list_page(
                memory_filter, after=None, limit=DRY_RUN_SAMPLE
            )
            return MemoriesDeleted(
                matched=count, deleted=0, dry_run=True, ids=[m.id for m in sample]
            )
        await self._recorder.hold_writes(*memory_filter.owners)
        memories = await self._repository.lock_matching(memory_filter)
        await self._recorder.forget(memories)
        return MemoriesDeleted(
            matched=len(memories),
            deleted=len(memories),
            dry_run=False,
            ids=[m.id for m in memories[:DRY_RUN_SAMPLE]],
        )

    async def forget_thread(self, owner: Owner, thread_id: uuid.UUID) -> int:
        """Forget the owner's memories that came from this thread (with history), except those
        that messages of the owner's other threads said too (a repeat re-confirms a memory and
        joins its sources): such a memory keeps those sources and names the thread of the
        first of them instead. Returns how many were forgotten."""
        self._recorder.authorize(owner)
        await self._recorder.hold_writes(owner)
        memories = await self._repository.from_thread(owner, thread_id)
        elsewhere = await self._repository.sources_in_other_threads(
            owner, thread_id, [i for m in memories for i in m.source_message_ids or []]
        )
        forgotten: list[Memory] = []
        for memory in memories:
            sources = memory.source_message_ids or []
            kept = [i for i in sources if i in elsewhere]
            if not kept:
                forgotten.append(memory)
                continue
            values = {"source_thread_id": elsewhere[kept[0]], "source_message_ids": kept}
            updated = await self._repository.update(memory, values)
            changes = {
                "source_thread_id": str(elsewhere[kept[0]]),
                "source_message_ids_removed": [str(i) for i in sources if i not in elsewhere],
                "reason": SOURCE_THREAD_FORGOTTEN,
            }
            await self._repository.add_events(
                [
                    self._recorder.event(
                        updated,
                        "update",
                        old_text=updated.text,
                        new_text=updated.text,
                        changes=changes,
                    )
                ]
            )
        await self._recorder.forget(forgotten)
        return len(forgotten)

    # --- procedural slots --------------------------------------------------------------------

    async def procedures(self, owner: Owner) -> Procedures:
        return _procedures(await self._repository.procedure_rows(owner, slots=PROCEDURE_SLOTS))

    async def user_and_org_procedures(self, user: Owner) -> tuple[Procedures, Procedures]:
        """The user's slots and the organization's, read in one statement (the context call
        layers them)."""
        rows = await self._repository.procedure_rows(user, Owner.org(), slots=PROCEDURE_SLOTS)
        return (
            _procedures([m for m in rows if m.scope == "user"]),
            _procedures([m for m in rows if m.scope == "org"]),
        )

    async def set_procedures(
        self,
        owner: Owner,
        change: ProceduresUpdate,
        *,
        if_match: str | None = None,
        if_none_match: str | None = None,
        ahead: TextVectors | None = None,
    ) -> Procedures:
        """Replace the given slots: the old instruction is superseded, never silently lost.
        Writes to one owner's slots run one after another; with `if_match`, only if the slots
        are still in that state, and with `if_none_match`, only if they are not (`*`: never,
        since an owner's slots always exist, if only empty). `ahead` holds the new
        instructions' vectors made before the transaction (`procedure_texts`)."""
        self._recorder.authorize(owner)
        requested = change.model_dump(exclude_unset=True)
        for slot, value in requested.items():
            refuse_secrets(value, ["body", slot])
        await self._recorder.hold_writes(owner)
        await self._slots.hold(owner)
        live = await self._slots.live(owner)
        current = procedures_etag(_procedures([ProcedureRow.of(memory) for memory in live]))
        require_preconditions(
            if_match,
            if_none_match,
            current,
            changed="The procedures changed since you read them; read them again and retry.",
            unchanged="The procedures are in the state If-None-Match names; nothing changed.",
        )
        shown = shown_in_slots(live)
        for slot, value in requested.items():
            text_value = procedure_text(value)
            previous = [m for m in live if m.category == slot]
            kept = shown.get(slot)
            if kept is None or kept.text != text_value:
                kept = None
                # Supersede first: the unique index allows one live memory per text.
                await self._slots.retire(previous)
                if text_value:
                    kept = await self._create_procedure(owner, slot, text_value, ahead)
            await self._slots.supersede(
                [m for m in previous if m is not kept], slot, by=kept, new_text=text_value or None
            )
        # Read through the session, which writes whatever it still holds first.
        live = await self._slots.live(owner)
        return _procedures([ProcedureRow.of(memory) for memory in live])

    async def _create_procedure(
        self, owner: Owner, slot: str, text_value: str, ahead: TextVectors | None
    ) -> Memory:
        vectors = await vectors_for(self._recorder.embedder, [text_value], ahead)
        item = MemoryCreate(kind="procedural", text=text_value, category=slot)
        memory, duplicate = await self._recorder.insert_unless_duplicate(
            owner,
            self._recorder.insert_values(OwnedCreate(owner, item), vectors[0] if vectors else None),
            lock_existing=True,
        )
        if duplicate:
            # The same words already live as another procedural memory: make it this slot.
            memory = await self._repository.update(memory, {"category": slot})
        else:
            await self._repository.add_events(
                [self._recorder.event(memory, "add", old_text=None, new_text=text_value)]
            )
            self._recorder.schedule_backfill([memory])
            self._recorder.count_added([memory])
        return memory


def _readers(owner: Owner, *, with_org: bool) -> list[Owner]:
    """Whose memories a read by id finds: the owner's, and with `with_org` the organization's
    too when the owner is a user (every user of the tenant reads them, and a user's route lists
    them with `scope=org`)."""
    if with_org and owner.user_id is not None:
        return [owner, Owner.org()]
    return [owner]


def _may_fill_a_slot(change: MemoryUpdate) -> bool:
    """Whether the change may make a procedural memory live in a slot it was not live in: it
    restores one (a lifecycle other than superseded) or names a slot as its category."""
    restores = change.lifecycle is not None and change.lifecycle != "superseded"
    return restores or change.category in PROCEDURE_SLOTS


def _refuse_other_scopes(owner: Owner, items: list[MemoryCreate], locate: ItemLocator) -> None:
    """422 naming each item whose `scope` is not the owner's: a user's route writes only the
    user's memories, and the organization's route only the organization's. An item that
    leaves `scope` out is the route's (its default, `user`, is not a choice made on the
    organization's route, where an explicit `user` would be stored tenant-wide)."""
    if owner.user_id is None:
        refused = [
            index
            for index, item in enumerate(items)
            if "scope" in item.model_fields_set and item.scope != "org"
        ]
        detail = "User memories are written through /v1/users/{user_id}/memories, not the org's."
    else:
        refused = [index for index, item in enumerate(items) if item.scope != "user"]
        detail = "Org memories are written through /v1/org/memories, not a user's route."
    if refused:
        raise ValidationFailed(
            detail,
            errors=[
                {
                    "loc": [*locate(index), "scope"],
                    "msg": f"only `{owner.scope}` here",
                    "type": "value",
                }
                for index in refused
            ],
        )


def created_texts(items: Sequence[MemoryCreate]) -> list[str]:
    """The texts `MemoryService.create` embeds for `items`."""
    return [item.text for item in items]


def changed_text(text: str) -> str:
    """The text a change stores (and embeds) for the `text` it was given."""
    return text.strip()


def changed_texts(change: MemoryUpdate) -> list[str]:
    """The texts `MemoryService.update` may embed for `change`: its new text, if it has one."""
    return [] if change.text is None else [changed_text(change.text)]


def procedure_text(value: str | None) -> str:
    """The instruction a slot's value sets ("" clears the slot: nothing visible does too)."""
    return visible_text(value or "")


def procedure_texts(change: ProceduresUpdate) -> list[str]:
    """The texts `MemoryService.set_procedures` may embed for `change`: each slot's new
    instruction."""
    values = change.model_dump(exclude_unset=True).values()
    return [text for text in map(procedure_text, values) if text]


def _live_text_taken(memory: Memory, values: dict[str, Any]) -> str | None:
    """The text the change makes `memory` hold as a live memory when it did not before (a new
    text, or its own restored from superseded), or None: only one live memory without a key
    of an owner and kind may say it. A keyed memory is identified by its key, and may repeat
    another's text."""
    if memory.store_key is not None or values.get("lifecycle", memory.lifecycle) == "superseded":
        return None
    text_value: str = values.get("text", memory.text)
    if memory.lifecycle == "superseded" or text_value != memory.text:
        return text_value
    return None


def _key_moved_to(memory: Memory, values: dict[str, Any]) -> StoreKey | None:
    """The address the change moves a keyed memory to, or None: a new category moves its key
    with it (the keyed routes find it there), as the key is read by kind, category and key."""
    if memory.store_key is None or "category" not in values:
        return None
    # The column holds one of the kinds the API writes (a check constraint keeps it so).
    kind = cast("MemoryKind", memory.kind)
    return StoreKey(kind=kind, category=values["category"], key=memory.store_key)


def _confirmed_replacements(memory: Memory, values: dict[str, Any]) -> list[uuid.UUID]:
    """The facts a change that confirms a proposed fact makes it replace: the ids in its
    `metadata.proposed_supersedes`, as the change leaves the metadata (a change that sets
    metadata without them confirms the fact and replaces nothing). What the fact waited for
    leaves the metadata (into `values`): the review is done. None for any other change."""
    if values.get("lifecycle") != "confirmed" or memory.lifecycle != "proposed":
        return []
    metadata: dict[str, Any] = values.get("metadata_", memory.metadata_) or {}
    if metadata.get(PROPOSED_SUPERSEDES) is None:
        return []
    values["metadata_"] = reviewed(metadata)
    return named_replacements(metadata, memory.id)


def _changed_values(memory: Memory, values: dict[str, Any]) -> dict[str, Any]:
    """Those of `values` (by column) that differ from what `memory` stores, as the API shows
    them: times compared as instants, anything else as JSON."""

    def same(stored: object, value: object) -> bool:
        if isinstance(stored, datetime) or isinstance(value, datetime):
            return stored == value
        return json.dumps(jsonable(stored), sort_keys=True) == json.dumps(
            jsonable(value), sort_keys=True
        )

    return {
        column: value
        for column, value in values.items()
        if not same(getattr(memory, column), value)
    }


def _validated_changes(change: MemoryUpdate) -> dict[str, Any]:
    """The columns a change sets, once it is known to be acceptable: a future expiry, no
    secret in the text, speaker or metadata (the text stripped). `MemoryUpdate` refuses a null
    where a memory needs a value."""
    values: dict[str, Any] = change.model_dump(exclude_unset=True, exclude={"metadata"})
    if "metadata" in change.model_fields_set:
        values["metadata_"] = change.metadata or {}
    if change.expires_at is not None and change.expires_at <= datetime.now(UTC):
        raise ValidationFailed(
            "expires_at must be in the future.",
            errors=[{"loc": ["body", "expires_at"], "msg": "in the past", "type": "value_error"}],
        )
    refuse_secrets(values.get("metadata_"), ["body", "metadata"])
    refuse_secrets(values.get("speaker"), ["body", "speaker"])
    if "text" in values:
        values["text"] = changed_text(values["text"])
        refuse_secrets(values["text"], ["body", "text"])
    return values


def _procedures(rows: Sequence[ProcedureRow]) -> Procedures:
    return Procedures.model_validate(
        {
            slot: ProcedureSlotRead(text=row.text, memory_id=row.id, updated_at=row.updated_at)
            for slot, row in shown_in_slots(rows).items()
        }
    )
