"""What the queue holds for one tenant: the jobs that wait or run, read from pgqueuer's tables.

Those tables are shared by all tenants and not under row-level security, so every statement
here filters by the tenant id the caller passes — always the authenticated principal's, never a
value from a request.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ARRAY, Text, bindparam, text
from sqlalchemy.ext.asyncio import AsyncConnection

from service.jobs.queue import UNCOUNTED_RUNS_SQL
from service.kit.repository import TenantRepository

_TENANT_JOBS = f"""
    -- Decode only the payloads of the kinds asked for (other kinds may hold anything).
    -- A job's attempts are its failed runs that count, as the worker counts them: pgqueuer's
    -- `attempts` also holds the runs that failed for a cause outside the job, which the job's
    -- header counts apart (`UNCOUNTED_RUNS_SQL`).
    WITH decoded AS MATERIALIZED (
        SELECT id, entrypoint, status::text AS status, attempts - uncounted.runs AS attempts,
               uncounted.runs AS uncounted_runs, created, execute_after,
               CASE WHEN entrypoint = ANY(:kinds)
                    THEN convert_from(payload, 'UTF8')::jsonb END AS body
          FROM pgqueuer
         CROSS JOIN LATERAL (SELECT {UNCOUNTED_RUNS_SQL} AS runs) uncounted
         WHERE entrypoint = ANY(:kinds)
    ),
    tenant_jobs AS MATERIALIZED (
        -- The thread as the key it is (a payload's id that is not a UUID, which the queue's
        -- table shared with other writers may hold, as none), computed here: with the
        -- conversion in the join's condition, the plan still read all of the tenant's threads
        -- (the condition calls a function PostgreSQL does not know to be leakproof, under
        -- row-level security); comparing two columns, it looks each job's thread up.
        SELECT id, entrypoint, status, attempts, uncounted_runs, created, execute_after,
               CASE WHEN pg_input_is_valid(body ->> 'thread_id', 'uuid')
                    THEN CAST(body ->> 'thread_id' AS uuid) END AS thread_id
          FROM decoded
         WHERE body ->> 'tenant_id' = :tenant_id
    )
"""  # noqa: S608 - interpolates only the constant expression above

PENDING_JOBS_SQL = text(
    f"""{_TENANT_JOBS}
    SELECT j.id, j.entrypoint, j.status, j.attempts, j.uncounted_runs, j.created,
           j.execute_after, j.thread_id, t.user_id
      FROM tenant_jobs j
      -- Each job's thread by its key: compared as text, the thread's id could not be looked
      -- up, and the listing read all of the tenant's threads.
      LEFT JOIN thread t ON t.tenant_id = :tenant_id AND t.id = j.thread_id
     WHERE CAST(:user_id AS text) IS NULL OR t.user_id = :user_id
     ORDER BY j.created, j.id
     LIMIT :limit
    """  # noqa: S608 - interpolates only the constant CTE above
).bindparams(bindparam("kinds", type_=ARRAY(Text)))
"""The tenant's queued and running jobs of the given kinds, oldest first, each with its attempts
used and its failed runs that did not count, its thread and the thread's user (read under the
tenant's row-level security); only `user_id`'s threads when it is given."""

JOB_COUNTS_SQL = text(
    f"""{_TENANT_JOBS}
    SELECT entrypoint, status, count(*) AS jobs, count(*) FILTER (WHERE attempts > 0) AS retrying,
           count(*) FILTER (WHERE attempts = 0 AND uncounted_runs > 0) AS interrupted,
           min(created) AS oldest
      FROM tenant_jobs
     GROUP BY entrypoint, status
     ORDER BY entrypoint, status
    """  # noqa: S608 - interpolates only the constant CTE above
).bindparams(bindparam("kinds", type_=ARRAY(Text)))
"""Per kind and status (`queued`, `picked`): how many of the tenant's jobs, how many of them
used at least one attempt already, how many others failed only for causes outside the job
(their runs not counted), and when the oldest was enqueued."""


QUEUE_BACKLOG_SQL = text(
    """
    SELECT entrypoint, status::text AS status, count(*) AS jobs,
           coalesce(extract(epoch FROM now() - min(created)), 0) AS oldest_age_seconds
      FROM pgqueuer
     WHERE entrypoint = ANY(:kinds) AND status IN ('queued', 'picked')
     GROUP BY entrypoint, status
    """
).bindparams(bindparam("kinds", type_=ARRAY(Text)))
"""All tenants together, per kind and status: how many jobs wait or run and how old the oldest
is (for the operator's metrics; no tenant data leaves)."""


@dataclass(frozen=True, slots=True)
class QueueBacklog:
    kind: str
    status: str
    jobs: int
    oldest_age_seconds: float


async def queue_backlog(connection: AsyncConnection, kinds: Sequence[str]) -> list[QueueBacklog]:
    """The queue's backlog across tenants for the given kinds (see `QUEUE_BACKLOG_SQL`)."""
    rows = await connection.execute(QUEUE_BACKLOG_SQL, {"kinds": list(kinds)})
    return [
        QueueBacklog(row.entrypoint, row.status, int(row.jobs), float(row.oldest_age_seconds))
        for row in rows
    ]


@dataclass(frozen=True, slots=True)
class PendingJob:
    id: int
    kind: str
    status: str
    attempts: int
    """Failed runs that count towards the job's limit."""
    uncounted_runs: int
    """Failed runs that did not: for a cause outside the job (`service.jobs.worker`)."""
    created_at: datetime
    execute_after: datetime
    thread_id: uuid.UUID | None
    user_id: str | None


@dataclass(frozen=True, slots=True)
class JobCount:
    kind: str
    status: str
    jobs: int
    retrying: int
    interrupted: int
    oldest_created_at: datetime


class JobStatusRepository(TenantRepository):
    async def pending(
        self, kinds: Sequence[str], *, user_id: str | None, limit: int
    ) -> list[PendingJob]:
        rows = await self._session.execute(
            PENDING_JOBS_SQL,
            {
                "kinds": list(kinds),
                "tenant_id": self._tenant_id,
                "user_id": user_id,
                "limit": limit,
            },
        )
        return [
            PendingJob(
                id=int(row.id),
                kind=row.entrypoint,
                status=row.status,
                attempts=int(row.attempts),
                uncounted_runs=int(row.uncounted_runs),
                created_at=row.created,
                execute_after=row.execute_after,
                thread_id=row.thread_id,
                user_id=row.user_id,
            )
            for row in rows
        ]

    async def counts(self, kinds: Sequence[str]) -> list[JobCount]:
        rows = await self._session.execute(
            JOB_COUNTS_SQL, {"kinds": list(kinds), "tenant_id": self._tenant_id}
        )
        return [
            JobCount(
                kind=row.entrypoint,
                status=row.status,
                jobs=int(row.jobs),
                retrying=int(row.retrying),
                interrupted=int(row.interrupted),
                oldest_created_at=row.oldest,
            )
            for row in rows
        ]
