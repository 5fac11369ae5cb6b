"""The durable job queue: pgqueuer's tables in our database, jobs enqueued in the caller's
transaction.

A job is a row of `pgqueuer` written by the same transaction as the data it works on, so it
exists exactly when that data was committed. Its payload holds a tenant id and row ids only,
never tenant content: the queue tables are shared by all tenants and not under row-level
security.

pgqueuer's object names are fixed here rather than read from its `PGQUEUER_*` (and legacy bare
`QUEUE_TABLE`, `CHANNEL`, …) environment variables, so an unrelated variable cannot point the
service at other tables. They must match migration `20261129_1500`.

A failed run is recorded as pgqueuer records it (the job queued again after its backoff, one
more run in `attempts`), with two changes (`JobQueries.retry_job`): a run that failed for a
cause outside the job (`UncountedRetry`) is also counted in the job's `mneme_uncounted_runs`
header, which the worker subtracts from `attempts` before it compares them with its limit (and
the jobs views before they report them, `UNCOUNTED_RUNS_SQL`); and a retry the database could
not record leaves the job as it is, rather than failed for good.

How a run ended (done, failed for good, queued again) is recorded only while the job is still
the worker's that ran it (`JobQueries`): a run that went on after another worker picked its
job again, or after the job was deleted (a purge drops its tenant's or user's jobs, running
ones too), changes nothing of that job.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping
from datetime import timedelta

from pgqueuer.adapters.drivers.asyncpg import AsyncpgDriver
from pgqueuer.adapters.persistence.qb import (
    QueryBuilderEnvironment,
    QueryQueueBuilder,
    QuerySchedulerBuilder,
)
from pgqueuer.adapters.persistence.queries import Queries
from pgqueuer.domain.errors import RetryRequested
from pgqueuer.domain.models import Job, TracebackRecord
from pgqueuer.domain.settings import DBSettings, Durability
from pgqueuer.domain.types import JOB_STATUS, Channel
from pgqueuer.ports.driver import Driver
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from service.auth.principal import TENANT_ID_MAX
from service.db import transaction_driver
from service.db_outage import outage_behind
from service.kit.types import InputRefused, is_valid_identifier, loads_strict
from service.observability import describe_failure, enqueue_span, trace_headers

logger = logging.getLogger("mneme.jobs")

QUEUE_SETTINGS = DBSettings(
    prefix="",
    db_schema=None,
    channel=Channel("ch_pgqueuer"),
    function="fn_pgqueuer_changed",
    statistics_table="pgqueuer_statistics",
    queue_status_type="pgqueuer_status",
    queue_table="pgqueuer",
    queue_table_log="pgqueuer_log",
    trigger="tg_pgqueuer_changed",
    schedules_table="pgqueuer_schedules",
    durability=Durability.durable,
    widen_id=False,
)

PENDING_JOB_SQL = text(
    """
    SELECT id FROM pgqueuer
     WHERE entrypoint = :entrypoint AND payload = :payload AND status = 'queued'
       AND attempts = 0 AND execute_after <= now() + make_interval(secs => :delay)
     LIMIT 1
       FOR SHARE
    """
)
"""A fresh job of the same kind and payload that has not started yet and is due no later than
the new one would be, share-locked until the caller's transaction ends. pgqueuer's dequeue
claims rows with FOR UPDATE SKIP LOCKED, so it cannot pick this job before the caller's data is
committed: the waiting job is sure to see that data, and a second job would add nothing. A job
already running is not a match (it may have read the thread before this transaction's data),
and neither is one waiting out the backoff of a failed run: new work gets its own job with all
its attempts, never another job's spent ones or its wait."""


UNCOUNTED_RUNS_HEADER = "mneme_uncounted_runs"
"""The job header that counts its failed runs that do not count towards its attempts."""

RETRY_SQL = f"""
    WITH retry AS (
        UPDATE pgqueuer
           SET status = 'queued', execute_after = now() + $2::interval,
               attempts = attempts + 1, updated = now(), queue_manager_id = NULL,
               headers = CASE WHEN $5::boolean
                   THEN coalesce(headers, '{{}}'::jsonb) || jsonb_build_object(
                       '{UNCOUNTED_RUNS_HEADER}',
                       CASE WHEN jsonb_typeof(headers -> '{UNCOUNTED_RUNS_HEADER}') = 'number'
                            THEN (headers ->> '{UNCOUNTED_RUNS_HEADER}')::int ELSE 0 END + 1)
                   ELSE headers END
         WHERE id = $1::bigint AND queue_manager_id = $4::uuid
     RETURNING id, entrypoint, priority
    )
    INSERT INTO pgqueuer_log (job_id, status, entrypoint, priority, traceback)
    SELECT id, 'queued', entrypoint, priority, $3::jsonb FROM retry
    RETURNING job_id
"""  # noqa: S608 - interpolates only the constant header name
"""pgqueuer's retry (the job queued again after `$2`, its failed runs in `attempts` one more,
the retry logged with the record `$3`), of the job only while the worker `$4` that picked it
still holds it; with `$5`, the run is also counted in the job's `UNCOUNTED_RUNS_HEADER` (one
statement, so a run is counted in both or in neither). Returns the job's id when it was
queued again, nothing when the job is no longer that worker's."""

LOG_JOBS_SQL = """
    WITH job_status AS (
        SELECT unnest($1::bigint[]) AS id, unnest($2::pgqueuer_status[]) AS status,
               unnest($3::jsonb[]) AS traceback, unnest($4::uuid[]) AS worker
    ), deleted AS (
        DELETE FROM pgqueuer q USING job_status js
         WHERE q.id = js.id AND q.queue_manager_id = js.worker AND js.status <> 'failed'
     RETURNING q.id, q.entrypoint, q.priority
    ), held AS (
        UPDATE pgqueuer q SET status = 'failed', updated = now(), queue_manager_id = NULL
          FROM job_status js
         WHERE q.id = js.id AND q.queue_manager_id = js.worker AND js.status = 'failed'
     RETURNING q.id, q.entrypoint, q.priority
    ), resolved AS (
        SELECT id, entrypoint, priority FROM deleted
        UNION ALL
        SELECT id, entrypoint, priority FROM held
    )
    INSERT INTO pgqueuer_log (job_id, status, entrypoint, priority, traceback)
    SELECT js.id, js.status, r.entrypoint, r.priority, js.traceback
      FROM job_status js JOIN resolved r ON r.id = js.id
    RETURNING job_id
"""
"""pgqueuer's record of finished runs (each job `$1` deleted, or kept as `failed`, and its
outcome `$2` logged with the record `$3`), of each job only while the worker `$4` that picked
it still holds it. Returns the ids of the jobs whose outcome was recorded."""


class UncountedRetry(RetryRequested):
    """Run the job again after `delay`, this run not counting towards its attempts: it failed
    for a cause outside the job (see `service.jobs.worker`)."""


class JobQueries(Queries):
    """pgqueuer's query layer, with the end of a run recorded as the module docstring says.

    pgqueuer records how a run ended (`log_jobs`, `retry_job`) by the job's id alone. A run
    can go on after its job is no longer its worker's: its heartbeat lapsed (the process
    stalled, or could not reach the database for a while) and another worker picked the job
    again, or the job was deleted. Recorded by id, its end would delete the job another run
    is working on, or queue it again (a third run at once) and spend one of its attempts. So
    every such record names the worker that picked the job (`Job.queue_manager_id`, set by
    the dequeue that returned it), and changes nothing once the job is no longer that
    worker's: the run that holds it now records its own end."""

    async def log_jobs(
        self, job_status: list[tuple[Job, JOB_STATUS, TracebackRecord | None]]
    ) -> None:
        """Record how each run ended, of the jobs still their worker's (`LOG_JOBS_SQL`)."""
        rows = await self.driver.fetch(
            LOG_JOBS_SQL,
            [job.id for job, _, _ in job_status],
            [status for _, status, _ in job_status],
            [record.model_dump_json() if record else None for _, _, record in job_status],
            [job.queue_manager_id for job, _, _ in job_status],
        )
        recorded = {row["job_id"] for row in rows}
        for job, status, _ in job_status:
            if job.id not in recorded:
                _log_lost_job(job, f"its outcome ({status})")

    async def retry_job(
        self, job: Job, delay: timedelta, traceback_record: TracebackRecord | None
    ) -> None:
        """Queue `job` again after `delay` while it is still its worker's (`RETRY_SQL`);
        pgqueuer calls this for a `RetryRequested`, and the record it passes is that
        exception's (its type names an `UncountedRetry`).

        A retry the database cannot record (it went down since the run began) is logged and
        left: the job stays `picked`, its heartbeat lapses, and a worker runs it again once
        the database answers, with nothing of this run counted. Raised, the error would have
        pgqueuer log the run as the job's final failure, and delete the job when the database
        is back."""
        uncounted = traceback_record is not None and (
            traceback_record.exception_type == UncountedRetry.__name__
        )
        try:
            rows = await self.driver.fetch(
                RETRY_SQL,
                job.id,
                delay,
                traceback_record.model_dump_json() if traceback_record else None,
                job.queue_manager_id,
                uncounted,
            )
        except Exception as exc:
            outage = outage_behind(exc)
            if outage is None:
                raise
            logger.warning(
                "job %s (%s): its retry could not be recorded (database unavailable: %s); "
                "it runs again once its heartbeat lapses",
                job.id,
                job.entrypoint,
                describe_failure(outage)[0],
            )
            return
        if not rows:
            _log_lost_job(job, "its retry")


def _log_lost_job(job: Job, what: str) -> None:
    logger.warning(
        "job %s (%s): %s is not recorded: the job is no longer this worker's (another worker "
        "picked it again once its heartbeat lapsed, or it was deleted)",
        job.id,
        job.entrypoint,
        what,
    )


def uncounted_runs(job: Job) -> int:
    """How many of `job`'s failed runs (`attempts`) do not count towards its attempts."""
    recorded = (job.headers or {}).get(UNCOUNTED_RUNS_HEADER)
    if not isinstance(recorded, int) or isinstance(recorded, bool):
        return 0
    return min(max(recorded, 0), job.attempts)


UNCOUNTED_RUNS_SQL = f"""
    CAST(least(greatest(
        CASE WHEN jsonb_typeof(headers -> '{UNCOUNTED_RUNS_HEADER}') = 'number'
                  AND headers ->> '{UNCOUNTED_RUNS_HEADER}' ~ '^-?[0-9]+$'
             THEN CAST(headers ->> '{UNCOUNTED_RUNS_HEADER}' AS numeric) ELSE 0 END,
        0), attempts) AS integer)
"""
"""`uncounted_runs` of a `pgqueuer` row, in SQL over its `headers` and `attempts`: an integer
header, at least 0 and at most `attempts`; 0 for anything else. What the worker subtracts
before it compares `attempts` with its limit, so whatever reports a job's attempts subtracts
it too."""


def queries_for(driver: Driver) -> JobQueries:
    """pgqueuer's query layer over `driver`, bound to our object names."""
    return JobQueries(
        driver,
        qbe=QueryBuilderEnvironment(QUEUE_SETTINGS),
        qbq=QueryQueueBuilder(QUEUE_SETTINGS),
        qbs=QuerySchedulerBuilder(QUEUE_SETTINGS),
    )


def encode_payload(values: Mapping[str, str]) -> bytes:
    """Canonical bytes (sorted keys, no spaces): equal payloads are equal bytes, for dedupe."""
    return json.dumps(dict(values), sort_keys=True, separators=(",", ":")).encode()


class PayloadError(ValueError):
    """A job's payload is not what `encode_payload` writes."""


def decode_payload(raw: bytes | None) -> dict[str, str]:
    """The payload `encode_payload` wrote; `PayloadError` for anything else, including a
    `tenant_id` that is no identifier or a `thread_id` that is no UUID (the same rules as the
    API's, so a handler never starts on a value the API would have refused)."""
    try:
        values = loads_strict(raw or b"", [])
    except InputRefused:
        raise PayloadError("job payload is not JSON") from None
    if not isinstance(values, dict) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in values.items()
    ):
        raise PayloadError("job payload is not an object of strings")
    if "tenant_id" in values and not is_valid_identifier(values["tenant_id"], TENANT_ID_MAX):
        raise PayloadError("job payload's tenant_id is not an identifier")
    if "thread_id" in values:
        try:
            uuid.UUID(values["thread_id"])
        except ValueError:
            raise PayloadError("job payload's thread_id is not a UUID") from None
    return values


async def enqueue_job(
    session: AsyncSession,
    entrypoint: str,
    payload: Mapping[str, str],
    *,
    dedupe: bool = False,
    delay: timedelta = timedelta(0),
) -> int | None:
    """Add a job in `session`'s open transaction, to run no sooner than `delay` from now; it
    commits or rolls back with the caller.

    With `dedupe`, a fresh job of the same kind and payload that has not started yet and is
    due by then makes this a no-op (returns None); otherwise returns the new job's id.

    The job's headers carry the current trace context (W3C `traceparent`), so the worker's
    span for it links back to the request that asked for it.
    """
    encoded = encode_payload(payload)
    with enqueue_span(entrypoint) as span:
        if dedupe:
            pending = await session.execute(
                PENDING_JOB_SQL,
                {"entrypoint": entrypoint, "payload": encoded, "delay": delay.total_seconds()},
            )
            if pending.first() is not None:
                span.set_attribute("mneme.job.deduplicated", True)
                return None
        # In the session's transaction: a job written outside it would commit on its own and
        # could outlive rolled-back data.
        driver_connection = await transaction_driver(await session.connection())
        (job_id,) = await queries_for(AsyncpgDriver(driver_connection)).enqueue(
            entrypoint,
            encoded,
            execute_after=delay if delay > timedelta(0) else None,
            headers=trace_headers(),
        )
        span.set_attribute("messaging.message.id", str(job_id))
        return int(job_id)
