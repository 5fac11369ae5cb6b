"""The writes the write path derives from conversations: extraction, turn storage, compaction.

The write path reconciles new memories with what is known (`related`, `live_memories`,
`by_ids`), then applies its decisions here: store, supersede, re-confirm. Each write goes
through `MemoryRecorder`, with the same owner check and secret refusal as an API write.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from service.auth.owner import Owner
from service.memories.models import Memory
from service.memories.proposals import reviewed
from service.memories.recording import MemoryRecorder, OwnedCreate, jsonable, written
from service.memories.repository import CategoryRelevance
from service.memories.schemas import MemoryCreate, MemoryRead, MemoryWritten


@dataclass(frozen=True)
class DerivedMemory:
    """A memory the write path derived (extraction, turn storage, compaction), with its vector
    when one was computed already and the origin its history event records."""

    owner: Owner
    item: MemoryCreate
    vector: list[float] | None
    origin: str


@dataclass(frozen=True)
class RelatedMemory:
    """A live memory a new one is reconciled with, and its cosine to the new one's vector."""

    memory: Memory
    cosine: float | None


# `MemoryCreate.source_message_ids` holds at most this many; re-confirmations stop adding there.
SOURCE_MESSAGES_MAX = 100


class DerivedMemoryWriter:
    def __init__(self, recorder: MemoryRecorder) -> None:
        self._recorder = recorder
        self._repository = recorder.repository

    async def lock_derived_writes(self, owner: Owner) -> None:
        """Serialise derived writes to the owner's memories until the transaction ends, after
        taking the user's write lock as every write to a user's data does first."""
        await self._recorder.hold_writes(owner)
        await self._repository.lock_writers(owner)

    async def related(
        self,
        owner: Owner,
        kind: str,
        *,
        text_value: str,
        vector: list[float] | None,
        category: CategoryRelevance | None,
        nearest: int = 5,
    ) -> list[RelatedMemory]:
        """The owner's live memories a new memory with this text and vector must be reconciled
        with: nearest neighbours, those of its category it is about (`CategoryRelevance`) and an
        exact duplicate."""
        column = (
            None
            if vector is None
            else self._recorder.backfill.vector_columns.column_for(
                vector, self._recorder.principal.tenant_id
            )
        )
        rows = await self._repository.related_live(
            owner,
            kind,
            text_value=text_value,
            vector=vector if column is not None else None,
            vector_column=column.name if column is not None else "embedding",
            category=category,
            nearest=nearest,
        )
        return [RelatedMemory(memory, cosine) for memory, cosine in rows]

    async def live_memories(
        self, owner: Owner, kind: str, *, limit: int, categories: Sequence[str] | None = None
    ) -> list[Memory]:
        """The owner's live memories of `kind` (of `categories` when given), oldest first
        (compaction's input)."""
        return await self._repository.live_owned(owner, kind, limit=limit, categories=categories)

    async def by_ids(self, memory_ids: list[uuid.UUID]) -> dict[uuid.UUID, Memory]:
        """Memories of this tenant by id as stored now, whoever owns them: callers check
        ownership."""
        return await self._repository.reload_many(memory_ids) if memory_ids else {}

    async def record_derived(self, items: list[DerivedMemory]) -> list[MemoryWritten]:
        """Store derived memories one by one (with `add` events naming their origin).

        A confirmed one is stamped `last_confirmed_at`. An identical live memory is not stored
        again: it is re-confirmed (`reconfirm`, the item's source messages added to its own) and
        returned with `duplicate: true`. Org-scoped items need an admin principal, and secrets
        are refused, exactly as for API writes.
        """
        owned = [OwnedCreate(entry.owner, entry.item) for entry in items]
        self._recorder.validate_new(owned)
        await self._recorder.provision([entry.owner for entry in owned])
        now = datetime.now(UTC)
        results: list[MemoryWritten] = []
        added: list[Memory] = []
        rows = []
        for entry, owned_entry in zip(items, owned, strict=True):
            values = self._recorder.insert_values(owned_entry, entry.vector)
            if entry.item.lifecycle == "confirmed":
                values["last_confirmed_at"] = now
            rows.append((entry.owner, values))
        # An identical live memory is locked as it is found: it is re-confirmed below.
        stored = await self._recorder.insert_all_unless_duplicate(rows, lock_existing=True)
        for entry, (memory, duplicate) in zip(items, stored, strict=True):
            if duplicate:
                # The repeat's messages become sources of the memory too: it stays theirs when
                # the thread it came from first is forgotten.
                existing = await self._reconfirmed(
                    memory,
                    promote=False,
                    confidence=0.0,
                    source_message_ids=entry.item.source_message_ids,
                )
                results.append(written(existing, duplicate=True))
                continue
            await self._repository.add_events(
                [
                    self._recorder.event(
                        memory,
                        "add",
                        old_text=None,
                        new_text=memory.text,
                        changes={"origin": entry.origin},
                    )
                ]
            )
            added.append(memory)
            results.append(written(memory, duplicate=False))
        self._recorder.schedule_backfill(added)
        self._recorder.count_added(added)
        return results

    async def supersede(
        self,
        owner: Owner,
        memory_id: uuid.UUID,
        *,
        by: MemoryRead | None,
        reason: str,
        invalid_at: datetime | None = None,
    ) -> bool:
        """Mark a live memory superseded (`MemoryRecorder.supersede`). Never deletes."""
        return await self._recorder.supersede(
            owner, memory_id, by=by, reason=reason, invalid_at=invalid_at
        )

    async def reconfirm(
        self,
        owner: Owner,
        memory_id: uuid.UUID,
        *,
        promote: bool,
        confidence: float,
        source_message_ids: Sequence[uuid.UUID] = (),
    ) -> Memory | None:
        """The memory was said again: refresh `last_confirmed_at`, add the messages that
        repeated it to `source_message_ids` (up to `SOURCE_MESSAGES_MAX`) and record an
        `update` event (reason `reconfirmed`); with `promote`, a proposed memory becomes
        confirmed (its confidence raised to `confidence` if that is higher, what it waited for
        out of its metadata: `proposals.reviewed`; the caller supersedes what it replaces,
        `supersede_confirmed`). The memory as updated, or None when it is not a live memory of
        `owner`."""
        self._recorder.authorize(owner)
        memory = await self._repository.get(owner, memory_id, for_update=True)
        if memory is None or memory.lifecycle == "superseded":
            return None
        return await self._reconfirmed(
            memory, promote=promote, confidence=confidence, source_message_ids=source_message_ids
        )

    async def supersede_confirmed(
        self, owner: Owner, confirmed: Memory, replaced: Sequence[uuid.UUID]
    ) -> int:
        """Supersede what a fact `reconfirm` confirmed replaces, as a reviewer's confirmation
        does (`MemoryRecorder.supersede_confirmed`); how many it superseded."""
        return await self._recorder.supersede_confirmed(owner, confirmed, replaced)

    async def _reconfirmed(
        self,
        memory: Memory,
        *,
        promote: bool,
        confidence: float,
        source_message_ids: Sequence[uuid.UUID],
    ) -> Memory:
        """`reconfirm` on a live memory read (and locked) already; returns it updated."""
        values: dict[str, Any] = {"last_confirmed_at": datetime.now(UTC)}
        known_ids = list(memory.source_message_ids or [])
        added = [i for i in dict.fromkeys(source_message_ids) if i not in known_ids]
        if added:
            values["source_message_ids"] = (known_ids + added)[:SOURCE_MESSAGES_MAX]
        if promote and memory.lifecycle == "proposed":
            values.update(
                lifecycle="confirmed",
                needs_review=False,
                confidence=max(memory.confidence, confidence),
            )
            metadata = reviewed(memory.metadata_)
            if metadata != (memory.metadata_ or {}):
                values["metadata_"] = metadata
        updated = await self._repository.update(memory, values)
        # By the API's field names: the attribute `metadata_` is the field `metadata`.
        changes = {
            "metadata" if key == "metadata_" else key: jsonable(value)
            for key, value in values.items()
            if key != "source_message_ids"
        }
        changes["reason"] = "reconfirmed"
        if added:
            changes["source_message_ids_added"] = [str(i) for i in added]
        await self._repository.add_events(
            [
                self._recorder.event(
                    updated, "update", old_text=updated.text, new_text=updated.text, changes=changes
                )
            ]
        )
        return updated

    async def deliberate(
        self, memory_ids: Sequence[uuid.UUID], derived_by: Sequence[str]
    ) -> set[uuid.UUID]:
        """Of `memory_ids`, the memories someone other than the `derived_by` actors wrote or
        changed (through the API): the write path never replaces those on weak evidence."""
        return await self._repository.touched_by_others(memory_ids, derived_by)
