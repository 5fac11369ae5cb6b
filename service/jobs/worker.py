"""The job worker that runs inside the service process, on pgqueuer's `QueueManager`.

Delivery is at least once: a job is deleted only after its handler returned, so handlers must be
idempotent. What happens to a job:

* its handler returns → done (moved to `pgqueuer_log`);
* its handler raises → re-queued with exponential backoff (`RetryPolicy`, at most `max_delay`
  between runs) until `max_attempts` runs have failed, then dropped and logged as an
  exception;
* a run failed for a cause outside the job → retried the same way, but the run never counts
  towards `max_attempts` (`is_outside_the_job`): the database could not be reached, or every
  pooled connection was busy (the process is overloaded, `SERVICE_BUSY` to its requests). The
  work waits out the outage or the load instead of being dropped by it, one run per
  `max_delay` at most while it lasts. A job dropped during a database outage would be lost
  for good: the failure hook that records a give-up (and has the write path's sweep queue
  the work again) needs the database too;
* its last attempt fails while a database outage keeps the failure hook from recording that
  → retried instead, the run not counted: it gives up once its give-up can be recorded;
* the process dies mid-run → the row stays `picked` and stops heart-beating; any worker picks it
  up again once `heartbeat_timeout` has passed. So is a job whose retry the database could
  not record (`JobQueries.retry_job`), that run counted nowhere;
* a run goes on after its heartbeat lapsed and another worker picked the job again (or after
  a purge deleted the job) → how it ends is not recorded: the job is the other run's, which
  records its own end (`JobQueries`);
* `stop()` runs out of patience → the handler is cancelled and the job is handed back to the
  queue at once, the run not counted (pgqueuer would otherwise log a cancelled job as done and
  delete it).

A model or an embedder that does not answer (`LLMUnavailable`, `EmbedderUnavailable`) is not
outside the job in this sense: those errors also stand for replies about this job's own input
(a refusal, a reply cut off or not matching the schema, a request the provider refuses), and
a job that met one on every run gives up. Its give-up is then recorded (the database answers),
and the write path's sweep queues the thread's work again with a backoff of its own, for as
long as the outage lasts (`service.extraction.recovery`).

What reaches pgqueuer's log is the exception type only: its tables are not tenant-scoped, and an
exception's text or cause can quote tenant content (a model's reply, a database row). The full
exception goes to the service log, and every failed run to the `on_failure` hook, which can
record it where its tenant can see it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from typing import cast

import asyncpg
from opentelemetry import trace
from pgqueuer.adapters.drivers.asyncpg import AsyncpgPoolDriver
from pgqueuer.core.executors import (
    AbstractEntrypointExecutor,
    AsyncEntrypoint,
    EntrypointExecutorParameters,
)
from pgqueuer.core.qm import QueueManager
from pgqueuer.domain.errors import RetryRequested
from pgqueuer.domain.models import Context, Job
from pgqueuer.domain.types import Channel
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from service.db import asyncpg_client_limits
from service.db_outage import outage_behind
from service.jobs.queue import (
    QUEUE_SETTINGS,
    PayloadError,
    UncountedRetry,
    decode_payload,
    queries_for,
    uncounted_runs,
)
from service.observability import DOMAIN_METRICS, describe_failure, job_span
from service.providers.embedder import EmbedderUnavailable
from service.providers.llm import LLMUnavailable

logger = logging.getLogger("mneme.jobs")

JobHandler = Callable[[Mapping[str, str]], Awaitable[None]]
"""Does one job's work from its payload; must be idempotent (a job may run more than once)."""


@dataclasses.dataclass(frozen=True)
class JobFailure:
    """One failed run of a job, as the failure hook sees it."""

    entrypoint: str
    payload: Mapping[str, str]
    attempt: int
    final: bool
    error: Exception


FailureHook = Callable[[JobFailure], Awaitable[None]]
"""Told about every failed run (`final` when no retry follows), e.g. to make failures visible
per tenant; pgqueuer's own log is shared by all tenants and keeps no payload. Its own errors
are logged and never change what happens to the job."""

PRUNE_QUEUE_LOG_SQL = """
    DELETE FROM pgqueuer_log WHERE created < now() - make_interval(days => $1)
"""
"""Forget job history older than the retention (pgqueuer keeps it forever)."""

PRUNE_STATISTICS_SQL = """
    DELETE FROM pgqueuer_statistics WHERE created < now() - make_interval(days => $1)
"""
"""Forget per-second job counts older than the retention."""


PRUNE_INTERVAL = timedelta(hours=1)


class JobFailed(Exception):
    """A job failed for good; the message names the exception type, never its text."""


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """How often a failing job runs and how long it waits between runs."""

    max_attempts: int = 5
    initial_delay: timedelta = timedelta(seconds=2)
    max_delay: timedelta = timedelta(minutes=5)
    multiplier: float = 2.0

    def delay_after(self, attempt: int) -> timedelta:
        """The wait after failed run number `attempt` (1-based): initial * multiplier^(n-1),
        at most `max_delay`. Computed in floats and capped before it becomes a `timedelta`:
        a job that waits out a long outage fails hundreds of runs, and the power would overflow
        both."""
        seconds = self.initial_delay.total_seconds()
        try:
            seconds *= self.multiplier ** (attempt - 1)
        except OverflowError:
            seconds = math.inf
        return timedelta(seconds=min(seconds, self.max_delay.total_seconds()))


def is_outside_the_job(exc: BaseException) -> bool:
    """Whether a run that failed with `exc` failed for a cause outside the job, which says
    nothing of its payload or its handler: the database could not be reached (the outage
    itself, or an error raised while handling one), or no pooled connection came free in
    time. Such a run does not count towards the job's attempts."""
    return isinstance(exc, PoolTimeout) or outage_behind(exc) is not None


def _entrypoint(handler: JobHandler) -> AsyncEntrypoint:
    async def run(job: Job) -> None:
        await handler(decode_payload(job.payload))

    return run


class _HandlerExecutor(AbstractEntrypointExecutor):
    """Runs one entrypoint's handler, turning failures into backed-off retries."""

    def __init__(
        self, handler: JobHandler, retry: RetryPolicy, on_failure: FailureHook | None = None
    ) -> None:
        super().__init__(
            EntrypointExecutorParameters(concurrency_limit=0, func=_entrypoint(handler))
        )
        self._run = cast(AsyncEntrypoint, self.parameters.func)
        self._retry = retry
        self._on_failure = on_failure

    async def _tell(self, job: Job, attempt: int, final: bool, exc: Exception) -> bool:
        """Tell the failure hook; True when a database outage kept it from recording the
        run."""
        if self._on_failure is None:
            return False
        try:
            failure = JobFailure(job.entrypoint, decode_payload(job.payload), attempt, final, exc)
            await self._on_failure(failure)
        except Exception as hook_error:
            outage = outage_behind(hook_error)
            if outage is None or logger.isEnabledFor(logging.DEBUG):
                logger.exception("job %s (%s): the failure hook failed", job.id, job.entrypoint)
            else:
                logger.warning(
                    "job %s (%s): the failure hook failed (database unavailable: %s)",
                    job.id,
                    job.entrypoint,
                    describe_failure(outage)[0],
                )
            return outage is not None
        return False

    async def execute(self, job: Job, context: Context) -> None:
        attempt = job.attempts + 1
        # This run's number among those that count: runs failed for a cause outside the job
        # are recorded in `attempts` too (they set the backoff) but not counted here.
        counted = attempt - uncounted_runs(job)
        with job_span(job.entrypoint, job.id, attempt, job.headers) as span:
            try:
                await self._run(job)
            except asyncio.CancelledError:
                logger.warning(
                    "job %s (%s) interrupted by shutdown; re-queued", job.id, job.entrypoint
                )
                DOMAIN_METRICS.job_runs.labels(job.entrypoint, "interrupted").inc()
                raise UncountedRetry(delay=timedelta(0), reason="worker stopped") from None
            except PayloadError:
                logger.error("job %s (%s) has an unreadable payload", job.id, job.entrypoint)
                DOMAIN_METRICS.job_runs.labels(job.entrypoint, "failed").inc()
                span.set_attribute("error.type", "PayloadError")
                raise JobFailed(f"{job.entrypoint} job has an unreadable payload") from None
            except Exception as exc:
                outside = is_outside_the_job(exc)
                final = counted >= self._retry.max_attempts and not outside
                span.set_attribute("error.type", type(exc).__name__)
                span.set_status(trace.StatusCode.ERROR)
                unrecorded = await self._tell(job, attempt, final, exc)
                if final and unrecorded:
                    # Given up now, the job would be gone with no trace a tenant or the sweep
                    # could see; once the database is back, its last run is run again.
                    outside = True
                    final = False
                DOMAIN_METRICS.job_runs.labels(job.entrypoint, "failed" if final else "retry").inc()
                delay = self._retry.delay_after(attempt)
                self._log_failure(job, attempt, counted, exc, None if final else delay, outside)
                if final:
                    raise JobFailed(
                        f"{job.entrypoint} failed after {counted} attempts ({type(exc).__name__})"
                    ) from None
                retry = UncountedRetry if outside else RetryRequested
                raise retry(
                    delay=delay, reason=f"attempt {attempt} failed ({type(exc).__name__})"
                ) from None
            DOMAIN_METRICS.job_runs.labels(job.entrypoint, "ok").inc()

    @staticmethod
    def _log_failure(
        job: Job,
        attempt: int,
        counted: int,
        exc: Exception,
        retry_in: timedelta | None,
        outside: bool,
    ) -> None:
        """One line per failed run: the error's classes and the URL it failed on. An outage of
        the model, the embedder or the database is expected weather, its traceback (an HTTP
        client's runs to a hundred lines) shown only when debugging; any other error is a bug
        and keeps it."""
        error, url = describe_failure(exc)
        where = f" calling {url}" if url else ""
        model_outage = isinstance(exc, LLMUnavailable | EmbedderUnavailable)
        outage = model_outage or outage_behind(exc) is not None
        traceback = exc if logger.isEnabledFor(logging.DEBUG) or not outage else None
        if retry_in is None:
            logger.error(
                "job %s (%s) failed for good after %d attempts: %s%s",
                job.id,
                job.entrypoint,
                counted,
                error,
                where,
                exc_info=traceback,
            )
        else:
            logger.warning(
                "job %s (%s) attempt %d failed: %s%s; retrying in %s%s",
                job.id,
                job.entrypoint,
                attempt,
                error,
                where,
                retry_in,
                " (not counted as an attempt)" if outside else "",
                exc_info=traceback,
            )


def log_queue_loop_failure(
    exc: Exception, restart_delay: timedelta, *, stopping: bool = False
) -> None:
    """The queue loop stopped on `exc`; it restarts after `restart_delay`. Stopped by a database
    outage (pgqueuer's clean-up may then fail on the broken connection too, with an error of
    its own), that is one line naming the outage, its traceback only when debugging, as the
    service logs any database outage; anything else is a bug and keeps it.

    `stopping`: the worker was being stopped when the loop ended, so it does not restart, and
    an error then (the database going away with the process, the pool closing under pgqueuer's
    clean-up) is the stop's, not a failure to alert on: one warning line that says so, the
    traceback only when debugging."""
    if stopping:
        logger.warning(
            "job worker loop ended with an error while stopping: %s",
            describe_failure(exc)[0],
            exc_info=exc if logger.isEnabledFor(logging.DEBUG) else None,
        )
        return
    outage = outage_behind(exc)
    if outage is None or logger.isEnabledFor(logging.DEBUG):
        logger.error("job worker loop failed; restarting in %s", restart_delay, exc_info=exc)
        return
    logger.warning(
        "job worker loop stopped; restarting in %s (database unavailable: %s)",
        restart_delay,
        describe_failure(outage)[0],
    )


class JobWorker:
    """Runs the registered job handlers in this process until `stop()`.

    Every replica may run one: pgqueuer claims jobs with FOR UPDATE SKIP LOCKED. The worker has
    its own small asyncpg pool (one connection LISTENs for new jobs); handlers open their own
    sessions. If the queue loop dies (the database went away), it is restarted after
    `restart_delay`.
    """

    def __init__(
        self,
        settings: Settings,
        engine: AsyncEngine,
        handlers: Mapping[str, JobHandler],
        *,
        retry: RetryPolicy | None = None,
        on_failure: FailureHook | None = None,
        concurrency: int = 4,
        heartbeat_timeout: timedelta = timedelta(seconds=30),
        poll_interval: timedelta | None = None,
        stop_timeout: timedelta = timedelta(seconds=20),
        restart_delay: timedelta = timedelta(seconds=5),
        log_retention_days: int = 7,
    ) -> None:
        if concurrency < 2:
            raise ValueError("concurrency must be at least 2")
        self._enabled = settings.jobs_enabled
        self._handlers = dict(handlers)
        self._retry = retry or RetryPolicy(
            max_attempts=settings.job_max_attempts,
            initial_delay=timedelta(seconds=settings.job_retry_initial_delay_seconds),
        )
        self._on_failure = on_failure
        # pgqueuer caps the jobs a worker holds at twice its batch size or more.
        self._batch_size = concurrency // 2
        self._max_tasks = self._batch_size * 2
        self._heartbeat_timeout = heartbeat_timeout
        self._poll_interval = poll_interval or timedelta(seconds=settings.job_poll_interval_seconds)
        self._stop_timeout = stop_timeout
        self._restart_delay = restart_delay
        self._log_retention_days = log_retention_days
        # The same connection parameters SQLAlchemy derives from the runtime URL.
        _, self._connect_kwargs = engine.dialect.create_connect_args(engine.url)
        self._server_settings = {
            "application_name": "mneme-jobs",
            "statement_timeout": str(settings.db_statement_timeout_ms),
        }
        # The client's own limits, as the requests' engine has them: a database that answers
        # nothing stops the queue loop (restarted once it answers), not holds it forever.
        self._client_limits = asyncpg_client_limits(settings)
        self._pool: asyncpg.Pool | None = None
        self._manager: QueueManager | None = None
        self._task: asyncio.Task[None] | None = None
        self._pruner: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def start(self) -> None:
        """Start working the queue in the background; returns at once."""
        if not self._enabled:
            logger.info("background jobs are off (MNEME_JOBS_ENABLED=false)")
            return
        if self._task is not None:
            raise RuntimeError("the job worker was started already")
        self._pool = await asyncpg.create_pool(
            min_size=1,
            max_size=self._max_tasks,
            server_settings=self._server_settings,
            # What the URL sets itself wins, as it does for the requests' engine.
            **{**self._client_limits, **self._connect_kwargs},
        )
        self._stopping.clear()
        self._task = asyncio.create_task(self._supervise(), name="mneme-job-worker")
        self._pruner = asyncio.create_task(self._prune_history(), name="mneme-job-pruner")

    async def stop(self) -> None:
        """Let running jobs finish (up to `stop_timeout`, then hand them back) and stop."""
        task, self._task = self._task, None
        self._stopping.set()
        if self._pruner is not None:
            self._pruner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pruner
            self._pruner = None
        if self._manager is not None:
            self._manager.shutdown.set()
        if task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(task), self._stop_timeout.total_seconds())
            except TimeoutError:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            except asyncio.CancelledError:
                # The worker itself was cancelled (the event loop cancels every task when the
                # process is made to stop at once): it has stopped, and its jobs in progress
                # go back to the queue. Only a cancellation of this stop goes on.
                if not task.cancelled():
                    raise
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    def _new_manager(self, pool: asyncpg.Pool) -> QueueManager:
        manager = QueueManager(
            queries_for(AsyncpgPoolDriver(pool)), channel=Channel(QUEUE_SETTINGS.channel)
        )
        for entrypoint, handler in self._handlers.items():
            manager.register_executor(
                entrypoint, _HandlerExecutor(handler, self._retry, self._on_failure)
            )
        return manager

    async def _supervise(self) -> None:
        assert self._pool is not None
        pool = self._pool
        while not self._stopping.is_set():
            self._manager = self._new_manager(pool)
            try:
                await self._manager.run(
                    dequeue_timeout=self._poll_interval,
                    batch_size=self._batch_size,
                    max_concurrent_tasks=self._max_tasks,
                    heartbeat_timeout=self._heartbeat_timeout,
                )
            except Exception as exc:
                log_queue_loop_failure(exc, self._restart_delay, stopping=self._stopping.is_set())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self._restart_delay.total_seconds())

    async def _prune_history(self) -> None:
        assert self._pool is not None
        pool = self._pool
        while True:
            try:
                async with pool.acquire() as connection:
                    await connection.execute(PRUNE_QUEUE_LOG_SQL, self._log_retention_days)
                    await connection.execute(PRUNE_STATISTICS_SQL, self._log_retention_days)
            except (OSError, asyncpg.PostgresError):
                logger.warning("could not prune the job history", exc_info=True)
            await asyncio.sleep(PRUNE_INTERVAL.total_seconds())
