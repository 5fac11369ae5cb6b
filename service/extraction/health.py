"""The write path's health: failed job runs made visible per tenant, and what an operator sees.

pgqueuer logs a failed job without its payload in a table all tenants share, so a failure could
not be told apart per tenant or user there. The worker's failure hook records each failed run
in the tenant's audit trail instead (`job.failed`: kind, thread, attempt, whether a retry
follows, the error's type), next to the `extraction.pass` entries of the passes that finished;
a run that gave up also schedules the tenant's sweep (`recovery.py`), which queues the thread's
work again with backoff.
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from service.accounts.repository import AccountRepository
from service.config import Settings
from service.db import tenant_transaction
from service.extraction.record import FailureRecord, PassRecord
from service.extraction.repository import ExtractionRepository, Recorded
from service.extraction.schemas import (
    JobCountRead,
    JobFailureRead,
    PassRead,
    PendingJobRead,
    SummaryPassRead,
    TenantJobs,
    UserJobs,
    WritePathMode,
)
from service.jobs import MEMORY_EXTRACTION_JOB, THREAD_SUMMARY_JOB, TURN_MEMORIES_JOB
from service.jobs.status import JobStatusRepository, PendingJob
from service.jobs.sweep import enqueue_write_path_sweep
from service.jobs.worker import JobFailure
from service.providers.llm import ChatModel, LLMUnavailable

logger = logging.getLogger("mneme.extraction.health")

JOBS_ACTOR = "mneme:jobs"
REPORTED_KINDS = (MEMORY_EXTRACTION_JOB, TURN_MEMORIES_JOB, THREAD_SUMMARY_JOB)
LIST_LIMIT = 50


class JobFailureRecorder:
    """The worker's failure hook: one `job.failed` audit entry per failed run of a job that
    works on a thread (the kinds in `REPORTED_KINDS`)."""

    def __init__(
        self, sessionmaker: async_sessionmaker[AsyncSession], sweep_delay: timedelta
    ) -> None:
        self._sessionmaker = sessionmaker
        self._sweep_delay = sweep_delay

    async def __call__(self, failure: JobFailure) -> None:
        tenant_id = failure.payload.get("tenant_id")
        raw_thread = failure.payload.get("thread_id")
        if failure.entrypoint not in REPORTED_KINDS or not tenant_id or not raw_thread:
            return
        thread_id = uuid.UUID(raw_thread)
        async with tenant_transaction(self._sessionmaker, tenant_id) as session:
            repository = ExtractionRepository(session, tenant_id)
            user_id = await repository.thread_owner(thread_id)
            if user_id is None:  # the thread is gone: nothing left to fail for
                return
            # A write to the user's data (an audit entry about its thread, the tenant's
            # sweep): after the user's write lock, as every such write, the thread then held
            # to the commit. A purge of the user or the tenant (or the thread's deletion) that
            # came first is seen here, and one that comes later waits for this record and
            # removes it: written under no lock, it landed after such a purge.
            await AccountRepository(session, tenant_id).hold_user_writes(user_id)
            if await repository.thread_owner(thread_id, hold=True) is None:
                logger.info(
                    "failed %s run on thread %s of tenant %s not recorded: the thread was "
                    "deleted or purged meanwhile",
                    failure.entrypoint,
                    thread_id,
                    tenant_id,
                )
                return
            await repository.record_failure(
                JOBS_ACTOR,
                thread_id,
                FailureRecord(
                    user_id=user_id,
                    kind=failure.entrypoint,
                    attempt=failure.attempt,
                    final=failure.final,
                    error=describe(failure.error),
                    org_writes=failure.payload.get("org_writes") == "true",
                ),
            )
            if failure.final:
                # The sweep queues the thread's work again once the backoff has passed.
                await enqueue_write_path_sweep(session, tenant_id, delay=self._sweep_delay)


def describe(error: Exception) -> str:
    """The error's type, and for model errors their message (which never quotes content)."""
    name = type(error).__name__
    if isinstance(error, LLMUnavailable):
        return f"{name}: {error}"
    return name


def write_path_mode(settings: Settings, chat_model: ChatModel | None) -> WritePathMode:
    if not (settings.extraction_enabled and settings.jobs_enabled):
        return "off"
    return "turns" if chat_model is None else "llm"


class WritePathHealth:
    """Reads what the queue holds and what the audit trail recorded, for one tenant: the
    principal's (the queue's tables are shared, so the tenant is always passed explicitly)."""

    def __init__(
        self,
        jobs: JobStatusRepository,
        passes: ExtractionRepository,
        settings: Settings,
        chat_model: ChatModel | None,
    ) -> None:
        self._jobs = jobs
        self._passes = passes
        self._mode = write_path_mode(settings, chat_model)
        self._strategy = settings.extraction_strategy

    async def for_user(self, user_id: str) -> UserJobs:
        pending = await self._jobs.pending(REPORTED_KINDS, user_id=user_id, limit=LIST_LIMIT)
        failures = await self._passes.recent_failures(user_id=user_id, limit=LIST_LIMIT)
        passes = await self._passes.recent_passes(user_id=user_id, limit=LIST_LIMIT)
        summaries = await self._passes.recent_summaries(user_id, limit=LIST_LIMIT)
        return UserJobs(
            extraction=self._mode,
            strategy=self._strategy,
            pending=[_pending(job) for job in pending],
            failures=[_failure(entry) for entry in failures],
            passes=[_pass(entry) for entry in passes],
            summaries=[
                SummaryPassRead(
                    thread_id=s.thread_id,
                    start_index=s.start_index,
                    end_index=s.end_index,
                    model=s.model,
                    finished_at=s.created_at,
                )
                for s in summaries
            ],
        )

    async def for_tenant(self) -> TenantJobs:
        counts = await self._jobs.counts(REPORTED_KINDS)
        pending = await self._jobs.pending(REPORTED_KINDS, user_id=None, limit=LIST_LIMIT)
        failures = await self._passes.recent_failures(user_id=None, limit=LIST_LIMIT)
        return TenantJobs(
            extraction=self._mode,
            strategy=self._strategy,
            counts=[
                JobCountRead(
                    kind=c.kind,
                    status=c.status,
                    jobs=c.jobs,
                    retrying=c.retrying,
                    interrupted=c.interrupted,
                    oldest_created_at=c.oldest_created_at,
                )
                for c in counts
            ],
            pending=[_pending(job) for job in pending],
            failures=[_failure(entry) for entry in failures],
        )


def _pending(job: PendingJob) -> PendingJobRead:
    return PendingJobRead(
        id=job.id,
        kind=job.kind,
        status=job.status,
        attempts=job.attempts,
        uncounted_runs=job.uncounted_runs,
        thread_id=job.thread_id,
        user_id=job.user_id,
        created_at=job.created_at,
        execute_after=job.execute_after,
    )


def _failure(entry: Recorded[FailureRecord]) -> JobFailureRead:
    return JobFailureRead(
        thread_id=entry.thread_id,
        failed_at=entry.at,
        **entry.record.model_dump(exclude={"org_writes"}),
    )


def _pass(entry: Recorded[PassRecord]) -> PassRead:
    return PassRead(
        thread_id=entry.thread_id,
        finished_at=entry.at,
        **entry.record.model_dump(exclude={"org_writes"}),
    )
