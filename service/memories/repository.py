"""The memories domain's reads and writes (the search's fusion statement has `fusion/`);
every statement runs in the tenant-scoped transaction."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import (
    ColumnElement,
    Select,
    Text,
    TextClause,
    and_,
    bindparam,
    delete,
    func,
    literal_column,
    or_,
    select,
    text,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, UUID
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from service.auth.owner import Owner
from service.db import fetch_on_driver
from service.kit.repository import TenantRowRepository, one_of, rowcount
from service.memories.filters import MemoryFilter
from service.memories.models import SHOWN_VECTOR_MODEL, Memory, MemoryEvent
from service.memories.postings import PostingsRepository

M = aliased(Memory, name="m")

LIVE_CONTENT_INDEX = "uq_memory_live_content"
"""The unique index that holds one memory without a key per owner, kind and normalised text
among those not superseded (expired ones included, until they are deleted)."""

STORE_KEY_INDEX = "uq_memory_store_key"
"""The unique index that holds one memory per owner, kind, category and store key (a keyed
memory's address, `StoreKey`), whatever its lifecycle (expired ones included, until they are
deleted)."""


@dataclass(frozen=True)
class CategoryRelevance:
    """Which live memories of one category a new memory is reconciled with, beyond its nearest
    and an exact duplicate (`MemoryRepository.related_live`): those at least `similar_from`
    similar to it (cosine) among the owner's `NEAREST_READ` nearest, and those whose stored
    subject is `subject` (a normalised key)."""

    name: str
    subject: str | None
    similar_from: float


class ProcedureRow(NamedTuple):
    """A live procedural memory as its slot shows it."""

    id: uuid.UUID
    scope: str
    category: str
    text: str
    updated_at: datetime

    @classmethod
    def of(cls, memory: Memory) -> ProcedureRow:
        return cls(memory.id, memory.scope, memory.category or "", memory.text, memory.updated_at)


PROCEDURE_ROWS_SQL = """
SELECT m.id, m.scope, m.category, m.text, m.updated_at
  FROM memory m
 WHERE {filter}
   -- The kind as a literal: a plan made once for the statement then knows it may read
   -- `ix_memory_procedures`, partial to procedural memories, instead of every memory of the
   -- organization.
   AND m.kind = 'procedural' AND m.lifecycle <> 'superseded'
"""
"""The live procedural memories a `MemoryFilter` (`{filter}`, over `memory m`) selects, in the
columns a slot shows (`MemoryRepository.procedure_rows`)."""
"""`memory AS m`: the alias `MemoryFilter.where()` predicates are written against."""


def writers_lock_key(tenant_id: str, owner: Owner) -> str:
    """The lock that serialises the derived writes (extraction passes, turn storage,
    compaction) to one owner's memories until the transaction ends, taken after the user's
    write lock (which a purge holds alone). Explicit API writes do not take it: they never
    read a snapshot to reconcile against."""
    return f"memory_writes:{tenant_id}:{owner.lock_key}"


CITABLE_THREADS_SQL = text(
    "SELECT id FROM thread WHERE tenant_id = :tenant_id AND id = ANY(:thread_ids) "
    "AND (CAST(:user_id AS text) IS NULL OR user_id = :user_id) "
    "ORDER BY id FOR KEY SHARE"
).bindparams(bindparam("thread_ids", type_=ARRAY(UUID(as_uuid=True))))
"""Which of `thread_ids` are threads of this tenant, and of `user_id` unless it is NULL (the
organization, whose memories may come from any user's conversation), each locked until the
transaction ends.

The lock keeps a memory from being written from a thread that is being deleted, and a thread
from being deleted while a memory citing it is being written. KEY SHARE conflicts with the
deletion's lock (FOR UPDATE, which a thread's deletion and a purge take before they read what
to forget or redact) and with nothing else: appends and changes to the thread go on. So a
memory and its thread's deletion happen one after the other: written first, it is forgotten
(or redacted) with the thread; written after, its thread is none and the write a 422. Taken in
id order, as the purge takes a user's threads, so that none of them waits for another in a
circle."""


LATEST_MESSAGE_TIME_SQL = text(
    "SELECT max(created_at) FROM message WHERE tenant_id = :tenant_id AND id = ANY(:message_ids)"
).bindparams(bindparam("message_ids", type_=ARRAY(UUID(as_uuid=True))))
"""When the newest of `message_ids` (messages of this tenant) was stored; NULL for none of
them (forgotten with their thread)."""


CITABLE_MESSAGES_SQL = text(
    "SELECT m.id FROM message m JOIN thread t ON t.tenant_id = m.tenant_id AND t.id = m.thread_id"
    " WHERE m.tenant_id = :tenant_id AND m.id = ANY(:message_ids)"
    " AND (CAST(:user_id AS text) IS NULL OR t.user_id = :user_id)"
    " ORDER BY t.id FOR KEY SHARE OF t"
).bindparams(bindparam("message_ids", type_=ARRAY(UUID(as_uuid=True))))
"""Which of `message_ids` are messages of this tenant's threads, and of `user_id`'s unless it is
NULL (the organization's memories may come from any user's conversation), the threads they
are in locked until the transaction ends as `CITABLE_THREADS_SQL` locks them (a thread's
messages are deleted with it)."""


SOURCES_IN_OTHER_THREADS_SQL = text(
    "SELECT m.id, m.thread_id FROM message m JOIN thread t"
    " ON t.tenant_id = m.tenant_id AND t.id = m.thread_id"
    " WHERE m.tenant_id = :tenant_id AND m.id = ANY(:message_ids) AND m.thread_id <> :thread_id"
    " AND (CAST(:user_id AS text) IS NULL OR t.user_id = :user_id)"
).bindparams(bindparam("message_ids", type_=ARRAY(UUID(as_uuid=True))))
"""Which of `message_ids` are messages of another thread than `thread_id` that a memory of
`user_id` (the organization's when NULL) may cite, with their thread."""

REMOVE_MEMORIES_SQL: tuple[tuple[str, TextClause], ...] = (
    (
        "memory_event",
        text("DELETE FROM memory_event WHERE tenant_id = :tenant_id AND memory_id = ANY(:ids)"),
    ),
    ("memory", text("DELETE FROM memory WHERE tenant_id = :tenant_id AND id = ANY(:ids)")),
)
"""Memories the tenant keeps no longer (expired, or past its retention), with their history:
the events, then the memories (their postings go with them). Nothing of them is left for a
reader, an export or a history."""


async def remove_memories(
    session: AsyncSession, tenant_id: str, memory_ids: Sequence[uuid.UUID]
) -> dict[str, int]:
    """Remove these memories of the tenant as `REMOVE_MEMORIES_SQL` does; rows per table."""
    removed = dict.fromkeys((table for table, _ in REMOVE_MEMORIES_SQL), 0)
    if memory_ids:
        params = {"tenant_id": tenant_id, "ids": list(memory_ids)}
        for table, statement in REMOVE_MEMORIES_SQL:
            removed[table] = rowcount(await session.execute(statement, params))
    return removed


SOURCE_THREAD_FORGOTTEN = "source_thread_forgotten"
"""The `reason` of the history event of a memory that outlived the thread it named as its
source, because other threads' messages said it too: a change of provenance, not of the
memory, so it does not make the memory deliberate."""


def unembedded_among_statement(
    tenant_id: str, memory_ids: Sequence[uuid.UUID], column: str
) -> Select[uuid.UUID, str]:
    """The id and text of those of `memory_ids` with no vector in `column` (one of the vector
    columns): what the embedding backfill embeds. A partial index per live column
    (`WHERE <column> IS NULL`) serves it."""
    return select(Memory.id, Memory.text).where(
        Memory.tenant_id == tenant_id,
        one_of(Memory.id, memory_ids),
        getattr(Memory, column).is_(None),
    )


class MemoryRepository(TenantRowRepository[Memory, uuid.UUID]):
    """Every write of a memory's text also writes its postings (`memories/postings.py`), in
    the same transaction; deleting a memory deletes them (foreign key)."""

    model = Memory

    @property
    def _postings(self) -> PostingsRepository:
        return PostingsRepository(self._session, self._tenant_id)

    async def citable_threads(
        self, owner: Owner, thread_ids: Sequence[uuid.UUID]
    ) -> set[uuid.UUID]:
        """Which of `thread_ids` a memory of `owner` may name as its source: a thread of that
        user, or of any user of this tenant for the organization's memories."""
        result = await self._session.execute(
            CITABLE_THREADS_SQL,
            {
                "tenant_id": self._tenant_id,
                "thread_ids": list(thread_ids),
                "user_id": owner.user_id,
            },
        )
        return set(result.scalars())

    async def citable_messages(
        self, owner: Owner, message_ids: Sequence[uuid.UUID]
    ) -> set[uuid.UUID]:
        """Which of `message_ids` a memory of `owner` may name as its sources: messages of that
        user's threads, or of any user's of this tenant for the organization's memories."""
        result = await self._session.execute(
            CITABLE_MESSAGES_SQL,
            {
                "tenant_id": self._tenant_id,
                "message_ids": list(message_ids),
                "user_id": owner.user_id,
            },
        )
        return set(result.scalars())

    async def latest_message_time(self, message_ids: Sequence[uuid.UUID]) -> datetime | None:
        """`LATEST_MESSAGE_TIME_SQL`: when the newest of `message_ids` was stored."""
        if not message_ids:
            return None
        result = await self._session.execute(
            LATEST_MESSAGE_TIME_SQL,
            {"tenant_id": self._tenant_id, "message_ids": list(message_ids)},
        )
        latest: datetime | None = result.scalar_one()
        return latest

    def _matching(self, memory_filter: MemoryFilter) -> Select[Memory]:
        """The memories `memory_filter` selects (the one place a filter becomes SQL)."""
        return select(M).where(memory_filter.where(self._tenant_id).clause)

    def _owned(self, *owners: Owner) -> Select[Memory]:
        """Live (unexpired) memories of any of `owners` in this tenant, any lifecycle."""
        return self._matching(MemoryFilter.build(owners))

    async def insert_unless_duplicate(
        self, values: dict[str, Any], *, postings: bool = True
    ) -> Memory | None:
        """Insert a memory; None when a live memory with the same owner/kind/text exists.
        `postings=False` leaves its postings to the caller, which writes those of a whole batch
        in one statement (`write_postings`) before its transaction ends."""
        statement = (
            pg_insert(Memory)
            .values(tenant_id=self._tenant_id, **values)
            .on_conflict_do_nothing(
                index_elements=[
                    Memory.tenant_id,
                    Memory.scope,
                    # Literals, not bound parameters: Postgres infers the unique index from them.
                    func.coalesce(Memory.user_id, literal_column("''")),
                    Memory.kind,
                    Memory.content_hash,
                ],
                index_where=text("lifecycle <> 'superseded' AND store_key IS NULL"),
            )
            .returning(Memory)
        )
        memory = (await self._session.execute(statement)).scalar_one_or_none()
        if memory is not None and postings:
            await self._postings.write([memory.id])
        return memory

    async def content_hashes(self, texts: Sequence[str]) -> list[str]:
        """The `content_hash` a memory of each of `texts` has, in their order (one
        statement)."""
        given = (
            func.unnest(bindparam("texts", list(texts), type_=ARRAY(Text())))
            .table_valued("value", with_ordinality="place")
            .render_derived()
        )
        statement = select(_content_hash(given.c.value)).order_by(given.c.place)
        return list((await self._session.execute(statement)).scalars())

    async def write_postings(self, memory_ids: Sequence[uuid.UUID]) -> None:
        """The postings of memories inserted with `postings=False` (one statement)."""
        await self._postings.write(memory_ids)

    async def find_live_duplicate(
        self, owner: Owner, kind: str, text_value: str, *, for_update: bool = False
    ) -> Memory | None:
        """The owner's live memory of `kind` that says `text_value` (no keyed one); with
        `for_update`, locked until the transaction ends and as it is now (for a caller that
        changes it), and None if it no longer says so once its lock is taken."""
        statement = self._owned(owner).where(
            M.kind == kind,
            M.content_hash == _content_hash(text_value),
            M.lifecycle != "superseded",
            M.store_key.is_(None),
        )
        if for_update:
            statement = statement.with_for_update().execution_options(populate_existing=True)
        return (await self._session.execute(statement)).scalar_one_or_none()

    async def lock_writers(self, owner: Owner) -> None:
        await self.hold_lock(writers_lock_key(self._tenant_id, owner))

    async def lock_procedures(self, owner: Owner) -> None:
        """Serialise writes to the owner's procedural slots until the transaction ends, so a
        write reads the slots no other write is changing."""
        await self.hold_lock(f"procedures:{self._tenant_id}:{owner.lock_key}")

    async def related_live(
        self,
        owner: Owner,
        kind: str,
        *,
        text_value: str,
        vector: list[float] | None,
        vector_column: str,
        category: CategoryRelevance | None,
        nearest: int,
    ) -> list[tuple[Memory, float | None]]:
        """The owner's live memories of `kind` a new one must be reconciled with: the `nearest`
        by cosine to `vector` (compared with `vector_column`, which holds its model's vectors),
        an exact duplicate of `text_value`, and those of `category` that it is about (see
        `CategoryRelevance`), each with its cosine to `vector` (None without vectors).

        Each is found by an index of its own (the owner's vector index, the live memories'
        content, the facts that name a subject), so the read costs what it finds, not what
        the owner remembers: an owner's category grows with everything it remembers (30,000
        facts of one category at 100,000 memories), and reading it whole for every new fact
        made reconciling one take a second."""
        live = self._owned(owner).where(M.kind == kind, M.lifecycle != "superseded")
        # An exact duplicate, by the memories' content (`ix_memory_content`).
        found: list[Select[Any]] = [
            live.with_only_columns(M.id).where(M.content_hash == _content_hash(text_value))
        ]
        cosine: ColumnElement[Any] = literal_column("NULL")
        if vector is not None:
            stored = getattr(M, vector_column)
            distance = stored.cosine_distance(vector)
            # One walk of the owner's graph: its nearest, and of the category's memories among
            # the nearest `NEAREST_READ`, those similar enough to matter.
            walked = (
                live.where(stored.is_not(None))
                .with_only_columns(M.id, M.category, distance.label("distance"))
                .order_by(distance)
                .limit(max(nearest, NEAREST_READ) if category is not None else nearest)
                .subquery()
            )
            near = select(
                walked, func.row_number().over(order_by=walked.c.distance).label("place")
            ).subquery()
            kept = near.c.place <= nearest
            if category is not None:
                kept = or_(
                    kept,
                    and_(
                        near.c.category == category.name,
                        near.c.distance <= 1 - category.similar_from,
                    ),
                )
            found.append(select(near.c.id).where(kept))
            cosine = 1 - distance
        if category is not None and category.subject is not None:
            # Among the category's facts that name a subject (`ix_memory_subjects`), those
            # whose key is the subject's or '' (a subject beyond ASCII: the resolver compares).
            found.append(
                live.with_only_columns(M.id).where(
                    M.category == category.name,
                    literal_column("m.metadata ? 'subject'"),
                    literal_column(STORED_SUBJECT_KEY_SQL).in_([category.subject, ""]),
                )
            )
        statement = live.add_columns(cosine.label("cosine")).where(
            M.id.in_(union_all(*found).scalar_subquery())
        )
        # The owner's nearest are read from its own vector index only on a plan made for it:
        # on the plan for any owner, a write path's sixth pass took ten times as long.
        async with self.planned_for_its_values():
            rows = (await self._session.execute(statement)).all()
        return [(row[0], None if row[1] is None else float(row[1])) for row in rows]

    async def live_owned(
        self, owner: Owner, kind: str, *, limit: int, categories: Sequence[str] | None = None
    ) -> list[Memory]:
        """The owner's live memories of `kind` (of `categories` when given), oldest first: the
        categories a condition of the statement, before its limit (a limit read first and
        filtered after would miss every memory of the categories past the owner's oldest)."""
        live = MemoryFilter.build([owner], kinds=[kind], categories=categories)
        statement = (
            self._matching(live.live_unless_asked()).order_by(M.created_at, M.id).limit(limit)
        )
        return list((await self._session.execute(statement)).scalars())

    async def get(
        self, owner: Owner, memory_id: uuid.UUID, *, for_update: bool = False
    ) -> Memory | None:
        return await self.get_of([owner], memory_id, for_update=for_update)

    async def get_of(
        self, owners: Sequence[Owner], memory_id: uuid.UUID, *, for_update: bool = False
    ) -> Memory | None:
        """The memory, if it is one of `owners`' (and live: not expired)."""
        statement = self._owned(*owners).where(M.id == memory_id)
        if for_update:
            # The locked row is the truth: refresh a copy the session may hold from earlier.
            statement = statement.with_for_update().execution_options(populate_existing=True)
        return (await self._session.execute(statement)).scalar_one_or_none()

    async def reload_many(self, memory_ids: list[uuid.UUID]) -> dict[uuid.UUID, Memory]:
        """Memories by id as stored now, refreshing copies the session holds from earlier."""
        statement = self.scoped(one_of(Memory.id, memory_ids)).execution_options(
            populate_existing=True
        )
        return {memory.id: memory for memory in (await self._session.execute(statement)).scalars()}

    async def list_page(
        self,
        memory_filter: MemoryFilter,
        *,
        after: tuple[datetime, uuid.UUID] | None,
        limit: int,
    ) -> list[Memory]:
        """Newest first, after the keyset position `after`."""
        statement = self._matching(memory_filter)
        if len(memory_filter.owners) == 1:
            # The owner once more, as an equality (the filter states its users as `= ANY(…)`):
            # the index of each user's memories newest first (`ix_memory_user_newest`) then
            # gives a page in order and stops when it is full, where the filter's own
            # condition has every matching memory of the owner read and sorted.
            [owner] = memory_filter.owners
            statement = statement.where(
                M.user_id.is_(None) if owner.user_id is None else M.user_id == owner.user_id
            )
            if memory_filter.kinds is not None and len(memory_filter.kinds) == 1:
                # The kind too: the owner's memories of one kind in time order
                # (`ix_memory_owner`) give its page without passing the other kinds'.
                statement = statement.where(M.kind == memory_filter.kinds[0])
            if memory_filter.lifecycles is not None and len(memory_filter.lifecycles) == 1:
                # And the lifecycle: the owner's proposed (or superseded) memories in time
                # order (`ix_memory_unconfirmed`, which holds no confirmed one) give their page
                # without passing the confirmed memories, most of an owner's.
                statement = statement.where(M.lifecycle == memory_filter.lifecycles[0])
        if after is not None:
            statement = statement.where(func.row(M.created_at, M.id) < func.row(after[0], after[1]))
        statement = statement.order_by(M.created_at.desc(), M.id.desc()).limit(limit)
        # Whether the user's memories in time order (`ix_memory_user_newest`) fill a page
        # sooner than those of the filter's kind and lifecycle sorted depends on how many
        # match: a plan for any filter chose the sort, 60 ms a page at 100,000 memories.
        async with self.planned_for_its_values(in_index_order=_fills_from_newest(memory_filter)):
            return list((await self._session.execute(statement)).scalars())

    async def count(self, memory_filter: MemoryFilter) -> int:
        statement = (
            select(func.count()).select_from(M).where(memory_filter.where(self._tenant_id).clause)
        )
        return int((await self._session.execute(statement)).scalar_one())

    async def lock_matching(self, memory_filter: MemoryFilter) -> list[Memory]:
        """Every memory the filter selects, newest first, locked until the transaction ends
        and as it is now."""
        statement = (
            self._matching(memory_filter)
            .order_by(M.created_at.desc(), M.id.desc())
            .with_for_update()
            .execution_options(populate_existing=True)
        )
        return list((await self._session.execute(statement)).scalars())

    async def from_thread(self, owner: Owner, thread_id: uuid.UUID) -> list[Memory]:
        """The owner's memories whose provenance is the thread, locked for deletion and as they
        are now."""
        statement = (
            self._owned(owner)
            .where(M.source_thread_id == thread_id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
        return list((await self._session.execute(statement)).scalars())

    async def sources_in_other_threads(
        self, owner: Owner, thread_id: uuid.UUID, message_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, uuid.UUID]:
        """`SOURCES_IN_OTHER_THREADS_SQL`: message id -> its thread."""
        if not message_ids:
            return {}
        result = await self._session.execute(
            SOURCES_IN_OTHER_THREADS_SQL,
            {
                "tenant_id": self._tenant_id,
                "message_ids": list(message_ids),
                "thread_id": thread_id,
                "user_id": owner.user_id,
            },
        )
        return {row.id: row.thread_id for row in result}

    async def update(self, memory: Memory, values: dict[str, Any]) -> Memory:
        """Set `values` on `memory`, whose row the transaction holds locked (`memory` as the
        lock read it, or as this transaction last wrote it), and return it as written. The
        change is timed (`updated_at`) when it is made (`change_time`): after the memory's
        last change, whichever transaction began first. Its history event takes that time
        (`MemoryRecorder.event`)."""
        values = await self._timed(memory, values)
        memory = await self.update_by_id(memory.id, values)
        if "text" in values:
            await self._postings.write([memory.id], replacing=True)
        return memory

    async def update_unless_taken(self, memory: Memory, values: dict[str, Any]) -> Memory | None:
        """`update`, for a change that gives the memory a place a unique index holds for one
        memory: its text as a live memory (`LIVE_CONTENT_INDEX`), or its key's new address
        (`STORE_KEY_INDEX`). None, and nothing changed, when the index refuses it because
        another memory of the owner holds that place (perhaps one another transaction wrote
        after the caller looked). The statement runs in a savepoint, so the refusal leaves the
        transaction usable."""
        values = await self._timed(memory, values)
        try:
            async with self._session.begin_nested():
                written = await self.update_by_id(memory.id, values)
        except IntegrityError as error:
            if _violated_constraint(error) not in {LIVE_CONTENT_INDEX, STORE_KEY_INDEX}:
                raise
            return None
        if "text" in values:
            await self._postings.write([memory.id], replacing=True)
        return written

    async def _timed(self, memory: Memory, values: dict[str, Any]) -> dict[str, Any]:
        return {"updated_at": await self.change_time(memory.updated_at), **values}

    async def delete_many(self, memory_ids: list[uuid.UUID]) -> None:
        if memory_ids:
            await self._session.execute(
                delete(Memory)
                .where(Memory.tenant_id == self._tenant_id, one_of(Memory.id, memory_ids))
                .execution_options(synchronize_session=False)
            )

    def show_vector_models_of(self, model_field: str) -> None:
        """Have the memories this transaction reads name the model of their vector whose
        model `model_field` holds (`Memory.vector_model`): the column the tenant's searches
        read, so that a memory as written, read or listed names the model its search hits
        name."""
        self._session.info[SHOWN_VECTOR_MODEL] = model_field

    async def unembedded_among(
        self, memory_ids: Sequence[uuid.UUID], column: str
    ) -> list[tuple[uuid.UUID, str]]:
        """`unembedded_among_statement`'s rows."""
        statement = unembedded_among_statement(self._tenant_id, memory_ids, column)
        return [(row.id, row.text) for row in await self._session.execute(statement)]

    async def set_vectors(
        self, memory_id: uuid.UUID, vectors: dict[str, Any], expected_text: str
    ) -> bool:
        """Store vectors (`VectorColumns.stored_values`) unless the text changed meanwhile
        (then they are stale)."""
        statement = (
            update(Memory)
            .where(
                Memory.tenant_id == self._tenant_id,
                Memory.id == memory_id,
                Memory.text == expected_text,
            )
            .values(vectors)
            .execution_options(synchronize_session=False)
        )
        result = await self._session.execute(statement)
        return rowcount(result) > 0

    async def remove_with_history(self, memory_ids: Sequence[uuid.UUID]) -> None:
        """Remove memories and their history (`REMOVE_MEMORIES_SQL`)."""
        await remove_memories(self._session, self._tenant_id, memory_ids)

    async def add_events(self, events: list[MemoryEvent]) -> None:
        self._session.add_all(events)
        await self._session.flush()

    async def history(self, owners: Sequence[Owner], memory_id: uuid.UUID) -> list[MemoryEvent]:
        """The events of the memory, if it is (or was) one of `owners`', by their time, which
        is the order its changes were made in: each change is timed after the one before it
        (`update`, `MemoryRecorder.event`)."""
        statement = (
            select(MemoryEvent)
            .where(MemoryEvent.tenant_id == self._tenant_id, MemoryEvent.memory_id == memory_id)
            .order_by(MemoryEvent.created_at, MemoryEvent.id)
        )
        statement = statement.where(
            or_(
                *(
                    MemoryEvent.user_id.is_(None)
                    if owner.user_id is None
                    else MemoryEvent.user_id == owner.user_id
                    for owner in owners
                )
            )
        )
        return list((await self._session.execute(statement)).scalars())

    async def touched_by_others(
        self, memory_ids: Sequence[uuid.UUID], actors: Sequence[str]
    ) -> set[uuid.UUID]:
        """Of `memory_ids`, those with a history event by an actor not in `actors` (a change of
        provenance only, `SOURCE_THREAD_FORGOTTEN`, aside)."""
        if not memory_ids:
            return set()
        statement = (
            select(MemoryEvent.memory_id)
            .where(
                MemoryEvent.tenant_id == self._tenant_id,
                one_of(MemoryEvent.memory_id, memory_ids),
                MemoryEvent.actor.not_in(list(actors)),
                MemoryEvent.changes["reason"].astext.is_distinct_from(SOURCE_THREAD_FORGOTTEN),
            )
            .distinct()
        )
        return set((await self._session.execute(statement)).scalars())

    async def procedure_rows(self, *owners: Owner, slots: Sequence[str]) -> list[ProcedureRow]:
        """What `live_procedures` reads, as the slots show it, on the driver: the context block
        and a read of the procedures ask for them on every call."""
        predicate = MemoryFilter.build(owners, categories=slots).where(self._tenant_id)
        rows = await fetch_on_driver(
            self._session, PROCEDURE_ROWS_SQL.format(filter=predicate.sql), predicate.binds
        )
        return [ProcedureRow(**row) for row in rows]

    async def live_procedures(
        self, *owners: Owner, slots: Sequence[str], for_update: bool = False
    ) -> list[Memory]:
        """The live procedural memories of `owners` that fill one of `slots` (their category):
        the other procedural memories are never read as slots, so they are not loaded. With
        `for_update`, locked until the transaction ends and as they are now."""
        # The kind as a literal: a plan made once for the statement (asyncpg prepares it)
        # then knows it may read `ix_memory_procedures`, partial to procedural memories,
        # instead of every memory of the organization.
        statement = self._owned(*owners).where(
            M.kind == literal_column("'procedural'"),
            M.lifecycle != "superseded",
            M.category.in_(slots),
        )
        if for_update:
            statement = statement.with_for_update().execution_options(populate_existing=True)
        return list((await self._session.execute(statement)).scalars())

    # --- memories addressed by a client's key -------------------------------------------------

    async def lock_store_key(self, owner: Owner, kind: str, category: str | None, key: str) -> None:
        """Serialise writes to one key until the transaction ends: the first `put` of a key
        inserts, every later one (even a concurrent one) finds that row and updates it."""
        await self.hold_lock(
            f"memory_key:{self._tenant_id}:{owner.lock_key}:{kind}:{category or ''}:{key}"
        )

    async def find_by_store_key(
        self, owner: Owner, kind: str, category: str | None, key: str, *, for_update: bool = False
    ) -> Memory | None:
        statement = self._owned(owner).where(
            M.kind == kind,
            M.category.is_(None) if category is None else M.category == category,
            M.store_key == key,
        )
        if for_update:
            statement = statement.with_for_update().execution_options(populate_existing=True)
        return (await self._session.execute(statement)).scalar_one_or_none()

    async def expired_store_key_holder(
        self, owner: Owner, kind: str, category: str | None, key: str
    ) -> Memory | None:
        """An expired memory that still holds the key (reads no longer see it), locked."""
        return await self._expired_of(
            owner,
            kind,
            Memory.category.is_(None) if category is None else Memory.category == category,
            Memory.store_key == key,
        )

    async def expired_content_holder(
        self, owner: Owner, kind: str, text_value: str
    ) -> Memory | None:
        """An expired memory that still holds this text's place in `LIVE_CONTENT_INDEX` (reads
        no longer see it, the index still does), locked."""
        return await self._expired_of(
            owner,
            kind,
            Memory.content_hash == _content_hash(text_value),
            Memory.lifecycle != "superseded",
            Memory.store_key.is_(None),
        )

    async def _expired_of(
        self, owner: Owner, kind: str, *conditions: ColumnElement[bool]
    ) -> Memory | None:
        """The owner's expired memory of `kind` that meets `conditions`, locked."""
        statement = (
            select(Memory)
            .where(
                Memory.tenant_id == self._tenant_id,
                Memory.scope == owner.scope,
                Memory.user_id.is_(None)
                if owner.user_id is None
                else Memory.user_id == owner.user_id,
                Memory.kind == kind,
                *conditions,
                Memory.expires_at <= func.now(),
            )
            .with_for_update()
        )
        return (await self._session.execute(statement)).scalar_one_or_none()

    async def insert_keyed(self, values: dict[str, Any]) -> Memory:
        """Insert a memory that carries a store key (never an exact-duplicate conflict)."""
        statement = pg_insert(Memory).values(tenant_id=self._tenant_id, **values).returning(Memory)
        memory = (await self._session.execute(statement)).scalar_one()
        await self._postings.write([memory.id])
        return memory


def _fills_from_newest(memory_filter: MemoryFilter) -> bool:
    """Whether a page of one owner's memories under `memory_filter` is read in time order
    from an index that holds nearly only what the filter passes, so that the page's first
    entries fill it: a user's memories (`ix_memory_user_newest`), those of one kind
    (`ix_memory_owner`) or of one unconfirmed lifecycle (`ix_memory_unconfirmed`), the
    organization's live memories (`ix_memory_org_newest`); of these only the superseded or
    expired ones fail. Not for a filter that passes part of a kind by a category or a time
    bound (`MemoryFilter.passes_part_of_a_kind`: it may pass a few of many memories, and
    sorting those few is the cheaper read), nor for several lifecycles without the confirmed
    one, whose memories no index holds in one time order. The organization's are
    named by `user_id IS NULL`, which gives the indexes keyed by user no order: a kind or an
    unconfirmed lifecycle of them would be read from all of them."""
    if len(memory_filter.owners) != 1:
        return False
    [owner] = memory_filter.owners
    if owner.user_id is None:
        return memory_filter.kinds is None and not memory_filter.passes_part_of_a_kind
    lifecycles = memory_filter.lifecycles
    return not replace(memory_filter, lifecycles=None).passes_part_of_a_kind and (
        lifecycles is None or "confirmed" in lifecycles or len(lifecycles) == 1
    )


def subject_key_sql(subject: str) -> str:
    """The key of a subject (the SQL text `subject`) as the write path compares subjects
    (`extraction.prompt.normalise_subject`: an underscore where a camelCase word starts,
    case-folded, each run of characters other than a-z and 0-9 one underscore, none at either
    end, at most 64 characters), in SQL: the same key
    for a subject in ASCII, and '' for one beyond it, where case-folding may turn a character
    into ASCII letters ("ß" into "ss") and `lower` does not: a reader asking for a key asks for
    '' too, and compares those subjects' keys itself."""
    words = (
        f"regexp_replace(regexp_replace({subject}, '([a-z0-9])([A-Z])', '\\1_\\2', 'g'), "
        f"'([A-Z])([A-Z][a-z])', '\\1_\\2', 'g')"
    )
    return (
        f"CASE WHEN octet_length({subject}) <> char_length({subject}) THEN '' "
        f"ELSE btrim(left(btrim(regexp_replace(lower({words}), '[^a-z0-9]+', '_', 'g'), "
        f"'_'), 64), '_') END"
    )


STORED_SUBJECT_KEY_SQL = subject_key_sql("m.metadata ->> 'subject'")
"""A memory's subject key (`subject_key_sql`), in a statement over `M` (`memory AS m`)."""

NEAREST_READ = 50
"""How many of the owner's memories nearest a new one are read for those of its category
similar enough to matter (`CategoryRelevance.similar_from`): the owner's graph is walked once,
and its category is never read whole."""


def _violated_constraint(error: IntegrityError) -> str | None:
    """The name of the constraint or unique index the database said `error` violates."""
    # SQLAlchemy's adapted driver error keeps the driver's own (asyncpg's) as its cause.
    return getattr(error.orig.__cause__, "constraint_name", None) if error.orig else None


def _content_hash(text_value: str | ColumnElement[str]) -> ColumnElement[str]:
    """The `content_hash` a memory with this text has (the generated column's expression)."""
    return func.md5(func.lower(func.regexp_replace(func.btrim(text_value), r"\s+", " ", "g")))
