"""SQL of the write path; every statement runs in the tenant-scoped transaction.

Where a thread's passes got to is one `extraction_cursor` row per thread (the last message
processed); it only moves forward, so deleting the memories a pass wrote never makes a later
pass write them again. Every finished pass is also recorded in the audit trail
(`extraction.pass`: a `PassRecord`) and every failed job run as `job.failed` (a
`FailureRecord`), which is what the health endpoints read.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from pydantic import BaseModel
from sqlalchemy import select, text

from service.audit.models import AuditEntry
from service.extraction.record import FailureRecord, PassRecord, RequeueRecord
from service.kit.repository import TenantRepository
from service.threads.models import Message, Thread, ThreadSummary

PASS_ACTION = "extraction.pass"  # noqa: S105 - an audit action name
FAILURE_ACTION = "job.failed"
REQUEUE_ACTION = "job.requeued"
SYSTEM_ACTOR_KIND = "system"
THREAD_TARGET = "thread"

R = TypeVar("R", bound=BaseModel)


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


STRANDED_SQL = text(
    """
    WITH final AS (
        SELECT CAST(a.target_id AS uuid) AS thread_id, a.detail ->> 'kind' AS kind,
               a.created_at, coalesce(CAST(a.detail ->> 'org_writes' AS boolean), false) AS org
          FROM audit_log a
         WHERE a.tenant_id = :tenant_id AND a.action = 'job.failed'
           AND a.target_type = 'thread' AND CAST(a.detail ->> 'final' AS boolean)
    ),
    requeued AS (
        SELECT CAST(a.target_id AS uuid) AS thread_id, a.detail ->> 'kind' AS kind, a.created_at
          FROM audit_log a
         WHERE a.tenant_id = :tenant_id AND a.action = 'job.requeued'
           AND a.target_type = 'thread'
    ),
    gave_up AS (
        SELECT f.thread_id, f.kind, max(f.created_at) AS failed_at, bool_or(f.org) AS org_writes
          FROM final f
         GROUP BY f.thread_id, f.kind
    ),
    progress AS (
        SELECT g.*, t.user_id,
               CASE WHEN g.kind = :summary_kind
                    THEN (SELECT max(s.created_at) FROM thread_summary s
                           WHERE s.tenant_id = :tenant_id AND s.thread_id = g.thread_id)
                    ELSE (SELECT c.updated_at FROM extraction_cursor c
                           WHERE c.tenant_id = :tenant_id AND c.thread_id = g.thread_id)
               END AS progressed_at
          FROM gave_up g
          JOIN thread t ON t.tenant_id = :tenant_id AND t.id = g.thread_id
    )
    SELECT p.thread_id, p.user_id, p.kind, p.failed_at, p.org_writes,
           (SELECT count(*) FROM requeued r
             WHERE r.thread_id = p.thread_id AND r.kind = p.kind
               AND r.created_at > coalesce(p.progressed_at, '-infinity')) AS requeues,
           (SELECT max(r.created_at) FROM requeued r
             WHERE r.thread_id = p.thread_id AND r.kind = p.kind) AS requeued_at
      FROM progress p
     WHERE p.failed_at > coalesce(p.progressed_at, '-infinity')
       AND p.failed_at > coalesce(
               (SELECT max(r.created_at) FROM requeued r
                 WHERE r.thread_id = p.thread_id AND r.kind = p.kind), '-infinity')
     ORDER BY p.failed_at
    """
)
"""Per thread and job kind whose last run gave up (a final `job.failed`) after the thread last
progressed (its extraction cursor moved, or for summaries a summary was written) and after the
last time it was queued again: when it gave up, whether the failed job could write org memory,
and how often it was queued again since the thread last progressed."""


@dataclass(frozen=True, slots=True)
class Stranded:
    """A thread whose job of `kind` gave up, waiting to be queued again."""

    thread_id: uuid.UUID
    user_id: str
    kind: str
    failed_at: datetime
    org_writes: bool
    requeues: int


@dataclass(frozen=True, slots=True)
class Recorded(Generic[R]):
    """An audit record about a thread, and when it was written."""

    thread_id: uuid.UUID | None
    record: R
    at: datetime


@dataclass(frozen=True, slots=True)
class PassCursor:
    """Where the thread's last pass ended: the `seq` of the last message it processed."""

    through_seq: int


class ExtractionRepository(TenantRepository):
    async def thread_owner(self, thread_id: uuid.UUID, *, hold: bool = False) -> str | None:
        """The user whose thread it is (None: no such thread). `hold`: the thread is kept from
        being deleted until the transaction ends (KEY SHARE, which a deletion in progress is
        waited for under, and then is no thread), as a pass holds the thread it writes from."""
        statement = select(Thread.user_id).where(
            Thread.tenant_id == self._tenant_id, Thread.id == thread_id
        )
        if hold:
            statement = statement.with_for_update(read=True, key_share=True)
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

    async def finish_pass(self, actor: str, thread_id: uuid.UUID, record: PassRecord) -> None:
        """Record a finished pass in the audit trail and move the thread's cursor to its last
        message (never backwards)."""
        await self._session.execute(
            ADVANCE_CURSOR_SQL,
            {
                "tenant_id": self._tenant_id,
                "thread_id": thread_id,
                "through_seq": record.through_seq,
            },
        )
        await self._audit(PASS_ACTION, actor, thread_id, record.detail())

    async def record_failure(self, actor: str, thread_id: uuid.UUID, record: FailureRecord) -> None:
        """Record a failed job run on the thread in the audit trail."""
        await self._audit(FAILURE_ACTION, actor, thread_id, record.detail())

    async def record_requeue(
        self,
        actor: str,
        thread_id: uuid.UUID,
        record: RequeueRecord,
        *,
        actor_kind: str = SYSTEM_ACTOR_KIND,
        request_id: str | None = None,
    ) -> None:
        """Record that a fresh job of `record.kind` was queued for the thread: by the service
        itself (the default actor kind), or by a caller whose request asked for it."""
        await self._audit(
            REQUEUE_ACTION,
            actor,
            thread_id,
            record.detail(),
            actor_kind=actor_kind,
            request_id=request_id,
        )

    async def stranded(self, summary_kind: str) -> list[Stranded]:
        """The tenant's threads whose job gave up since they last progressed (`STRANDED_SQL`)."""
        rows = await self._session.execute(
            STRANDED_SQL, {"tenant_id": self._tenant_id, "summary_kind": summary_kind}
        )
        return [
            Stranded(
                thread_id=row.thread_id,
                user_id=row.user_id,
                kind=row.kind,
                failed_at=row.failed_at,
                org_writes=bool(row.org_writes),
                requeues=int(row.requeues),
            )
            for row in rows
        ]

    async def threads_of(
        self, user_id: str, thread_id: uuid.UUID | None, *, limit: int
    ) -> list[uuid.UUID]:
        """The user's threads that have messages (only `thread_id`, when given), newest first."""
        statement = select(Thread.id).where(
            Thread.tenant_id == self._tenant_id,
            Thread.user_id == user_id,
            Thread.last_message_at.is_not(None),
        )
        if thread_id is not None:
            statement = statement.where(Thread.id == thread_id)
        statement = statement.order_by(Thread.last_message_at.desc()).limit(limit)
        return list((await self._session.execute(statement)).scalars())

    async def recent_summaries(self, user_id: str, *, limit: int) -> list[ThreadSummary]:
        """The newest summaries written on `user_id`'s threads (the summary passes that wrote)."""
        statement = (
            select(ThreadSummary)
            .join(
                Thread,
                (Thread.tenant_id == ThreadSummary.tenant_id)
                & (Thread.id == ThreadSummary.thread_id),
            )
            .where(ThreadSummary.tenant_id == self._tenant_id, Thread.user_id == user_id)
            .order_by(ThreadSummary.created_at.desc(), ThreadSummary.id.desc())
            .limit(limit)
        )
        return list((await self._session.execute(statement)).scalars())

    async def _audit(
        self,
        action: str,
        actor: str,
        thread_id: uuid.UUID,
        detail: dict[str, object],
        *,
        actor_kind: str = SYSTEM_ACTOR_KIND,
        request_id: str | None = None,
    ) -> None:
        self._session.add(
            AuditEntry(
                tenant_id=self._tenant_id,
                actor_kind=actor_kind,
                actor_id=actor,
                action=action,
                target_type=THREAD_TARGET,
                target_id=str(thread_id),
                detail=detail,
                request_id=request_id,
            )
        )
        await self._session.flush()

    async def recent_passes(self, *, user_id: str | None, limit: int) -> list[Recorded[PassRecord]]:
        """The newest finished passes (on `user_id`'s threads, when given)."""
        return [
            Recorded(_thread(e.target_id), PassRecord.model_validate(e.detail), e.created_at)
            for e in await self._recent(PASS_ACTION, user_id=user_id, limit=limit)
        ]

    async def recent_failures(
        self, *, user_id: str | None, limit: int
    ) -> list[Recorded[FailureRecord]]:
        """The newest failed job runs (on `user_id`'s threads, when given)."""
        return [
            Recorded(_thread(e.target_id), FailureRecord.model_validate(e.detail), e.created_at)
            for e in await self._recent(FAILURE_ACTION, user_id=user_id, limit=limit)
        ]

    async def _recent(self, action: str, *, user_id: str | None, limit: int) -> list[AuditEntry]:
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


def _thread(target_id: str | None) -> uuid.UUID | None:
    try:
        return uuid.UUID(target_id) if target_id else None
    except ValueError:
        return None
