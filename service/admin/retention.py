"""Retention: the periodic sweep that physically removes what a tenant keeps no longer.

Reads already hide a memory once its `expires_at` has passed; the sweep removes it with its
history (`remove_memories`, as a write does that finds it still holding its text or key), and
applies each tenant's `retention_policy`: episodic memories, raw messages and thread summaries
older than the tenant's limit in days (NULL = kept forever). A thread's newest message is never
swept: positions in a thread continue from it, and the write path's cursor points at it.

The sweep is a durable cron job on pgqueuer's scheduler (`RetentionScheduler`): every replica
may run the scheduler, and pgqueuer lets one of them take each due run. It acts as the runtime
role, one tenant at a time, in transactions under that tenant's row-level security (memories in
batches of `MEMORY_BATCH`, a transaction each); the tenant list
comes from `mneme_tenant_ids()`, which returns ids and nothing else. Rows swept are counted in
`mneme_retention_swept_rows_total{table}`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import asyncpg
from pgqueuer.adapters.drivers.asyncpg import AsyncpgPoolDriver
from pgqueuer.core.sm import SchedulerManager
from pgqueuer.domain.models import Schedule
from prometheus_client import Counter
from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from service.accounts.repository import AccountRepository
from service.config import Settings
from service.db import asyncpg_client_limits, tenant_transaction
from service.jobs.queue import queries_for
from service.kit.repository import rowcount
from service.memories.repository import REMOVE_MEMORIES_SQL, remove_memories
from service.observability import Metrics

logger = logging.getLogger("mneme.retention")

RETENTION_SWEEP_JOB = "retention_sweep"
SWEEP_SCHEDULE = "17 * * * *"
"""Hourly, off the full hour."""

TENANT_IDS_SQL = text("SELECT mneme_tenant_ids() AS id")
"""Every tenant id (a SECURITY DEFINER function: the runtime role sees one tenant at a time)."""

READ_POLICY_SQL = text(
    "SELECT episodic_days, messages_days, summaries_days FROM retention_policy "
    "WHERE tenant_id = :tenant_id"
)

MEMORY_BATCH = 1_000
"""Memories removed per transaction. A tenant that sets a limit for the first time may have
tens of thousands past it (41,632 of one scenario tenant's 100,000 at 30 days, 7 s to remove
with their postings): in batches, no transaction holds its rows, or the server's oldest
snapshot, for that long."""

DOOMED_MEMORIES_SQL: tuple[TextClause, ...] = (
    # Expired: read through `ix_memory_expiry`, an index of the memories that carry an expiry,
    # so the hourly sweep visits the expired ones, not every memory the tenant holds (a table
    # scan of 365 ms an hour for a tenant of 100,000).
    text("SELECT id FROM memory WHERE tenant_id = :tenant_id AND expires_at <= now() LIMIT :batch"),
    # Episodic past the tenant's limit. Only a tenant whose policy sets one reads its episodic
    # memories for their age: without it, the first condition (it names no row) stops the
    # statement before any scan.
    text(
        """
        SELECT id FROM memory
         WHERE CAST(:episodic_days AS int) IS NOT NULL
           AND tenant_id = :tenant_id AND kind = 'episodic'
           AND created_at < now() - make_interval(days => :episodic_days)
         LIMIT :batch
        """
    ),
)
"""A batch of the memories the sweep removes, by reason: expired, or episodic past the
tenant's limit (a memory both goes with the first)."""

SWEEP_OTHERS_SQL: tuple[tuple[str, TextClause], ...] = (
    (
        "thread_summary",
        text(
            """
            DELETE FROM thread_summary
             WHERE tenant_id = :tenant_id AND CAST(:summaries_days AS int) IS NOT NULL
               AND created_at < now() - make_interval(days => :summaries_days)
            """
        ),
    ),
    (
        "message",
        text(
            """
            DELETE FROM message m
             WHERE m.tenant_id = :tenant_id AND CAST(:messages_days AS int) IS NOT NULL
               AND m.created_at < now() - make_interval(days => :messages_days)
               AND m.seq < (SELECT max(n.seq) FROM message n
                             WHERE n.tenant_id = m.tenant_id AND n.thread_id = m.thread_id)
            """
        ),
    ),
)
"""Old summaries, and old messages except each thread's newest."""

SWEPT_TABLES = tuple(table for table, _ in (*REMOVE_MEMORIES_SQL, *SWEEP_OTHERS_SQL))
"""The tables the sweep removes rows from, as its counts name them."""


class RetentionSweeper:
    """Runs one sweep over every tenant and counts what it removed."""

    def __init__(
        self, sessionmaker: async_sessionmaker[AsyncSession], metrics: Metrics | None
    ) -> None:
        self._sessionmaker = sessionmaker
        self._swept = (
            None
            if metrics is None
            else Counter(
                "mneme_retention_swept_rows_total",
                "Rows removed by the retention sweep, by table.",
                ["table"],
                registry=metrics.registry,
            )
        )

    async def sweep(self, tenant_ids: list[str] | None = None) -> dict[str, int]:
        """Sweep the given tenants (every tenant by default); rows removed per table."""
        if tenant_ids is None:
            async with self._sessionmaker() as session:
                tenant_ids = list((await session.execute(TENANT_IDS_SQL)).scalars())
        totals = dict.fromkeys(SWEPT_TABLES, 0)
        for tenant_id in tenant_ids:
            for table, count in (await self.sweep_tenant(tenant_id)).items():
                totals[table] += count
        if self._swept is not None:
            for table, count in totals.items():
                self._swept.labels(table).inc(count)
        if any(totals.values()):
            logger.info("retention sweep over %d tenants removed %s", len(tenant_ids), totals)
        return totals

    async def sweep_tenant(self, tenant_id: str) -> dict[str, int]:
        """One tenant's sweep: its memories in batches of `MEMORY_BATCH`, a transaction each,
        then its old summaries and messages in one; each after the tenant's write lock, as
        every write to its data, so a purge of the tenant never meets one half-way."""
        async with tenant_transaction(self._sessionmaker, tenant_id) as session:
            policy = (await session.execute(READ_POLICY_SQL, {"tenant_id": tenant_id})).first()
        params: dict[str, Any] = {
            "tenant_id": tenant_id,
            "episodic_days": policy.episodic_days if policy else None,
            "messages_days": policy.messages_days if policy else None,
            "summaries_days": policy.summaries_days if policy else None,
        }
        swept = dict.fromkeys(SWEPT_TABLES, 0)
        for doomed in DOOMED_MEMORIES_SQL:
            while True:
                async with tenant_transaction(self._sessionmaker, tenant_id) as session:
                    await AccountRepository(session, tenant_id).hold_tenant_writes()
                    found = await session.execute(doomed, {**params, "batch": MEMORY_BATCH})
                    ids = list(found.scalars())
                    removed = await remove_memories(session, tenant_id, ids)
                    for table, count in removed.items():
                        swept[table] += count
                if len(ids) < MEMORY_BATCH:
                    break
        async with tenant_transaction(self._sessionmaker, tenant_id) as session:
            await AccountRepository(session, tenant_id).hold_tenant_writes()
            for table, statement in SWEEP_OTHERS_SQL:
                swept[table] += rowcount(await session.execute(statement, params))
        return swept


class RetentionScheduler:
    """pgqueuer's cron scheduler running the sweep, on a small pool of its own."""

    def __init__(self, settings: Settings, engine: AsyncEngine, sweeper: RetentionSweeper) -> None:
        self._enabled = settings.jobs_enabled
        self._sweeper = sweeper
        _, self._connect_kwargs = engine.dialect.create_connect_args(engine.url)
        self._client_limits = asyncpg_client_limits(settings)
        self._pool: asyncpg.Pool | None = None
        self._manager: SchedulerManager | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if not self._enabled:
            return
        self._pool = await asyncpg.create_pool(
            min_size=1,
            max_size=2,
            server_settings={"application_name": "mneme-retention"},
            # What the URL sets itself wins, as it does for the requests' engine.
            **{**self._client_limits, **self._connect_kwargs},
        )
        manager = SchedulerManager(queries_for(AsyncpgPoolDriver(self._pool)))

        @manager.schedule(RETENTION_SWEEP_JOB, SWEEP_SCHEDULE)
        async def sweep(_schedule: Schedule) -> None:
            await self._sweeper.sweep()

        self._manager = manager
        self._task = asyncio.create_task(manager.run(), name="mneme-retention-scheduler")

    async def stop(self) -> None:
        if self._manager is not None:
            self._manager.shutdown.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._task, 20)
            self._task = None
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
