"""All SQL of the threads domain; every statement runs in the tenant-scoped transaction."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import (
    BigInteger,
    BindParameter,
    Integer,
    Select,
    Text,
    bindparam,
    delete,
    func,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from service.db import fetch_on_driver
from service.kit.repository import TenantRowRepository, one_of, rowcount
from service.threads.models import Message, Thread, ThreadSummary

DELETE_THREAD_CHILDREN_SQL = {
    table: text(
        f"DELETE FROM {table} WHERE tenant_id = :tenant_id AND thread_id = :thread_id"  # noqa: S608 - constant table names
    )
    for table in ("extraction_cursor", "thread_summary", "message")
}
"""The rows that belong to a thread, per table (deleted before the thread itself)."""

MESSAGES_WITH_LABELS_SQL = text(
    """
    SELECT id,
           -- A scalar subquery: counted once, not again for every labelled row.
           (SELECT count(*) FROM message
             WHERE tenant_id = :tenant_id AND thread_id = :thread_id
               AND seq < :first_seq AND role = 'user') + numbered.label AS label
      FROM (SELECT id, seq, role,
                   count(*) FILTER (WHERE role = 'user') OVER (ORDER BY seq) AS label
              FROM message
             WHERE tenant_id = :tenant_id AND thread_id = :thread_id
               AND seq >= :first_seq AND seq <= :last_seq
           ) AS numbered
     WHERE numbered.role = 'user' AND numbered.seq = ANY(CAST(:seqs AS bigint[]))
    """
)
"""Human-turn labels (`#N`, counted from 1 over the thread) of the given user messages: the
human messages before the first of them counted, and those from it to the last numbered, so
labelling a page of a long thread reads that page's rows, not every row before it."""

TURNS_BY_LABEL_SQL = text(
    """
    SELECT id FROM (
        SELECT id, seq,
               count(*) FILTER (WHERE role = 'user') OVER (ORDER BY seq) AS label
          FROM message
         WHERE tenant_id = :tenant_id AND thread_id = :thread_id
    ) AS numbered
     WHERE label = ANY(CAST(:labels AS bigint[]))
     ORDER BY seq
    """
)
"""The messages of the given human turns: turn #N is its human message and every message
after it up to the next human message."""


NEWEST_MESSAGES_SQL = """
SELECT id, role, content, seq
  FROM message
 WHERE tenant_id = :tenant_id AND thread_id = :thread_id
   AND seq >= :from_seq AND seq < :before_seq
 ORDER BY seq DESC
 LIMIT :page
"""
"""A page of a thread's messages, newest first, between two positions (`uq_message_thread_seq`
read backwards): the columns a prompt replays."""

THREAD_OF_USER_SQL = (
    "SELECT 1 FROM thread WHERE tenant_id = :tenant_id AND id = :thread_id AND user_id = :user_id"
)
"""Whether the thread is the user's (`ThreadRepository.is_users`)."""

SUMMARY_ROWS_SQL = """
SELECT sequence, end_index, entries
  FROM thread_summary
 WHERE tenant_id = :tenant_id AND thread_id = :thread_id
 ORDER BY sequence
"""
"""A thread's summaries, oldest first, in the columns a prompt replays (`ThreadRepository.
summary_rows`)."""


class SummaryRow(NamedTuple):
    """A stored summary as a prompt replays it (`summaries.SummaryLike`)."""

    sequence: int
    end_index: int
    entries: list[dict[str, Any]]


def last_change(thread: Thread) -> datetime:
    """When the thread or its messages last changed, as the thread's row says: its
    `updated_at`, which an append moves to its last message's time, or its `last_message_at`
    where that is later (a thread an import restored as its export held it)."""
    if thread.last_message_at is None:
        return thread.updated_at
    return max(thread.updated_at, thread.last_message_at)


NO_LATER_SEQ = 2**63 - 1
"""A position after every message's (the largest bigint): the first page starts at the end."""


class ThreadRepository(TenantRowRepository[Thread, uuid.UUID]):
    model = Thread

    @property
    def session(self) -> AsyncSession:
        """The transaction the threads' append listeners queue their follow-up work in."""
        return self._session

    async def add(self, thread: Thread) -> Thread:
        self._session.add(thread)
        await self._session.flush()
        await self._session.refresh(thread)
        return thread

    async def get(
        self, user_id: str, thread_id: uuid.UUID, *, lock: bool = False, exclusive: bool = False
    ) -> Thread | None:
        """The user's thread. `lock`: locked until the transaction ends against its other
        writers (appends, changes, deletions), as FOR NO KEY UPDATE: the writes that hold the
        thread KEY SHARE while they write from it (a memory citing it, `CITABLE_THREADS_SQL`;
        a write-path pass) go on alongside. `exclusive`: against those too (FOR UPDATE), as a
        deletion of the thread, or of what passes write from it, takes it before it reads
        what to delete: such a write commits first, or waits and then finds it deleted."""
        if not (lock or exclusive):
            return await self.get_by_id(thread_id, Thread.user_id == user_id)
        statement = (
            self.scoped(Thread.id == thread_id, Thread.user_id == user_id)
            .with_for_update(key_share=not exclusive)
            # As it is now, not as an earlier statement of the transaction loaded it.
            .execution_options(populate_existing=True)
        )
        return (await self._session.execute(statement)).scalar_one_or_none()

    async def list_page(
        self, user_id: str, *, after: tuple[datetime, uuid.UUID] | None, limit: int
    ) -> list[Thread]:
        statement = self.scoped(Thread.user_id == user_id)
        if after is not None:
            statement = statement.where(
                func.row(Thread.updated_at, Thread.id) < func.row(after[0], after[1])
            )
        statement = statement.order_by(Thread.updated_at.desc(), Thread.id.desc()).limit(limit)
        return list((await self._session.execute(statement)).scalars())

    async def update(self, thread: Thread, values: dict[str, Any]) -> Thread:
        """Set `values` on `thread`, whose row the transaction holds locked (`thread` as the
        lock read it), and return it as written. The change is timed (`updated_at`) when it
        is made (`change_time`): after the thread's last change, whichever transaction began
        first."""
        at = await self.change_time(last_change(thread))
        return await self.update_by_id(thread.id, {"updated_at": at, **values})

    async def delete(self, thread_id: uuid.UUID) -> dict[str, int]:
        """Delete the thread and what hangs off it; rows deleted per table. The children are
        deleted first, explicitly, so that each table's count is reported (the foreign keys
        would cascade them silently)."""
        params = {"tenant_id": self._tenant_id, "thread_id": thread_id}
        deleted = {
            table: rowcount(await self._session.execute(statement, params))
            for table, statement in DELETE_THREAD_CHILDREN_SQL.items()
        }
        deleted["thread"] = await self.delete_by_id(thread_id)
        return deleted

    async def next_seq(self, thread_id: uuid.UUID) -> int:
        """The next free position; call with the thread row locked. Added here, not in SQL: a
        thread whose last position is the largest `bigint` has a next one all the same, which
        the caller refuses."""
        statement = select(func.max(Message.seq)).where(
            Message.tenant_id == self._tenant_id, Message.thread_id == thread_id
        )
        last = (await self._session.execute(statement)).scalar_one()
        return 0 if last is None else int(last) + 1

    async def messages_by_client_ids(
        self, thread_id: uuid.UUID, client_ids: list[str]
    ) -> dict[str, Message]:
        if not client_ids:
            return {}
        statement = select(Message).where(
            Message.tenant_id == self._tenant_id,
            Message.thread_id == thread_id,
            Message.client_message_id.in_(client_ids),
        )
        return {
            m.client_message_id: m
            for m in (await self._session.execute(statement)).scalars()
            if m.client_message_id is not None
        }

    async def append_messages(self, thread: Thread, rows: list[dict[str, Any]]) -> list[Message]:
        """Insert `rows` (at least one), the thread's next messages, and return them in
        position order; the thread's `last_message_at` and `updated_at` become the last one's
        time. `thread`'s row is held locked (`thread` as the lock read it).

        The messages are timed (`created_at`) when the append is made, the time read once
        (`change_time`): the first after the thread's last change, each next one a microsecond
        after the one before. So a thread's messages are timed in the order of their
        positions, and its `updated_at` never goes back, whichever append's transaction began
        first; and each message of an append has a time of its own, which the memories taken
        from it are dated by."""
        first = await self.change_time(last_change(thread))
        timed = [
            {"tenant_id": self._tenant_id, **row, "created_at": first + timedelta(microseconds=n)}
            for n, row in enumerate(sorted(rows, key=lambda row: int(row["seq"])))
        ]
        statement = pg_insert(Message).values(timed).returning(Message)
        inserted = sorted(
            (await self._session.execute(statement)).scalars(), key=lambda message: message.seq
        )
        last = inserted[-1].created_at
        await self.update_by_id(thread.id, {"updated_at": last, "last_message_at": last})
        return inserted

    async def list_messages(
        self, thread_id: uuid.UUID, *, after_seq: int | None, limit: int
    ) -> list[Message]:
        statement = select(Message).where(
            Message.tenant_id == self._tenant_id, Message.thread_id == thread_id
        )
        if after_seq is not None:
            statement = statement.where(Message.seq > after_seq)
        statement = statement.order_by(Message.seq).limit(limit)
        return list((await self._session.execute(statement)).scalars())

    async def messages_of_turns(self, thread_id: uuid.UUID, labels: list[int]) -> list[Message]:
        ids = (
            (
                await self._session.execute(
                    TURNS_BY_LABEL_SQL,
                    {"tenant_id": self._tenant_id, "thread_id": thread_id, "labels": labels},
                )
            )
            .scalars()
            .all()
        )
        if not ids:
            return []
        statement = (
            select(Message)
            .where(Message.tenant_id == self._tenant_id, one_of(Message.id, ids))
            .order_by(Message.seq)
        )
        return list((await self._session.execute(statement)).scalars())

    async def labels_for(self, thread_id: uuid.UUID, seqs: list[int]) -> dict[uuid.UUID, int]:
        if not seqs:
            return {}
        rows = (
            await self._session.execute(
                MESSAGES_WITH_LABELS_SQL,
                {
                    "tenant_id": self._tenant_id,
                    "thread_id": thread_id,
                    "seqs": seqs,
                    "first_seq": min(seqs),
                    "last_seq": max(seqs),
                },
            )
        ).all()
        return {row.id: int(row.label) for row in rows}

    async def summaries(self, thread_id: uuid.UUID) -> list[ThreadSummary]:
        statement = (
            select(ThreadSummary)
            .where(ThreadSummary.tenant_id == self._tenant_id, ThreadSummary.thread_id == thread_id)
            .order_by(ThreadSummary.sequence)
        )
        return list((await self._session.execute(statement)).scalars())

    async def delete_summaries(self, thread_id: uuid.UUID) -> int:
        statement = (
            delete(ThreadSummary)
            .where(ThreadSummary.tenant_id == self._tenant_id, ThreadSummary.thread_id == thread_id)
            .returning(ThreadSummary.id)
            .execution_options(synchronize_session=False)
        )
        return len((await self._session.execute(statement)).all())

    async def nth_latest_human_seq(self, thread_id: uuid.UUID, n: int) -> int | None:
        """The position of the n-th most recent human message (n ≥ 1), if there are n."""
        statement = (
            select(Message.seq)
            .where(
                Message.tenant_id == self._tenant_id,
                Message.thread_id == thread_id,
                Message.role == "user",
            )
            .order_by(Message.seq.desc())
            .offset(n - 1)
            .limit(1)
        )
        value = (await self._session.execute(statement)).scalar_one_or_none()
        return None if value is None else int(value)

    async def is_users(self, user_id: str, thread_id: uuid.UUID) -> bool:
        """Whether the thread exists and is the user's, on the driver (a context block asks on
        every call)."""
        rows = await self._thread_rows(
            THREAD_OF_USER_SQL, thread_id, bindparam("user_id", user_id, type_=Text())
        )
        return bool(rows)

    async def summary_rows(self, thread_id: uuid.UUID) -> list[SummaryRow]:
        """The thread's summaries, oldest first, on the driver (a context block reads them on
        every call)."""
        rows = await self._thread_rows(SUMMARY_ROWS_SQL, thread_id)
        return [SummaryRow(row["sequence"], row["end_index"], row["entries"]) for row in rows]

    async def newest_messages(
        self, thread_id: uuid.UUID, *, from_seq: int, before_seq: int, page: int
    ) -> list[Mapping[str, Any]]:
        """Up to `page` messages with `from_seq` <= seq < `before_seq`, newest first: id, role,
        content and seq, on the driver (a context block reads them on every call)."""
        return await self._thread_rows(
            NEWEST_MESSAGES_SQL,
            thread_id,
            bindparam("from_seq", from_seq, type_=BigInteger()),
            bindparam("before_seq", before_seq, type_=BigInteger()),
            bindparam("page", page, type_=Integer()),
        )

    async def _thread_rows(
        self, sql: str, thread_id: uuid.UUID, *binds: BindParameter[Any]
    ) -> list[Mapping[str, Any]]:
        """The rows of `sql` about one thread of this tenant (`:tenant_id`, `:thread_id`, and
        `binds`), on the driver."""
        return await fetch_on_driver(
            self._session,
            sql,
            [
                bindparam("tenant_id", self._tenant_id, type_=Text()),
                bindparam("thread_id", thread_id, type_=UUID(as_uuid=True)),
                *binds,
            ],
        )

    async def newest_messages_from(
        self, thread_id: uuid.UUID, seq: int, *, limit: int
    ) -> list[Message]:
        """The newest `limit` messages from position `seq` on, newest first."""
        statement = self._from_position(thread_id, seq).order_by(Message.seq.desc()).limit(limit)
        return list((await self._session.execute(statement)).scalars())

    async def messages_from(self, thread_id: uuid.UUID, seq: int) -> list[Message]:
        statement = self._from_position(thread_id, seq).order_by(Message.seq)
        return list((await self._session.execute(statement)).scalars())

    def _from_position(self, thread_id: uuid.UUID, seq: int) -> Select[Message]:
        """The thread's messages from position `seq` on."""
        return select(Message).where(
            Message.tenant_id == self._tenant_id,
            Message.thread_id == thread_id,
            Message.seq >= seq,
        )
