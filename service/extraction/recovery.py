"""Background work that gave up, queued again: the per-tenant sweep, and an operator's rerun.

A job that works on a thread (extraction, turn storage, a summary) is retried with backoff a
few times and then gives up; its thread's messages stay, but nothing would process them until
the next append, and a conversation that ended during a model outage has none. So:

* **The sweep.** When a job gives up, the worker's failure hook schedules the tenant's sweep
  (`WRITE_PATH_SWEEP_JOB`, a durable pgqueuer job). The sweep finds the tenant's threads whose
  job of some kind gave up since the thread last progressed (`STRANDED_SQL`) and queues a fresh
  job of that kind for each once its backoff has passed: `write_path_sweep_interval_seconds`
  after it gave up, doubling with every time it was queued again without progress (at most
  `write_path_sweep_max_backoff_seconds`). While threads wait for their backoff, the sweep
  schedules itself again for the earliest of them; once none is left it stops. Per-tenant
  scheduling keeps every read under the tenant's row-level security (a global scan would have
  to read across tenants).
* **Rerun.** An admin (`POST /v1/admin/jobs/rerun`) or an operator (`mneme admin
  rerun-jobs`) queues fresh write-path and summary jobs for one thread or all of a
  user's threads at once.

Every job queued here is fresh (none of another job's spent attempts) and recorded as a
`job.requeued` audit entry. A rerun never lets a pass write organization memory; the sweep
gives a job back the org permission the job that gave up had.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from service.accounts.repository import AccountRepository
from service.auth.principal import Principal
from service.config import Settings
from service.db import tenant_transaction
from service.errors import NotFound
from service.extraction.health import write_path_mode
from service.extraction.record import RequeueRecord
from service.extraction.repository import ExtractionRepository
from service.extraction.schemas import WritePathMode
from service.jobs import (
    MEMORY_EXTRACTION_JOB,
    THREAD_SUMMARY_JOB,
    TURN_MEMORIES_JOB,
    JobHandler,
    enqueue_memory_extraction,
    enqueue_thread_summary,
    enqueue_turn_memories,
)
from service.jobs.sweep import enqueue_write_path_sweep
from service.observability import current_request_id
from service.providers.llm import ChatModel
from service.threads.errors import ThreadNotFound
from service.threads.service import summarization_status

logger = logging.getLogger("mneme.extraction.recovery")

RECOVERY_ACTOR = "mneme:recovery"
WRITE_PATH_KINDS: Mapping[WritePathMode, str] = {
    "llm": MEMORY_EXTRACTION_JOB,
    "turns": TURN_MEMORIES_JOB,
}
"""The kind of job that runs the write path in each mode (none when it is off)."""
# Most threads one rerun queues work for (a user's most recently active first).
RERUN_MAX_THREADS = 500


@dataclass(frozen=True, slots=True)
class SweepResult:
    """The (thread, kind) jobs a sweep queued, and when it runs next (None: not again)."""

    queued: list[tuple[uuid.UUID, str]] = field(default_factory=list)
    next_run: datetime | None = None


@dataclass(frozen=True, slots=True)
class RerunResult:
    threads: list[uuid.UUID]
    kinds: list[str]


class WritePathRecovery:
    """Queues a tenant's stranded thread work again (see the module docstring)."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        settings: Settings,
        chat_model: ChatModel | None,
    ) -> None:
        """`chat_model`: the model of the workers that run what is queued here (this
        process's own)."""
        self._sessionmaker = sessionmaker
        self._settings = settings
        self._write_kind = WRITE_PATH_KINDS.get(write_path_mode(settings, chat_model))
        self._summaries = (
            settings.jobs_enabled and summarization_status(settings, chat_model).enabled
        )
        self.interval = timedelta(seconds=settings.write_path_sweep_interval_seconds)
        self._max_backoff = timedelta(seconds=settings.write_path_sweep_max_backoff_seconds)

    @classmethod
    def for_any_worker(
        cls, sessionmaker: async_sessionmaker[AsyncSession], settings: Settings
    ) -> WritePathRecovery:
        """For a process that queues work the service's workers run (`mneme admin rerun-jobs`),
        whose settings need not name their model (an ops shell, a CronJob): it queues the kinds
        every worker runs as its own write path and summaries. A worker with a model extracts
        and summarises; one without runs the extraction job as turn storage
        (`WritePath.extract`) and passes the summary job over. A turn storage job, queued for
        lack of a model here, would have a service with one store the turns raw and move past
        them, never to extract from them."""
        recovery = cls(sessionmaker, settings, None)
        if recovery._write_kind is not None:
            recovery._write_kind = MEMORY_EXTRACTION_JOB
        recovery._summaries = settings.jobs_enabled and settings.thread_summary_keep_recent >= 1
        return recovery

    def backoff(self, requeues: int) -> timedelta:
        """How long after giving up a thread's work is queued again, having been queued again
        `requeues` times since the thread last progressed."""
        return min(self.interval * (1 << min(requeues, 32)), self._max_backoff)

    async def _queue(
        self,
        session: AsyncSession,
        tenant_id: str,
        thread_id: uuid.UUID,
        kind: str,
        *,
        org_writes: bool,
    ) -> None:
        if kind == MEMORY_EXTRACTION_JOB:
            await enqueue_memory_extraction(session, tenant_id, thread_id, org_writes=org_writes)
        elif kind == TURN_MEMORIES_JOB:
            await enqueue_turn_memories(session, tenant_id, thread_id)
        else:
            await enqueue_thread_summary(session, tenant_id, thread_id)

    def _current_kind(self, kind: str) -> str | None:
        """The kind of job that does now what a job of `kind` did (the write path's mode may
        have changed since), or None when that work is off."""
        if kind == THREAD_SUMMARY_JOB:
            return kind if self._summaries else None
        return self._write_kind

    async def sweep(self, tenant_id: str, *, now: datetime | None = None) -> SweepResult:
        """Queue fresh jobs for the tenant's stranded threads whose backoff has passed, and
        schedule the next sweep while others still wait."""
        now = now or datetime.now(UTC)
        queued: list[tuple[uuid.UUID, str]] = []
        next_run: datetime | None = None
        async with tenant_transaction(self._sessionmaker, tenant_id) as session:
            # A write to the tenant's data (jobs, audit entries): after the tenant's write lock,
            # so a purge of the tenant never drops its jobs while this queues others.
            await AccountRepository(session, tenant_id).hold_tenant_writes()
            repository = ExtractionRepository(session, tenant_id)
            for stranded in await repository.stranded(THREAD_SUMMARY_JOB):
                kind = self._current_kind(stranded.kind)
                if kind is None:
                    continue
                due = stranded.failed_at + self.backoff(stranded.requeues)
                if due > now:
                    next_run = due if next_run is None else min(next_run, due)
                    continue
                await self._queue(
                    session, tenant_id, stranded.thread_id, kind, org_writes=stranded.org_writes
                )
                # Recorded under the kind that gave up, so its backoff keeps counting.
                await repository.record_requeue(
                    RECOVERY_ACTOR,
                    stranded.thread_id,
                    RequeueRecord(user_id=stranded.user_id, kind=stranded.kind, reason="sweep"),
                )
                queued.append((stranded.thread_id, kind))
            if next_run is not None:
                await enqueue_write_path_sweep(session, tenant_id, delay=next_run - now)
        if queued:
            logger.info("sweep of tenant %s queued %d stranded jobs", tenant_id, len(queued))
        return SweepResult(queued=queued, next_run=next_run)

    async def rerun(
        self,
        session: AsyncSession,
        tenant_id: str,
        user_id: str,
        thread_id: uuid.UUID | None,
        *,
        requested_by: Principal | None = None,
    ) -> RerunResult:
        """Queue fresh write-path and summary jobs, in `session`'s tenant transaction, for the
        user's thread (or all the user's threads with messages, the most recently active first,
        at most `RERUN_MAX_THREADS`). No kinds when background work is off.

        Each queued job is audited as `requested_by` (an admin over the API, with its request
        id; the operator at a terminal), or as the recovery actor when no one is named."""
        kinds = [
            kind
            for kind in (self._write_kind, THREAD_SUMMARY_JOB if self._summaries else None)
            if kind is not None
        ]
        # A write to the user's data (jobs on its threads, audit entries about it): after the
        # user's write lock, as every such write, so no job queued here outlives a purge.
        await AccountRepository(session, tenant_id).hold_user_writes(user_id)
        repository = ExtractionRepository(session, tenant_id)
        threads = await repository.threads_of(user_id, thread_id, limit=RERUN_MAX_THREADS)
        for thread in threads:
            for kind in kinds:
                await self._queue(session, tenant_id, thread, kind, org_writes=False)
                record = RequeueRecord(user_id=user_id, kind=kind, reason="rerun")
                if requested_by is None:
                    await repository.record_requeue(RECOVERY_ACTOR, thread, record)
                else:
                    await repository.record_requeue(
                        requested_by.subject,
                        thread,
                        record,
                        actor_kind=requested_by.kind,
                        request_id=current_request_id(),
                    )
        return RerunResult(threads=threads, kinds=kinds)


class RerunInTransaction:
    """`WritePathRecovery.rerun` bound to one request's tenant transaction."""

    def __init__(
        self, recovery: WritePathRecovery, session: AsyncSession, principal: Principal
    ) -> None:
        self._recovery = recovery
        self._session = session
        self._principal = principal

    async def rerun(self, user_id: str, thread_id: uuid.UUID | None) -> RerunResult:
        """As `WritePathRecovery.rerun`; a named thread that is not the user's (or has no
        messages) is a 404."""
        result = await self._recovery.rerun(
            self._session,
            self._principal.tenant_id,
            user_id,
            thread_id,
            requested_by=self._principal,
        )
        if thread_id is not None and not result.threads:
            raise ThreadNotFound(f"No thread {thread_id} of this user with messages.")
        if not result.threads:
            raise NotFound(f"User {user_id!r} has no thread with messages here.")
        return result


def write_path_sweep_job(recovery: WritePathRecovery) -> JobHandler:
    """The handler of `WRITE_PATH_SWEEP_JOB`."""

    async def handle(payload: Mapping[str, str]) -> None:
        await recovery.sweep(payload["tenant_id"])

    return handle
