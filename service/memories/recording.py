"""The mechanics every memory write shares, whoever asked for it (the API or the write path).

One place checks that the caller may write to the owner, refuses secrets, builds the row,
records the history event and schedules the embedding retry. `MemoryService` (API writes)
and `DerivedMemoryWriter` (extraction, turn storage, compaction) both write through it.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic_core import to_jsonable_python

from service.accounts.service import AccountService
from service.auth.owner import Owner, authorize_write
from service.auth.principal import Principal
from service.errors import ValidationFailed
from service.kit.post_commit import PostCommitTasks
from service.kit.secrets import refuse_secrets as kit_refuse_secrets
from service.memories.embedding import EmbeddingBackfill
from service.memories.errors import DuplicateMemory
from service.memories.models import Memory, MemoryEvent
from service.memories.postings import StatisticsRequests
from service.memories.repository import MemoryRepository
from service.memories.schemas import MemoryCreate, MemoryRead, MemoryWritten
from service.memories.store_key import StoreKey
from service.providers import Embedder

# The fields of a memory the durable-write policy reads, by their field (and column) names.
MEMORY_SECRET_FIELDS = ("text", "evidence", "speaker", "metadata")

ItemLocator = Callable[[int], list[str | int]]
"""Where the n-th memory of a write sits in the request, for a problem's `loc`."""


def in_batch(index: int) -> list[str | int]:
    return ["body", "items", index]


def as_body(index: int) -> list[str | int]:
    """A single-memory request: the memory is the body itself."""
    return ["body"]


@dataclass(frozen=True)
class OwnedCreate:
    owner: Owner
    item: MemoryCreate


class MemoryRecorder:
    def __init__(
        self,
        repository: MemoryRepository,
        accounts: AccountService,
        backfill: EmbeddingBackfill,
        post_commit: PostCommitTasks,
        principal: Principal,
        statistics: StatisticsRequests,
        bounded_from: int,
    ) -> None:
        self.repository = repository
        self.accounts = accounts
        self.backfill = backfill
        self.post_commit = post_commit
        self.principal = principal
        self.statistics = statistics
        self.bounded_from = bounded_from
        # A memory's `embedding_model` names the vector its tenant's searches compare, during
        # a change of model too (the live column's until the tenant switches, the new one's
        # after), whichever columns its writer filled.
        read = backfill.vector_columns.read_by(principal.tenant_id)
        repository.show_vector_models_of(read.model_column)

    @property
    def embedder(self) -> Embedder:
        return self.backfill.embedder

    def authorize(self, *owners: Owner) -> None:
        """Organization memory is written only by admins (from the credential's roles)."""
        for owner in owners:
            authorize_write(self.principal, owner)

    async def hold_writes(self, *owners: Owner) -> None:
        """Hold the write lock of each user among `owners` until the transaction ends, with
        the tenant's (alone, for the organization's memories: `AccountService
        .hold_owner_writes`): every write to memories takes them before its first statement,
        so it never meets a purge of the user or of the tenant half-way."""
        await self.accounts.hold_owner_writes(*owners)

    async def provision(self, owners: list[Owner]) -> None:
        """Create the tenant and user rows the owners' memories reference."""
        await self.accounts.ensure_tenant()
        for user_id in sorted({o.user_id for o in owners if o.user_id is not None}):
            await self.accounts.ensure_user(user_id)

    def validate_new(self, owned: list[OwnedCreate], locate: ItemLocator = in_batch) -> None:
        """Refuse secrets and past expiry times before anything is written."""
        self.authorize(*(entry.owner for entry in owned))
        for index, entry in enumerate(owned):
            for field in MEMORY_SECRET_FIELDS:
                refuse_secrets(getattr(entry.item, field), [*locate(index), field])
            if entry.item.expires_at is not None and entry.item.expires_at <= datetime.now(UTC):
                raise ValidationFailed(
                    "expires_at must be in the future.",
                    errors=[
                        {
                            "loc": [*locate(index), "expires_at"],
                            "msg": "in the past",
                            "type": "value_error",
                        }
                    ],
                )

    async def check_sources(self, owned: list[OwnedCreate], locate: ItemLocator = in_batch) -> None:
        """A memory's provenance is its owner's conversations: `source_thread_id` names a thread
        of its owner, and each of `source_message_ids` a message of its owner's threads (for
        the organization's memories, of any user of its tenant). Another user's or tenant's
        thread or message, or none at all, is refused, in the same words for each so the
        refusal tells nothing about conversations that are not the caller's: what forgetting
        a thread forgets, and what a purge redacts, is found by these ids."""
        errors: list[dict[str, Any]] = []
        threads: dict[Owner, set[uuid.UUID]] = {}
        messages: dict[Owner, set[uuid.UUID]] = {}
        for entry in owned:
            if entry.item.source_thread_id is not None:
                threads.setdefault(entry.owner, set()).add(entry.item.source_thread_id)
            messages.setdefault(entry.owner, set()).update(entry.item.source_message_ids)
        citable_threads = {
            owner: await self.repository.citable_threads(owner, sorted(ids))
            for owner, ids in threads.items()
        }
        citable_messages = {
            owner: await self.repository.citable_messages(owner, sorted(ids)) if ids else set()
            for owner, ids in messages.items()
        }
        for index, entry in enumerate(owned):
            thread_id = entry.item.source_thread_id
            if thread_id is not None and thread_id not in citable_threads[entry.owner]:
                errors.append(
                    {
                        "loc": [*locate(index), "source_thread_id"],
                        "msg": "names no thread of this memory's owner",
                        "type": "value_error",
                    }
                )
            for position, message_id in enumerate(entry.item.source_message_ids):
                if message_id not in citable_messages[entry.owner]:
                    errors.append(
                        {
                            "loc": [*locate(index), "source_message_ids", position],
                            "msg": "names no message of this memory's owner",
                            "type": "value_error",
                        }
                    )
        if errors:
            raise ValidationFailed(
                "A memory's sources must be its owner's: source_thread_id a thread, "
                "source_message_ids messages of the owner's threads.",
                errors=errors,
            )

    def insert_values(self, entry: OwnedCreate, vector: list[float] | None) -> dict[str, Any]:
        item = entry.item
        return {
            "scope": entry.owner.scope,
            "user_id": entry.owner.user_id,
            "kind": item.kind,
            "category": item.category,
            "text": item.text,
            "confidence": item.confidence,
            "lifecycle": item.lifecycle,
            "needs_review": item.needs_review,
            "event_at": item.event_at,
            "source_thread_id": item.source_thread_id,
            "source_message_ids": item.source_message_ids,
            "evidence": item.evidence,
            "speaker": item.speaker,
            "metadata_": item.metadata,
            "expires_at": item.expires_at,
            **self.vector_values(vector),
        }

    def vector_values(self, vector: list[float] | None) -> dict[str, Any]:
        """The vector columns' values for a new or changed text (`VectorColumns.stored_values`)."""
        return self.backfill.vector_columns.stored_values(vector)

    def schedule_backfill(self, memories: Iterable[Memory]) -> None:
        """Embed, after the commit, those of `memories` that lack, as written, a vector this
        process makes for a column it keeps vectors in (`VectorColumns.kept`): the model was
        down, or the columns changed between the embedding and the write (a change of model
        started meanwhile)."""
        model_columns = [column.model_column for column, _ in self.backfill.vector_columns.kept()]
        memory_ids = [
            memory.id
            for memory in memories
            if any(getattr(memory, model_column) is None for model_column in model_columns)
        ]
        if not memory_ids:
            return
        tenant_id = self.principal.tenant_id
        backfill = self.backfill

        async def retry() -> None:
            await backfill.retry(tenant_id, memory_ids)

        self.post_commit.add(retry)

    def count_added(self, memories: Iterable[Memory]) -> None:
        """Count new memories toward their owners' growth: an owner grown by a good share since
        its search statistics were counted has them recounted after the commit
        (`postings.OwnerGrowth`)."""
        added = Counter(
            Owner.org() if memory.user_id is None else Owner.user(memory.user_id)
            for memory in memories
        )
        for owner, count in sorted(added.items(), key=lambda item: item[0].key):
            self.statistics.wrote(owner, count, self.bounded_from)

    async def supersede(
        self,
        owner: Owner,
        memory_id: uuid.UUID,
        *,
        by: Memory | MemoryRead | None,
        reason: str,
        invalid_at: datetime | None = None,
    ) -> bool:
        """Mark a live memory superseded (by `by`, or by nothing when it was removed): it stops
        being true at `invalid_at` (the world's time of the change; now when not given), never
        before it began (`invalid_from`), stays readable, and the history records why. False
        when it is not a live memory of `owner`. Never deletes."""
        self.authorize(owner)
        memory = await self.repository.get(owner, memory_id, for_update=True)
        if memory is None or memory.lifecycle == "superseded":
            return False
        old_text = memory.text
        invalid_at = invalid_from(memory, invalid_at or datetime.now(UTC))
        updated = await self.repository.update(
            memory,
            {
                "lifecycle": "superseded",
                "superseded_by": by.id if by is not None else None,
                "invalid_at": invalid_at,
                "needs_review": False,
            },
        )
        await self.repository.add_events(
            [
                self.event(
                    updated,
                    "supersede",
                    old_text=old_text,
                    new_text=by.text if by is not None else None,
                    changes={
                        "lifecycle": "superseded",
                        "superseded_by": str(by.id) if by is not None else None,
                        "invalid_at": jsonable(invalid_at),
                        "reason": reason,
                    },
                )
            ]
        )
        return True

    async def supersede_confirmed(
        self, owner: Owner, confirmed: Memory | MemoryRead, replaced: Sequence[uuid.UUID]
    ) -> int:
        """Supersede the owner's live facts a proposed fact that was just confirmed replaces
        (`proposals`), as the write path supersedes: `superseded_by` the fact, invalid from the
        newest message it was taken from (when it was said; now when those messages are gone
        or it cites none), a `supersede` history event with the reason `confirmed`. A
        reviewer's confirmation and a confident repeat's both end here. How many it
        superseded."""
        invalid_at = await self.repository.latest_message_time(confirmed.source_message_ids)
        superseded = 0
        for memory_id in replaced:
            if await self.supersede(
                owner, memory_id, by=confirmed, reason="confirmed", invalid_at=invalid_at
            ):
                superseded += 1
        return superseded

    def event(
        self,
        memory: Memory,
        action: str,
        *,
        old_text: str | None,
        new_text: str | None,
        changes: dict[str, Any] | None = None,
        at: datetime | None = None,
    ) -> MemoryEvent:
        """The history event of a change to `memory`, timed as the change: at `memory`'s
        `updated_at` as the change wrote it (its insert's for an add, `MemoryRepository.update`'s
        for a change), or `at` for one that writes no time on the memory (a delete). A memory's
        changes wait for each other's row lock and each is timed after the one before
        (`MemoryRepository.update`), so the history in time order is the order they were
        made."""
        return MemoryEvent(
            tenant_id=memory.tenant_id,
            memory_id=memory.id,
            user_id=memory.user_id,
            action=action,
            old_text=old_text,
            new_text=new_text,
            changes=changes or {},
            actor=self.principal.subject,
            created_at=at or memory.updated_at,
        )

    async def insert_all_unless_duplicate(
        self,
        entries: Sequence[tuple[Owner, dict[str, Any]]],
        *,
        postings: bool = True,
        lock_existing: bool = False,
    ) -> list[tuple[Memory, bool]]:
        """`insert_unless_duplicate` for each (owner, values), answered in their order but
        written in the order of the unique index of live texts (owner, kind, content hash;
        equal ones in their own order, so the first of two is the one stored). A new memory
        holds its place in that index until its transaction ends: two writers that took the
        same texts in opposite orders would each wait for the other."""
        if len(entries) < 2:
            return [
                await self.insert_unless_duplicate(
                    owner, values, postings=postings, lock_existing=lock_existing
                )
                for owner, values in entries
            ]
        hashes = await self.repository.content_hashes([values["text"] for _, values in entries])
        order = sorted(
            range(len(entries)),
            key=lambda index: (
                entries[index][0].key,
                entries[index][1]["kind"],
                hashes[index],
            ),
        )
        stored: dict[int, tuple[Memory, bool]] = {}
        for index in order:
            owner, values = entries[index]
            stored[index] = await self.insert_unless_duplicate(
                owner, values, postings=postings, lock_existing=lock_existing
            )
        return [stored[index] for index in range(len(entries))]

    async def insert_unless_duplicate(
        self,
        owner: Owner,
        values: dict[str, Any],
        *,
        postings: bool = True,
        lock_existing: bool = False,
    ) -> tuple[Memory, bool]:
        """Insert a memory (`insert_values`) unless a live memory of `owner` of the same kind
        already says the same: the memory, and whether it was already there. `postings`: as
        for `MemoryRepository.insert_unless_duplicate`. `lock_existing`: the memory that was
        already there is locked until the transaction ends, for a caller that changes it
        (`MemoryRepository.update` times a change after its lock)."""
        kind, text_value = values["kind"], values["text"]
        # Twice at most: again only after forgetting an expired memory that held the place.
        for attempt in range(2):
            memory = await self.repository.insert_unless_duplicate(values, postings=postings)
            if memory is not None:
                return memory, False
            existing = await self.repository.find_live_duplicate(
                owner, kind, text_value, for_update=lock_existing
            )
            if existing is not None:
                return existing, True
            if attempt or not await self.forget_expired_holder(owner, kind, text_value):
                break
        # The memory the index found was superseded or forgotten before this write could see
        # it: writing again decides.
        raise DuplicateMemory("A concurrent change collided with this write; retry.")

    async def forget_expired_holder(self, owner: Owner, kind: str, text_value: str) -> bool:
        """Remove (`remove_expired`) the expired memory that still holds this text's place
        among the owner's live memories: it is gone for every reader, and must not keep a new
        memory from saying the same. True if there was one."""
        expired = await self.repository.expired_content_holder(owner, kind, text_value)
        if expired is None:
            return False
        await self.remove_expired([expired])
        return True

    async def forget_expired_key_holder(self, owner: Owner, address: StoreKey) -> None:
        """Remove (`remove_expired`) the expired memory that still holds this key's address:
        it is gone for every reader, and must not keep another memory from taking the key."""
        expired = await self.repository.expired_store_key_holder(
            owner, address.kind, address.category, address.key
        )
        if expired is not None:
            await self.remove_expired([expired])

    async def remove_expired(self, memories: list[Memory]) -> None:
        """Remove memories whose `expires_at` has passed exactly as the retention sweep does,
        history and all: the tenant keeps them no longer, and whether a later write or the
        sweep comes first must not decide what is left of them."""
        await self.repository.remove_with_history([m.id for m in memories])

    async def forget(self, memories: list[Memory]) -> None:
        """Delete memories, whose rows the transaction holds locked, keeping a `delete` event
        (with the old text) for each, timed after each memory's last change."""
        if not memories:
            return
        at = await self.repository.change_time(max(m.updated_at for m in memories))
        await self.repository.add_events(
            [self.event(m, "delete", old_text=m.text, new_text=None, at=at) for m in memories]
        )
        await self.repository.delete_many([m.id for m in memories])


def invalid_from(memory: Memory, changed_at: datetime) -> datetime:
    """When `memory` stops being true, for a change at `changed_at`: then, but never before
    the memory itself began — its `event_at` (when it happened or became true), else when it
    was recorded (`created_at`; the `happened_at` a search's date filters read). A change
    said before the fact was recorded or began (a conversation the write path reads late,
    replacing a fact the user set through the API since) ends it where it starts, not
    before: an interval that ends before it starts holds no time at all."""
    return max(changed_at, memory.event_at or memory.created_at)


def refuse_secrets(value: Any, location: list[str | int]) -> None:
    """The one secret policy for durable writes: 422 `SECRET_REFUSED` naming the rule."""
    if value:
        kit_refuse_secrets(value, tuple(location))


def written(memory: Memory, *, duplicate: bool) -> MemoryWritten:
    return MemoryWritten(**MemoryRead.model_validate(memory).model_dump(), duplicate=duplicate)


def jsonable(value: object) -> object:
    """`value` as a memory's history stores it: times and ids written exactly as the API
    writes them in its answers (RFC 3339 with a `Z`, the canonical UUID)."""
    return to_jsonable_python(value)
