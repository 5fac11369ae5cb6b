"""SQL of the write path; every statement runs in the tenant-scoped transaction.

Where a thread's passes got to is one `extraction_cursor` row per thread (the last message
processed); it only moves forward, so deleting the memories a pass wrote never makes a later
pass write them again. Every finished pass is also recorded in the audit trail
(`extraction.pass`: what it read and wrote) and every failed job run as `job.failed`, which is
what the health endpoints read.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from service.audit.models import AuditEntry
from service.threads.models import Message, Thread

PASS_ACTION = "extraction.pass"  # noqa: S105 - an audit action name
FAILURE_ACTION = "job.failed"
SYSTEM_ACTOR_KIND = "system"
THREAD_TARGET = "thread"


READ_CURSOR_SQL = text(
    "SELECT through_seq FROM extraction_cursor WHERE tenant_id = :tenant_id "
    "AND thread_id = :thread_id"
)

ADVANCE_CURSOR_SQL = text(
    """
    INSERT INTO extraction_cursor AS c (tenant_id, thread_id, through_seq, updated_at)
    VALUES (:tenant_id, :thread_id, :through_seq, now())
    ON CONFLICT (tenant_id, thread_id) DO UPDATE
       SET through_seq = greatest(c.through_seq, EXCLUDED.through_seq),
           updated_at = EXCLUDED.updated_at
    """
)
"""Move a thread's cursor to `through_seq`, never backwards. (The clock is read in VALUES:
Citus refuses now() in the DO UPDATE clause of a distributed table.)"""


@dataclass(frozen=True, slots=True)
class PassCursor:
    """Where the thread's last pass ended: the `seq` of the last message it processed."""

    through_seq: int


class ExtractionRepository:
    def __init__(self, session: AsyncSession, tenant_id: str) -> None:
        self._session = session
        self._tenant_id = tenant_id

    async def thread_owner(self, thread_id: uuid.UUID) -> str | None:
        statement = select(Thread.user_id).where(
            Thread.tenant_id == self._tenant_id, Thread.id == thread_id
        )
        return (await self._session.execute(statement)).scalar_one_or_none()

    async def cursor(self, thread_id: uuid.UUID) -> PassCursor | None:
        """The thread's last finished pass; None before the first."""
        value = (
            await self._session.execute(
                READ_CURSOR_SQL, {"tenant_id": self._tenant_id, "thread_id": thread_id}
            )
        ).scalar_one_or_none()
        return None if value is None else PassCursor(through_seq=int(value))

    async def messages_between(
        self, thread_id: uuid.UUID, first_seq: int, *, limit: int
    ) -> list[Message]:
        """Up to `limit` messages from position `first_seq` on, in order."""
        statement = (
            select(Message)
            .where(
                Message.tenant_id == self._tenant_id,
                Message.thread_id == thread_id,
                Message.seq >= first_seq,
            )
            .order_by(Message.seq)
            .limit(limit)
        )
        return list((await self._session.execute(statement)).scalars())

    async def record(
        self, action: str, actor: str, thread_id: uuid.UUID, detail: dict[str, Any]
    ) -> None:
        """Audit `action`; a finished pass also moves the thread's cursor forward."""
        if action == PASS_ACTION:
            await self._session.execute(
                ADVANCE_CURSOR_SQL,
                {
                    "tenant_id": self._tenant_id,
                    "thread_id": thread_id,
                    "through_seq": int(detail["through_seq"]),
                },
            )
        self._session.add(
            AuditEntry(
                tenant_id=self._tenant_id,
                actor_kind=SYSTEM_ACTOR_KIND,
                actor_id=actor,
                action=action,
                target_type=THREAD_TARGET,
                target_id=str(thread_id),
                detail=detail,
            )
        )
        await self._session.flush()

    async def recent(self, action: str, *, user_id: str | None, limit: int) -> list[AuditEntry]:
        """The newest entries of `action` (about `user_id`'s threads, when given)."""
        statement = select(AuditEntry).where(
            AuditEntry.tenant_id == self._tenant_id,
            AuditEntry.action == action,
            AuditEntry.target_type == THREAD_TARGET,
        )
        if user_id is not None:
            statement = statement.where(AuditEntry.detail["user_id"].astext == user_id)
        statement = statement.order_by(AuditEntry.created_at.desc(), AuditEntry.id.desc()).limit(
            limit
        )
        return list((await self._session.execute(statement)).scalars())
