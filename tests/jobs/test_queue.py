"""The durable job queue: transactional enqueue, dedupe, the worker, retries and restarts."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from pgqueuer.adapters.drivers.asyncpg import AsyncpgDriver
from pgqueuer.core.qm import QueueManager
from pgqueuer.domain.errors import RetryRequested
from pgqueuer.domain.models import Job, TracebackRecord
from pgqueuer.domain.types import QueueEntrypoint, QueueManagerId
from pgqueuer.ports.repository import EntrypointExecutionParameter
from sqlalchemy import text
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from service.config import Settings
from service.db import tenant_transaction
from service.embedded_postgres import SUPERUSER, EmbeddedCluster
from service.jobs import (
    THREAD_SUMMARY_JOB,
    JobHandler,
    JobWorker,
    RetryPolicy,
    enqueue_job,
    enqueue_thread_summary,
)
from service.jobs.queue import UncountedRetry, encode_payload, queries_for
from service.jobs.worker import JobFailure, log_queue_loop_failure
from service.providers.llm import OpenAIChatModel
from service.threads.models import Message, Thread
from service.threads.summaries import thread_summary_job
from tests.conftest import new_tenant
from tests.fixtures.openai_server import API_KEY, MODEL, FakeOpenAIServer
from tests.jobs.conftest import JOBS_DATABASE

Sessions = async_sessionmaker[AsyncSession]
PROJECT_ROOT = Path(__file__).resolve().parents[2]
FAST_RETRY = RetryPolicy(
    max_attempts=3, initial_delay=timedelta(milliseconds=10), max_delay=timedelta(seconds=1)
)


async def eventually(check: Callable[[], Awaitable[bool]], *, seconds: float = 15) -> None:
    """Wait until `check()` holds (bounded); fail the test otherwise."""
    for _ in range(int(seconds / 0.02)):
        if await check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not reached")


def entrypoint() -> str:
    """A job kind of the test's own, so no other test's worker or jobs interfere."""
    return "test_" + uuid.uuid4().hex[:12]


async def jobs_of(engine: AsyncEngine, kind: str) -> list[Any]:
    async with engine.connect() as connection:
        rows = await connection.execute(
            text(
                "SELECT id, status::text AS status, attempts, payload FROM pgqueuer "
                "WHERE entrypoint = :kind ORDER BY id"
            ),
            {"kind": kind},
        )
        return list(rows)


async def log_of(engine: AsyncEngine, kind: str) -> list[Any]:
    async with engine.connect() as connection:
        rows = await connection.execute(
            text(
                "SELECT status::text AS status, traceback FROM pgqueuer_log "
                "WHERE entrypoint = :kind ORDER BY id"
            ),
            {"kind": kind},
        )
        return list(rows)


async def enqueue(sessions: Sessions, kind: str, payload: Mapping[str, str], **kw: Any) -> Any:
    async with tenant_transaction(sessions, payload.get("tenant_id", "t-jobs")) as session:
        return await enqueue_job(session, kind, payload, **kw)


@pytest.fixture
async def make_worker(
    jobs_settings: Settings, jobs_engine: AsyncEngine
) -> AsyncIterator[Callable[..., JobWorker]]:
    started: list[JobWorker] = []

    def make(handlers: Mapping[str, JobHandler], **overrides: Any) -> JobWorker:
        options: dict[str, Any] = {
            "retry": FAST_RETRY,
            "poll_interval": timedelta(seconds=0.1),
            "heartbeat_timeout": timedelta(seconds=5),
            "stop_timeout": timedelta(seconds=5),
        }
        options.update(overrides)
        worker = JobWorker(jobs_settings, jobs_engine, handlers, **options)
        started.append(worker)
        return worker

    yield make
    for worker in started:
        await worker.stop()


async def test_a_job_commits_or_rolls_back_with_the_enqueuing_transaction(
    jobs_sessions: Sessions, jobs_engine: AsyncEngine
) -> None:
    kind = entrypoint()
    with pytest.raises(RuntimeError, match="rolled back"):
        async with tenant_transaction(jobs_sessions, "t-jobs") as session:
            await enqueue_job(session, kind, {"n": "1"})
            raise RuntimeError("rolled back")
    assert await jobs_of(jobs_engine, kind) == []

    job_id = await enqueue(jobs_sessions, kind, {"n": "2"})

    (job,) = await jobs_of(jobs_engine, kind)
    assert (job.id, job.status, job.attempts) == (job_id, "queued", 0)
    assert json.loads(job.payload) == {"n": "2"}


async def test_a_burst_of_appends_queues_one_summary_pass_per_thread(
    jobs_sessions: Sessions, jobs_engine: AsyncEngine
) -> None:
    tenant, thread_a, thread_b = new_tenant(), uuid.uuid4(), uuid.uuid4()
    for _ in range(100):
        async with tenant_transaction(jobs_sessions, tenant) as session:
            await enqueue_thread_summary(session, tenant, thread_a)
    async with tenant_transaction(jobs_sessions, tenant) as session:
        await enqueue_thread_summary(session, tenant, thread_b)

    async with jobs_engine.begin() as connection:
        rows = await connection.execute(
            text("DELETE FROM pgqueuer WHERE entrypoint = :kind RETURNING payload"),
            {"kind": THREAD_SUMMARY_JOB},
        )
        payloads = sorted(json.loads(row.payload)["thread_id"] for row in rows)
    assert payloads == sorted([str(thread_a), str(thread_b)])


async def test_a_running_job_does_not_absorb_a_new_enqueue(
    jobs_sessions: Sessions, jobs_engine: AsyncEngine
) -> None:
    kind, payload = entrypoint(), {"thread_id": "x"}
    await enqueue(jobs_sessions, kind, payload, dedupe=True)
    async with jobs_engine.begin() as connection:
        await connection.execute(
            text("UPDATE pgqueuer SET status = 'picked' WHERE entrypoint = :kind"),
            {"kind": kind},
        )

    # The running job may have read the thread before this enqueue's data: a new job is due.
    assert await enqueue(jobs_sessions, kind, payload, dedupe=True) is not None
    assert await enqueue(jobs_sessions, kind, payload, dedupe=True) is None
    assert [job.status for job in await jobs_of(jobs_engine, kind)] == ["picked", "queued"]


async def test_a_waiting_job_cannot_start_before_the_enqueuing_transaction_commits(
    jobs_sessions: Sessions, jobs_engine: AsyncEngine
) -> None:
    kind, payload = entrypoint(), {"thread_id": "y"}
    await enqueue(jobs_sessions, kind, payload, dedupe=True)
    _, connect = jobs_engine.dialect.create_connect_args(jobs_engine.url)
    raw = await asyncpg.connect(**connect)
    queries = queries_for(AsyncpgDriver(raw))

    async def dequeue() -> list[Any]:
        return await queries.dequeue(
            batch_size=10,
            entrypoints={QueueEntrypoint(kind): EntrypointExecutionParameter(concurrency_limit=0)},
            queue_manager_id=QueueManagerId(uuid.uuid4()),
            global_concurrency_limit=None,
            heartbeat_timeout=timedelta(seconds=30),
        )

    try:
        async with tenant_transaction(jobs_sessions, "t-jobs") as session:
            assert await enqueue_job(session, kind, payload, dedupe=True) is None
            assert await dequeue() == []
        (job,) = await dequeue()
        assert job.payload == encode_payload(payload)
    finally:
        await raw.close()


async def test_the_worker_runs_a_job_once_and_removes_it(
    jobs_sessions: Sessions, jobs_engine: AsyncEngine, make_worker: Callable[..., JobWorker]
) -> None:
    kind, seen = entrypoint(), []

    async def handle(payload: Mapping[str, str]) -> None:
        seen.append(dict(payload))

    worker = make_worker({kind: handle})
    await worker.start()
    payload = {"tenant_id": "t1", "thread_id": str(uuid.uuid4())}
    await enqueue(jobs_sessions, kind, payload)

    async def done() -> bool:
        return not await jobs_of(jobs_engine, kind) and len(seen) == 1

    await eventually(done)
    assert seen == [payload]
    await eventually(
        lambda: _has_status(jobs_engine, kind, "successful"),
    )


async def _has_status(engine: AsyncEngine, kind: str, status: str) -> bool:
    return status in [row.status for row in await log_of(engine, kind)]


async def test_jobs_wait_for_a_worker_and_survive_its_restart(
    jobs_sessions: Sessions, jobs_engine: AsyncEngine, make_worker: Callable[..., JobWorker]
) -> None:
    kind, seen = entrypoint(), []

    async def handle(payload: Mapping[str, str]) -> None:
        seen.append(payload["n"])

    first = make_worker({kind: handle})
    await first.start()
    await first.stop()
    assert not first.running
    await enqueue(jobs_sessions, kind, {"n": "1"})
    await enqueue(jobs_sessions, kind, {"n": "2"})

    second = make_worker({kind: handle})
    await second.start()

    async def done() -> bool:
        return not await jobs_of(jobs_engine, kind)

    await eventually(done)
    assert sorted(seen) == ["1", "2"]


async def test_a_job_interrupted_by_shutdown_is_handed_back_and_finished_by_the_next_worker(
    jobs_sessions: Sessions, jobs_engine: AsyncEngine, make_worker: Callable[..., JobWorker]
) -> None:
    kind, started, finished = entrypoint(), asyncio.Event(), []

    async def never_ends(payload: Mapping[str, str]) -> None:
        started.set()
        await asyncio.Event().wait()

    async def finishes(payload: Mapping[str, str]) -> None:
        finished.append(payload["n"])

    first = make_worker({kind: never_ends}, stop_timeout=timedelta(seconds=0.1))
    await first.start()
    await enqueue(jobs_sessions, kind, {"n": "1"})
    await asyncio.wait_for(started.wait(), 15)
    await first.stop()

    (job,) = await jobs_of(jobs_engine, kind)
    assert job.status == "queued"

    second = make_worker({kind: finishes})
    await second.start()

    async def done() -> bool:
        return not await jobs_of(jobs_engine, kind)

    await eventually(done)
    assert finished == ["1"]


async def test_a_job_whose_process_died_is_picked_up_again(
    jobs_sessions: Sessions,
    jobs_settings: Settings,
    jobs_engine: AsyncEngine,
    make_worker: Callable[..., JobWorker],
    tmp_path: Path,
) -> None:
    kind, finished, marker = entrypoint(), [], tmp_path / "started.json"
    assert jobs_settings.database_url is not None
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.jobs.worker_process",
        jobs_settings.database_url.get_secret_value(),
        kind,
        str(marker),
        cwd=PROJECT_ROOT,
    )
    try:
        await enqueue(jobs_sessions, kind, {"n": "1"})

        async def started() -> bool:
            return marker.exists()

        await eventually(started, seconds=60)
    finally:
        process.kill()
        await process.wait()
    assert json.loads(marker.read_text()) == {"n": "1"}
    (job,) = await jobs_of(jobs_engine, kind)
    assert job.status == "picked"

    async def finishes(payload: Mapping[str, str]) -> None:
        finished.append(payload["n"])

    # The dead worker's heartbeat stops; once it is older than this, the job is taken over.
    survivor = make_worker({kind: finishes}, heartbeat_timeout=timedelta(seconds=1))
    await survivor.start()

    async def done() -> bool:
        return not await jobs_of(jobs_engine, kind)

    await eventually(done)
    assert finished == ["1"]


async def test_failures_are_retried_with_backoff_until_max_attempts(
    jobs_sessions: Sessions, jobs_engine: AsyncEngine, make_worker: Callable[..., JobWorker]
) -> None:
    kind, attempts = entrypoint(), []

    async def always_fails(payload: Mapping[str, str]) -> None:
        attempts.append(payload["n"])
        raise RuntimeError("tenant words: my PIN is 4321")

    worker = make_worker({kind: always_fails})
    await worker.start()
    await enqueue(jobs_sessions, kind, {"n": "1"})

    async def given_up() -> bool:
        return await _has_status(jobs_engine, kind, "exception")

    await eventually(given_up)
    assert attempts == ["1", "1", "1"]
    assert await jobs_of(jobs_engine, kind) == []
    log = await log_of(jobs_engine, kind)
    retries = [row.traceback for row in log if row.status == "queued" and row.traceback]
    assert [r["additional_context"]["retry_delay"] for r in retries] == [
        str(timedelta(milliseconds=10)),
        str(timedelta(milliseconds=20)),
    ]
    (final,) = [row.traceback for row in log if row.status == "exception"]
    assert final["exception_type"] == "JobFailed"
    assert "after 3 attempts (RuntimeError)" in final["exception_message"]
    # The queue's tables are not tenant-scoped: no exception text may reach them.
    assert "4321" not in json.dumps([row.traceback for row in log])


async def test_a_transient_failure_is_retried_and_then_succeeds(
    jobs_sessions: Sessions, jobs_engine: AsyncEngine, make_worker: Callable[..., JobWorker]
) -> None:
    kind, attempts = entrypoint(), []

    async def fails_once(payload: Mapping[str, str]) -> None:
        attempts.append(payload["n"])
        if len(attempts) == 1:
            raise ConnectionError("flaky")

    worker = make_worker({kind: fails_once})
    await worker.start()
    await enqueue(jobs_sessions, kind, {"n": "1"})

    async def succeeded() -> bool:
        return await _has_status(jobs_engine, kind, "successful")

    await eventually(succeeded)
    assert attempts == ["1", "1"]


async def test_a_run_the_database_outage_failed_is_one_line_without_a_traceback(
    jobs_sessions: Sessions,
    jobs_engine: AsyncEngine,
    make_worker: Callable[..., JobWorker],
    caplog: pytest.LogCaptureFixture,
) -> None:
    kind, attempts = entrypoint(), []

    async def database_restarting(payload: Mapping[str, str]) -> None:
        attempts.append(payload["n"])
        if len(attempts) == 1:
            raise asyncpg.exceptions.AdminShutdownError(
                "terminating connection due to administrator command"
            )

    caplog.set_level(logging.INFO, logger="mneme.jobs")
    worker = make_worker({kind: database_restarting})
    await worker.start()
    await enqueue(jobs_sessions, kind, {"n": "1"})

    async def succeeded() -> bool:
        return await _has_status(jobs_engine, kind, "successful")

    await eventually(succeeded)
    (failed,) = [r for r in caplog.records if f"({kind}) attempt 1 failed" in r.getMessage()]
    # Expected weather, like a model's outage: the traceback only when debugging.
    assert "AdminShutdownError" in failed.getMessage()
    assert failed.exc_info is None


def test_a_queue_loop_stopped_by_an_outage_is_one_line_and_a_defect_keeps_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="mneme.jobs")
    # pgqueuer's clean-up on the connection the outage broke fails with an error of its own.
    stopped = asyncpg.exceptions.InterfaceError("released back to the pool")
    stopped.__context__ = asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed")
    log_queue_loop_failure(stopped, timedelta(seconds=5))
    log_queue_loop_failure(RuntimeError("a defect"), timedelta(seconds=5))
    outage, defect = caplog.records
    assert outage.exc_info is None and outage.levelno == logging.WARNING
    assert outage.getMessage() == (
        "job worker loop stopped; restarting in 0:00:05 "
        "(database unavailable: ConnectionDoesNotExistError)"
    )
    assert defect.exc_info is not None and defect.levelno == logging.ERROR


async def test_a_queue_loop_that_fails_as_the_worker_stops_is_no_error_and_no_restart(
    make_worker: Callable[..., JobWorker],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # pgqueuer's loop, ended by the stop with an error of the pool it ran on (what a database
    # that goes away with the process, or the pool closing under its clean-up, raise).
    loop_running = asyncio.Event()

    async def fails_when_stopped(manager: QueueManager, **_: Any) -> None:
        loop_running.set()
        await manager.shutdown.wait()
        raise asyncpg.exceptions.InterfaceError("pool is closing")

    monkeypatch.setattr(QueueManager, "run", fails_when_stopped)
    caplog.set_level(logging.INFO, logger="mneme.jobs")
    worker = make_worker({})
    await worker.start()
    await asyncio.wait_for(loop_running.wait(), 10)
    await worker.stop()

    ended = [r for r in caplog.records if r.name == "mneme.jobs" and "loop" in r.getMessage()]
    assert [(r.levelno, r.getMessage()) for r in ended] == [
        (logging.WARNING, "job worker loop ended with an error while stopping: InterfaceError")
    ]
    assert ended[0].exc_info is None


async def test_runs_that_found_the_pool_busy_do_not_use_up_the_attempts(
    jobs_sessions: Sessions, jobs_engine: AsyncEngine, make_worker: Callable[..., JobWorker]
) -> None:
    kind, attempts = entrypoint(), []

    async def busy_for_a_while(payload: Mapping[str, str]) -> None:
        attempts.append(payload["n"])
        if len(attempts) <= FAST_RETRY.max_attempts + 1:
            raise PoolTimeout("QueuePool limit of size 1 overflow 0 reached")

    worker = make_worker({kind: busy_for_a_while})
    await worker.start()
    await enqueue(jobs_sessions, kind, {"n": "1"})

    async def succeeded() -> bool:
        return await _has_status(jobs_engine, kind, "successful")

    await eventually(succeeded)
    assert attempts == ["1"] * (FAST_RETRY.max_attempts + 2)
    assert not await _has_status(jobs_engine, kind, "exception")


# --- outages: runs that do not count, retries the database could not record ------------------


async def lose_the_connection(sessions: Sessions, tenant: str, user: str) -> None:
    """A run cut short by the database: it writes a user in its transaction, and then its
    connection is terminated mid-transaction (`pg_terminate_backend` of its own backend, as an
    administrator or a restart ends it). Nothing of the transaction is committed."""
    async with tenant_transaction(sessions, tenant) as session:
        await add_user(session, tenant, user)
        await session.execute(text("SELECT pg_terminate_backend(pg_backend_pid())"))


async def add_user(session: AsyncSession, tenant: str, user: str) -> None:
    await session.execute(
        text("INSERT INTO user_account (tenant_id, id) VALUES (:t, :u)"), {"t": tenant, "u": user}
    )


async def users_of(sessions: Sessions, tenant: str) -> list[str]:
    async with tenant_transaction(sessions, tenant) as session:
        rows = await session.execute(
            text("SELECT id FROM user_account WHERE tenant_id = :t ORDER BY id"), {"t": tenant}
        )
        return list(rows.scalars())


async def new_tenant_row(sessions: Sessions) -> str:
    tenant = new_tenant()
    async with tenant_transaction(sessions, tenant) as session:
        await session.execute(text("INSERT INTO tenant (id) VALUES (:t)"), {"t": tenant})
    return tenant


async def ended(engine: AsyncEngine, kind: str) -> str:
    """How the job of `kind` ended (`successful`, `exception`), once it has."""
    outcomes: list[str] = []

    async def finished() -> bool:
        outcomes[:] = [
            row.status
            for row in await log_of(engine, kind)
            if row.status in ("successful", "exception")
        ]
        return bool(outcomes)

    await eventually(finished)
    return outcomes[0]


async def test_runs_a_database_outage_cut_short_do_not_use_up_the_attempts(
    jobs_sessions: Sessions, jobs_engine: AsyncEngine, make_worker: Callable[..., JobWorker]
) -> None:
    kind, runs = entrypoint(), []
    tenant = await new_tenant_row(jobs_sessions)
    outage_runs = FAST_RETRY.max_attempts + 1

    async def outage_for_a_while(payload: Mapping[str, str]) -> None:
        runs.append(payload["n"])
        user = f"run-{len(runs)}"
        if len(runs) <= outage_runs:
            await lose_the_connection(jobs_sessions, tenant, user)
        async with tenant_transaction(jobs_sessions, tenant) as session:
            await add_user(session, tenant, user)

    worker = make_worker({kind: outage_for_a_while})
    await worker.start()
    await enqueue(jobs_sessions, kind, {"n": "1"})

    assert await ended(jobs_engine, kind) == "successful"
    assert len(runs) == outage_runs + 1
    # Each run cut short left nothing behind; the one that finished wrote once.
    assert await users_of(jobs_sessions, tenant) == [f"run-{outage_runs + 1}"]
    # The backoff still grows with every failed run (and stops at `max_delay`).
    retries = [row.traceback for row in await log_of(jobs_engine, kind) if row.traceback]
    assert [r["additional_context"]["retry_delay"] for r in retries] == [
        str(FAST_RETRY.delay_after(run)) for run in range(1, outage_runs + 1)
    ]


@pytest.mark.parametrize("cause", ["database outage", "busy pool"])
async def test_a_job_that_waited_out_an_outage_has_all_its_attempts_left_for_a_defect(
    jobs_sessions: Sessions,
    jobs_engine: AsyncEngine,
    make_worker: Callable[..., JobWorker],
    cause: str,
) -> None:
    kind, runs = entrypoint(), []
    tenant = await new_tenant_row(jobs_sessions)
    outside_runs = FAST_RETRY.max_attempts + 1

    async def outage_then_defect(payload: Mapping[str, str]) -> None:
        runs.append(payload["n"])
        if len(runs) > outside_runs:
            raise RuntimeError("a defect")
        if cause == "busy pool":
            raise PoolTimeout("QueuePool limit of size 1 overflow 0 reached")
        await lose_the_connection(jobs_sessions, tenant, f"run-{len(runs)}")

    worker = make_worker({kind: outage_then_defect})
    await worker.start()
    await enqueue(jobs_sessions, kind, {"n": "1"})

    assert await ended(jobs_engine, kind) == "exception"
    assert len(runs) == outside_runs + FAST_RETRY.max_attempts
    (final,) = [
        row.traceback for row in await log_of(jobs_engine, kind) if row.status == "exception"
    ]
    assert f"after {FAST_RETRY.max_attempts} attempts (RuntimeError)" in final["exception_message"]


async def test_runs_handed_back_at_shutdown_do_not_use_up_the_attempts(
    jobs_sessions: Sessions, jobs_engine: AsyncEngine, make_worker: Callable[..., JobWorker]
) -> None:
    kind, runs = entrypoint(), []
    await enqueue(jobs_sessions, kind, {"n": "1"})
    for _ in range(FAST_RETRY.max_attempts):
        started = asyncio.Event()

        async def never_ends(payload: Mapping[str, str], started: asyncio.Event = started) -> None:
            started.set()
            await asyncio.Event().wait()

        stopped = make_worker({kind: never_ends}, stop_timeout=timedelta(seconds=0.1))
        await stopped.start()
        await asyncio.wait_for(started.wait(), 15)
        await stopped.stop()

    async def always_fails(payload: Mapping[str, str]) -> None:
        runs.append(payload["n"])
        raise RuntimeError("a defect")

    worker = make_worker({kind: always_fails})
    await worker.start()

    assert await ended(jobs_engine, kind) == "exception"
    assert runs == ["1"] * FAST_RETRY.max_attempts


RETRY_STATEMENT_WAITING_SQL = """
SELECT pid FROM pg_stat_activity
 WHERE datname = $1 AND wait_event_type = 'Lock' AND query LIKE '%attempts = attempts + 1%'
"""
"""The worker's statement recording a retry, waiting for the test's lock on the job's row."""


async def test_a_retry_the_database_could_not_record_runs_again_once_it_is_back(
    jobs_sessions: Sessions,
    jobs_engine: AsyncEngine,
    make_worker: Callable[..., JobWorker],
    cluster: EmbeddedCluster,
) -> None:
    kind, runs = entrypoint(), []
    tenant = await new_tenant_row(jobs_sessions)
    admin = await asyncpg.connect(
        host=str(cluster.socket_dir), user=SUPERUSER, database=JOBS_DATABASE
    )
    holder = await asyncpg.connect(
        host=str(cluster.socket_dir), user=SUPERUSER, database=JOBS_DATABASE
    )
    holding = holder.transaction()

    async def fails_once(payload: Mapping[str, str]) -> None:
        runs.append(payload["n"])
        if len(runs) == 1:
            # The job's row is held, so the retry about to be recorded waits for it.
            await holding.start()
            await holder.execute("SELECT 1 FROM pgqueuer WHERE entrypoint = $1 FOR UPDATE", kind)
            await lose_the_connection(jobs_sessions, tenant, "run-1")

    try:
        # Picked again once its heartbeat is a second old.
        worker = make_worker({kind: fails_once}, heartbeat_timeout=timedelta(seconds=1))
        await worker.start()
        await enqueue(jobs_sessions, kind, {"n": "1"})
        recording: list[int] = []

        async def retry_waits() -> bool:
            recording[:] = [
                row["pid"] for row in await admin.fetch(RETRY_STATEMENT_WAITING_SQL, JOBS_DATABASE)
            ]
            return bool(recording)

        await eventually(retry_waits)
        # The database goes away under the retry's statement.
        assert await admin.fetchval("SELECT pg_terminate_backend($1)", recording[0])
        await holding.rollback()

        assert await ended(jobs_engine, kind) == "successful"
    finally:
        await holder.close()
        await admin.close()
    assert runs == ["1", "1"]
    # The run whose retry went unrecorded counted nowhere: no retry, no failure in the log.
    log = await log_of(jobs_engine, kind)
    assert [row.status for row in log if row.traceback] == []
    assert [row.status for row in log if row.status != "picked"] == ["queued", "successful"]


async def test_a_job_gives_up_only_once_its_failure_hook_could_record_it(
    jobs_sessions: Sessions, jobs_engine: AsyncEngine, make_worker: Callable[..., JobWorker]
) -> None:
    kind, runs, told = entrypoint(), [], []
    tenant = await new_tenant_row(jobs_sessions)

    async def always_fails(payload: Mapping[str, str]) -> None:
        runs.append(payload["n"])
        raise RuntimeError("a defect")

    async def records(failure: JobFailure) -> None:
        told.append(failure.final)
        if told.count(True) == 1 and failure.final:
            # The database goes away as the give-up is being recorded.
            await lose_the_connection(jobs_sessions, tenant, "hook")

    worker = make_worker({kind: always_fails}, on_failure=records)
    await worker.start()
    await enqueue(jobs_sessions, kind, {"n": "1"})

    assert await ended(jobs_engine, kind) == "exception"
    # The last run was run again, and its give-up recorded then.
    assert len(runs) == FAST_RETRY.max_attempts + 1
    assert told == [False] * (FAST_RETRY.max_attempts - 1) + [True, True]


# --- a job taken over by another worker -------------------------------------------------------


async def picked_by(raw: asyncpg.Connection, kind: str, worker: QueueManagerId) -> Job:
    """The job of `kind`, picked by `worker`'s dequeue (a job whose heartbeat lapsed is picked
    again, as a worker picks it)."""
    (job,) = await queries_for(AsyncpgDriver(raw)).dequeue(
        batch_size=1,
        entrypoints={QueueEntrypoint(kind): EntrypointExecutionParameter(concurrency_limit=0)},
        queue_manager_id=worker,
        global_concurrency_limit=None,
        heartbeat_timeout=timedelta(seconds=30),
    )
    return job


def retry_record(job: Job, retry: RetryRequested) -> TracebackRecord:
    """What pgqueuer passes `retry_job` for a run that raised `retry`."""
    return TracebackRecord.from_exception(
        exc=retry, job_id=job.id, additional_context={"attempt": job.attempts}
    )


async def test_a_worker_whose_job_was_taken_over_records_neither_its_outcome_nor_its_retry(
    jobs_sessions: Sessions, jobs_engine: AsyncEngine, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker's run goes on after its heartbeat lapsed (the process stalled, or lost the
    database for a while) and another worker picked the job again. What the first run's end
    records must not touch the second's job: done, it would delete the job under the run in
    progress; retried, it would queue it again (a third run at once) and spend an attempt."""
    kind = entrypoint()
    await enqueue(jobs_sessions, kind, {"n": "1"})
    _, connect = jobs_engine.dialect.create_connect_args(jobs_engine.url)
    raw = await asyncpg.connect(**connect)
    queries = queries_for(AsyncpgDriver(raw))
    stale, current = QueueManagerId(uuid.uuid4()), QueueManagerId(uuid.uuid4())
    try:
        first = await picked_by(raw, kind, stale)
        await raw.execute(
            "UPDATE pgqueuer SET heartbeat = now() - interval '1 hour' WHERE id = $1", first.id
        )
        second = await picked_by(raw, kind, current)
        assert second.id == first.id

        # The first run ends, in each way a run ends, after the job was taken over.
        await queries.log_jobs([(first, "successful", None)])
        failed = RetryRequested(delay=timedelta(0), reason="attempt 1 failed (RuntimeError)")
        await queries.retry_job(first, failed.delay, retry_record(first, failed))
        outage = UncountedRetry(delay=timedelta(0), reason="attempt 1 failed (OSError)")
        await queries.retry_job(first, outage.delay, retry_record(first, outage))

        (job,) = await jobs_of(jobs_engine, kind)
        assert (job.status, job.attempts) == ("picked", 0)
        assert await raw.fetchval(
            "SELECT queue_manager_id FROM pgqueuer WHERE id = $1", job.id
        ) == uuid.UUID(str(current))
        assert [row.status for row in await log_of(jobs_engine, kind)] == [
            "queued",
            "picked",
            "picked",
        ]
        refused = [r.getMessage() for r in caplog.records if "no longer this worker's" in r.message]
        assert len(refused) == 3, refused

        # The run that owns the job records its end.
        await queries.log_jobs([(second, "successful", None)])
        assert await jobs_of(jobs_engine, kind) == []
        # A retry of a job deleted meanwhile (done, or purged) brings nothing back.
        await queries.retry_job(first, failed.delay, retry_record(first, failed))
        assert await jobs_of(jobs_engine, kind) == []
        assert [row.status for row in await log_of(jobs_engine, kind)] == [
            "queued",
            "picked",
            "picked",
            "successful",
        ]
    finally:
        await raw.close()


def test_the_backoff_stops_at_its_ceiling_however_many_runs_failed() -> None:
    policy = RetryPolicy(initial_delay=timedelta(seconds=2), max_delay=timedelta(minutes=5))
    assert policy.delay_after(1) == timedelta(seconds=2)
    assert policy.delay_after(4) == timedelta(seconds=16)
    # A job that waited out a day-long outage at one run per `max_delay`.
    assert policy.delay_after(300) == policy.delay_after(5_000) == timedelta(minutes=5)


async def test_the_migrated_schema_is_what_pgqueuer_expects(jobs_engine: AsyncEngine) -> None:
    _, connect = jobs_engine.dialect.create_connect_args(jobs_engine.url)
    raw = await asyncpg.connect(**connect)
    try:
        plan = await queries_for(AsyncpgDriver(raw)).plan_upgrade()
    finally:
        await raw.close()
    assert list(plan.statements) == []


# --- the thread-summary job end to end --------------------------------------------------------


@pytest.fixture
def llm_server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


async def test_an_append_queues_a_summary_pass_that_survives_a_model_outage(
    jobs_sessions: Sessions,
    jobs_settings: Settings,
    jobs_engine: AsyncEngine,
    make_worker: Callable[..., JobWorker],
    llm_server: FakeOpenAIServer,
) -> None:
    tenant = new_tenant()
    settings = jobs_settings.model_copy(update={"thread_summary_keep_recent": 3})
    chat_model = OpenAIChatModel(
        model=MODEL, base_url=llm_server.base_url, api_key=API_KEY, timeout_seconds=5, max_retries=0
    )
    llm_server.fail_next = 2  # the first two passes meet a model outage
    try:
        async with tenant_transaction(jobs_sessions, tenant) as session:
            await session.execute(text("INSERT INTO tenant (id) VALUES (:t)"), {"t": tenant})
            await session.execute(
                text("INSERT INTO user_account (tenant_id, id) VALUES (:t, 'u1')"), {"t": tenant}
            )
            thread = Thread(tenant_id=tenant, user_id="u1")
            session.add(thread)
            await session.flush()
            for seq in range(6):
                role = "user" if seq % 2 == 0 else "assistant"
                session.add(
                    Message(
                        tenant_id=tenant,
                        thread_id=thread.id,
                        user_id="u1",
                        seq=seq,
                        role=role,
                        content=f"{role} {seq}",
                    )
                )
            await session.flush()
            await enqueue_thread_summary(session, tenant, thread.id)

        worker = make_worker(
            {THREAD_SUMMARY_JOB: thread_summary_job(jobs_sessions, chat_model, settings)}
        )
        await worker.start()

        async def summarised() -> bool:
            async with tenant_transaction(jobs_sessions, tenant) as session:
                count = await session.execute(
                    text("SELECT count(*) FROM thread_summary WHERE thread_id = :id"),
                    {"id": thread.id},
                )
                return bool(count.scalar_one())

        await eventually(summarised)
    finally:
        await chat_model.aclose()

    assert len(llm_server.requests) == 3
    async with tenant_transaction(jobs_sessions, tenant) as session:
        summary = (
            await session.execute(
                text("SELECT * FROM thread_summary WHERE thread_id = :id"), {"id": thread.id}
            )
        ).one()
    assert (summary.sequence, summary.start_index, summary.end_index) == (1, 0, 6)
