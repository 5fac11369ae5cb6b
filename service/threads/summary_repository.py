"""SQL of the summary pipeline; every statement runs in the tenant-scoped transaction."""

from __future__ import annotations

import uuid

from sqlalchemy import func, select

from service.threads.models import Message, Thread, ThreadSummary
from service.threads.repository import ThreadRepository


class SummaryRepository(ThreadRepository):
    """The thread queries a summary pass needs on top of the thread repository's."""

    async def thread_owner(self, thread_id: uuid.UUID, *, hold: bool = False) -> str | None:
        """The user whose thread it is; None when there is no such thread. `hold`: the thread
        is kept from being deleted until the transaction ends (KEY SHARE, which a deletion in
        progress is waited for under, and then is no thread)."""
        statement = select(Thread.user_id).where(
            Thread.tenant_id == self._tenant_id, Thread.id == thread_id
        )
        if hold:
            statement = statement.with_for_update(read=True, key_share=True)
        return (await self._session.execute(statement)).scalar_one_or_none()

    async def lock_writers(self, thread_id: uuid.UUID) -> None:
        """Serialise summary writers of one thread until the transaction ends (appends are
        not blocked: they never take this lock)."""
        await self.hold_lock(f"thread_summary:{self._tenant_id}:{thread_id}")

    async def last_compressed_end(self, thread_id: uuid.UUID) -> int | None:
        """The largest `end_index` of the thread's summaries (None without summaries)."""
        statement = select(func.max(ThreadSummary.end_index)).where(
            ThreadSummary.tenant_id == self._tenant_id, ThreadSummary.thread_id == thread_id
        )
        value = (await self._session.execute(statement)).scalar_one()
        return None if value is None else int(value)

    async def latest_sequence(self, thread_id: uuid.UUID) -> int | None:
        statement = select(func.max(ThreadSummary.sequence)).where(
            ThreadSummary.tenant_id == self._tenant_id, ThreadSummary.thread_id == thread_id
        )
        value = (await self._session.execute(statement)).scalar_one()
        return None if value is None else int(value)

    async def count_human_messages_before(self, thread_id: uuid.UUID, seq: int) -> int:
        statement = select(func.count()).where(
            Message.tenant_id == self._tenant_id,
            Message.thread_id == thread_id,
            Message.role == "user",
            Message.seq < seq,
        )
        return int((await self._session.execute(statement)).scalar_one())

    async def add_summary(self, summary: ThreadSummary) -> ThreadSummary:
        """Insert the summary; it comes back detached, so it stays readable after the commit
        whatever the sessionmaker's `expire_on_commit`."""
        self._session.add(summary)
        await self._session.flush()
        await self._session.refresh(summary)
        self._session.expunge(summary)
        return summary
