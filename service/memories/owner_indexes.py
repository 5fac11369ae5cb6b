"""Vector indexes of their own for the owners with the most memories, one per kind of memory.

A search sorts a small owner's vectors exactly, which costs what the owner holds. An owner with
many memories of a kind gets an HNSW index partial to them (`WHERE tenant_id = … AND scope = …
AND user_id = … AND kind = …`): a search planned for it (`fusion.PlannedSearch`) walks a graph
of that owner's vectors of that kind only, whose cost follows what the search asks for, not
what the owner holds.

The memory table has no graph of its own (over every owner's vectors). A walk of it filtered to
one owner skips the other owners' vectors until it has found enough of its own (pgvector's
iterative scan): its cost follows the owner's share of the table, so it served only an owner
that is much of a small table, and every write paid an insert into it, a large owner's on top
of its own graph's.

The unit is the owner's memories of one kind, not all of them, because a context asks for its
facts and its episodes apart: in one graph of both, the walk for the episodes nearest a question
about facts visits and discards the facts on its way (thousands of them at 100,000 memories, and
the most of a context's time), where a graph per kind holds only what the scan returns. A search
over every kind walks each kind's graph and keeps the nearest of them, which at a narrower
candidate list costs what one walk of the whole owner cost, and agrees with the exact order
more often. Each memory is in one graph at most (its owner's of its kind): a write inserts into
one graph, and a small owner's into none.

The indexes are found by name (`owner_index_name`), so nothing else records them. They are
built and dropped concurrently, by a connection of the table's owner role: the runtime role
cannot create an index, and searches and writes go on meanwhile. `OwnerIndexes.refresh` makes
the set of indexes match the owners' sizes: among the owners with the most memories as the
search statistics count them (`memory_owner_stats`), an index for each kind an owner holds at
least `build_from` memories of (at most `most` indexes, the largest first), kept until the kind
falls below half of that (a kind at the threshold is not rebuilt on every change), dropped when
it does, when the owner is purged or when others outgrow it. An index built with other graph
settings than the configured ones (`ef_construction`) is replaced: the new one is built beside
it and takes its name, so the owner's searches read one or the other throughout. An owner's
index over all its kinds (as earlier versions built them) is read by its searches until its
kinds' indexes are built, then dropped (`retire`).

A change of embedding model (`reembed`) fills a second vector column. Once that column has its
own HNSW index, a refresh keeps the owners' indexes on both columns (`indexed_columns`), and
`reembed run` refreshes them itself before the first tenant switches to it: a large owner's
searches on the new column walk graphs of their own from the switch on, as they did on the old
one. `reembed finish` drops the old column, and its owners' indexes with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Row, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from service.auth.owner import Owner
from service.config import Settings
from service.memories.index_builds import (
    create_index_concurrently,
    drop_index_concurrently,
    hnsw_definition,
    hnsw_options,
    replace_index_concurrently,
    sees_all_tenants,
)
from service.memories.owner_index_names import OWNER_INDEX_PREFIX, owner_index_name
from service.memories.vector_columns import VectorColumn, load_state

logger = logging.getLogger("mneme.owner_indexes")

DEFAULT_EF_CONSTRUCTION: int = Settings.model_fields["owner_vector_index_ef_construction"].default
"""The candidate list while an owner's graph is built, as configured by default."""

OWNERS_SQL = text(
    """
SELECT tenant_id, user_id, owner_key, documents
  FROM memory_owner_stats
 WHERE documents >= :keep_from
 ORDER BY documents DESC, tenant_id, owner_key
 LIMIT :most
"""
)
"""The largest `most` owners that may keep an index, largest first (the statistics as last
counted): their kinds are the candidates for the `most` indexes (an owner beyond them waits
until it is among them, even if one of its kinds outgrows a kind of theirs)."""

OWNER_KINDS_SQL = text(
    """
SELECT kind, count(*) AS documents
  FROM memory
 WHERE tenant_id = :tenant_id AND scope = :scope
   AND (CAST(:user_id AS text) IS NULL OR user_id = CAST(:user_id AS text))
 GROUP BY kind
"""
)
"""How many memories of each kind one owner holds (one tenant's rows: a single shard on
Citus)."""

EXISTING_SQL = text(
    """
SELECT c.relname AS name, i.indisvalid AS valid, c.reloptions AS options
  FROM pg_index i
  JOIN pg_class c ON c.oid = i.indexrelid
 WHERE i.indrelid = 'memory'::regclass AND starts_with(c.relname, :prefix)
"""
)

OWNER_CONDITION_SQL = text(
    """
SELECT 'WHERE ' || format('tenant_id = %L AND scope = %L', CAST(:tenant_id AS text),
                          CAST(:scope AS text))
       -- quote_literal of NULL is NULL (format's %L would write NULL): none for the org.
       || coalesce(' AND user_id = ' || quote_literal(CAST(:user_id AS text)), '')
       || format(' AND kind = %L', CAST(:kind AS text))
"""
)
"""The condition of the owner's index of one kind, its values quoted by the server (`format`'s
%L): the owner's as a search's filter states it for one owner, and the kind as the search's scan
of that kind states it, which the planner must find implied by the scan's conditions (the
organization's says `scope = 'org'` alone, as the filter does)."""


class OwnerIndexesRefused(RuntimeError):
    """The connection cannot maintain the indexes (not the table's owner, or not allowed to
    see every tenant's statistics)."""


@dataclass(frozen=True)
class OwnerIndex:
    """One owner's index of one kind of memory: whose, of which kind, how many memories it
    holds, and under which name."""

    tenant_id: str
    owner: Owner
    kind: str
    memories: int
    name: str
    column: VectorColumn


def _lines(
    columns: list[str],
    verbs: tuple[str, str, str, str, str],
    built: list[OwnerIndex],
    rebuilt: list[OwnerIndex],
    kept: list[OwnerIndex],
    dropped: list[str],
    retired: list[str],
) -> list[str]:
    """One line per index, under the verbs for built, rebuilt, kept, dropped and retired."""
    build, rebuild, keep, drop, retire = verbs
    on_column = len(columns) > 1
    return (
        [f"column: {column}" for column in columns]
        + [
            f"{verb}: {i.name} ({i.kind} memories of {i.owner.key} of tenant {i.tenant_id}, "
            f"{i.memories}{f', on {i.column.name}' if on_column else ''})"
            for verb, group in ((build, built), (rebuild, rebuilt), (keep, kept))
            for i in group
        ]
        + [f"{drop}: {name}" for name in dropped]
        + [f"{retire}: {name}" for name in retired]
    )


@dataclass
class OwnerIndexPlan:
    """What a refresh would do on `columns`: the indexes to build (largest first), to build
    again with the configured graph settings, to keep and to drop, and the owners' indexes over
    all their kinds to drop once their kinds' indexes are built (`retire`); `passed_over` names
    the indexes of kinds past the threshold left unbuilt, the `most` larger ones taking their
    place."""

    columns: list[str]
    build: list[OwnerIndex] = field(default_factory=list)
    rebuild: list[OwnerIndex] = field(default_factory=list)
    drop: list[str] = field(default_factory=list)
    kept: list[OwnerIndex] = field(default_factory=list)
    retire: list[str] = field(default_factory=list)
    passed_over: set[str] = field(default_factory=set)

    def lines(self) -> list[str]:
        verbs = ("build", "rebuild", "keep", "drop", "retire")
        return _lines(
            self.columns, verbs, self.build, self.rebuild, self.kept, self.drop, self.retire
        )


@dataclass
class OwnerIndexReport:
    """What a refresh did (as far as it got, if a build failed)."""

    columns: list[str]
    built: list[OwnerIndex] = field(default_factory=list)
    rebuilt: list[OwnerIndex] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    kept: list[OwnerIndex] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        verbs = ("built", "rebuilt", "kept", "dropped", "retired")
        return _lines(
            self.columns, verbs, self.built, self.rebuilt, self.kept, self.dropped, self.retired
        )


class OwnerIndexes:
    """Builds and drops the owners' vector indexes on `owner_engine` (the table's owner)."""

    def __init__(
        self,
        owner_engine: AsyncEngine,
        *,
        build_from: int,
        most: int,
        ef_construction: int = DEFAULT_EF_CONSTRUCTION,
    ) -> None:
        self._engine = owner_engine
        self._build_from = build_from
        self._most = most
        self._ef_construction = ef_construction
        self._due = asyncio.Event()
        # The indexes the last refresh left unbuilt for want of room (`OwnerIndexPlan`): a
        # recount of their owners asks for no refresh (`build_soon_if_wanted`) until one finds
        # room for them.
        self._passed_over: set[str] = set()

    @classmethod
    def configured(cls, owner_engine: AsyncEngine, settings: Settings) -> OwnerIndexes:
        """The indexes as `settings` ask for them (`MNEME_OWNER_VECTOR_INDEX_*`)."""
        return cls(
            owner_engine,
            build_from=settings.owner_vector_index_from,
            most=settings.owner_vector_indexes_max,
            ef_construction=settings.owner_vector_index_ef_construction,
        )

    async def plan(self, columns: list[VectorColumn] | None = None) -> OwnerIndexPlan:
        """The indexes `refresh` would build and drop on `columns` (the columns searches read
        or are about to, `indexed_columns`, when not given), as the statistics stand; an owner
        index on another column is to be dropped."""
        async with self._engine.connect() as connection:
            await _require_owner(connection)
        if columns is None:
            columns = await indexed_columns(self._engine)
        async with self._engine.connect() as connection:
            return await self._plan(connection, columns)

    async def _plan(
        self, connection: AsyncConnection, columns: list[VectorColumn]
    ) -> OwnerIndexPlan:
        owners = (
            await connection.execute(OWNERS_SQL, {"keep_from": self._keep_from, "most": self._most})
        ).all()
        existing = {
            row.name: row
            for row in await connection.execute(EXISTING_SQL, {"prefix": OWNER_INDEX_PREFIX})
        }
        options = sorted(hnsw_options(self._ef_construction))
        plan = OwnerIndexPlan([column.name for column in columns])
        wanted: set[str] = set()
        # Counted once, whatever the columns: each column gets the same owners' indexes (a
        # tenant reads one column or the other).
        kinds = (
            [await self._kinds_of(connection, owner) for owner in owners]
            if self._build_from > 0
            else []
        )
        for column in columns:
            with_kind_indexes: set[tuple[str, str]] = set()
            if self._build_from > 0:
                candidates = [
                    OwnerIndex(
                        tenant_id,
                        whose,
                        kind,
                        documents,
                        owner_index_name(tenant_id, whose.key, column.name, kind),
                        column,
                    )
                    for tenant_id, whose, kind, documents in itertools.chain(*kinds)
                ]
                candidates.sort(key=lambda i: (-i.memories, i.tenant_id, i.owner.key, i.kind))
                plan.passed_over.update(
                    index.name
                    for index in candidates[self._most :]
                    if index.memories >= self._build_from
                )
                for index in candidates[: self._most]:
                    found = existing.get(index.name)
                    if found is not None and found.valid:
                        same = sorted(found.options or []) == options
                        (plan.kept if same else plan.rebuild).append(index)
                    elif index.memories >= self._build_from:
                        plan.build.append(index)
                    else:
                        continue
                    wanted.add(index.name)
                    with_kind_indexes.add((index.tenant_id, index.owner.key))
            for owner in owners:
                whole = owner_index_name(owner.tenant_id, owner.owner_key, column.name)
                if whole in existing and (owner.tenant_id, owner.owner_key) in with_kind_indexes:
                    plan.retire.append(whole)
        accounted_for = wanted | set(plan.retire)
        plan.drop = sorted(name for name in existing if name not in accounted_for)
        return plan

    async def _kinds_of(
        self, connection: AsyncConnection, owner: Row[Any]
    ) -> list[tuple[str, Owner, str, int]]:
        """The owner's kinds with enough memories to keep an index, as (tenant, owner, kind,
        memories)."""
        whose = Owner.org() if owner.user_id is None else Owner.user(owner.user_id)
        counts = await connection.execute(
            OWNER_KINDS_SQL,
            {"tenant_id": owner.tenant_id, "scope": whose.scope, "user_id": whose.user_id},
        )
        return [
            (owner.tenant_id, whose, row.kind, row.documents)
            for row in counts
            if row.documents >= self._keep_from
        ]

    async def refresh(self) -> OwnerIndexReport:
        """Build the indexes missing and drop those no longer wanted, on the columns searches
        read or are about to (`indexed_columns`). Under a session lock: of two processes
        refreshing at once, the second waits, then finds the work done."""
        # Checked before the connection is switched to autocommit (a pooled connection of a
        # role that may not keep its isolation level).
        async with self._engine.connect() as connection:
            await _require_owner(connection)
        columns = await indexed_columns(self._engine)
        report = OwnerIndexReport([column.name for column in columns])
        async with self._engine.connect() as connection:
            autocommit = await connection.execution_options(isolation_level="AUTOCOMMIT")
            await _take_refresh_lock(autocommit)
            # Room for the graph of a large owner (`create_index_concurrently` lifts the
            # statement timeout for each build).
            await autocommit.execute(text(f"SET maintenance_work_mem = '{BUILD_MEMORY}'"))
            try:
                plan = await self._plan(autocommit, columns)
                report.kept = plan.kept
                self._passed_over = plan.passed_over
                # Dropped first: an index an owner outgrew makes room for the one built next.
                for name in plan.drop:
                    await drop_index_concurrently(autocommit, name)
                    report.dropped.append(name)
                for index in plan.build:
                    await _build(autocommit, index, self._ef_construction)
                    report.built.append(index)
                for index in plan.rebuild:
                    await _build(autocommit, index, self._ef_construction, replace=True)
                    report.rebuilt.append(index)
                # Last: the owner's searches read the index over all its kinds until then.
                for name in plan.retire:
                    await drop_index_concurrently(autocommit, name)
                    report.retired.append(name)
            finally:
                await autocommit.execute(text("RESET maintenance_work_mem"))
                await autocommit.execute(
                    text("SELECT pg_advisory_unlock(:key)"), {"key": REFRESH_LOCK}
                )
        return report

    def refresh_soon(self) -> None:
        """Have the refresh loop (`keep_owner_indexes`) run now rather than at its next turn:
        a purge leaves an index whose condition names the purged user, which the next refresh
        drops."""
        self._due.set()

    async def build_soon_if_wanted(self, tenant_id: str, owner: Owner, documents: int) -> bool:
        """After the owner's statistics were counted at `documents` live memories: have the
        refresh run now (`refresh_soon`) when the owner holds enough memories of a kind for an
        index of its own that it lacks on a column searches read, unless the refresh would not
        build it: the owner is not among the `most` largest, or the last refresh passed that
        index over for larger ones. True when it asked.

        An owner that outgrows the threshold between two turns of the keeper (ten minutes by
        default) would otherwise have its vectors sorted exactly meanwhile, which at 10,000
        memories costs a search more than the rest of its statement. It costs the refresh's own
        look-up of the largest owners and a count of this one's memories by kind, once per
        recount of an owner past the threshold."""
        if self._build_from <= 0 or documents < self._build_from:
            return False
        async with self._engine.connect() as connection:
            largest = await connection.execute(
                OWNERS_SQL, {"keep_from": self._keep_from, "most": self._most}
            )
            found = [
                row for row in largest if (row.tenant_id, row.owner_key) == (tenant_id, owner.key)
            ]
            if not found:
                # Not among the owners a refresh considers: it would build nothing for it.
                return False
            kinds = await self._kinds_of(connection, found[0])
            existing = {
                row.name
                for row in await connection.execute(EXISTING_SQL, {"prefix": OWNER_INDEX_PREFIX})
                if row.valid
            }
        columns = await indexed_columns(self._engine)
        wanted = {
            owner_index_name(tenant_id, owner.key, column.name, kind)
            for _, _, kind, memories in kinds
            if memories >= self._build_from
            for column in columns
        }
        if not wanted - existing - self._passed_over:
            return False
        self.refresh_soon()
        return True

    async def until_due(self, every_seconds: float) -> None:
        """Wait `every_seconds`, or less if `refresh_soon` is called meanwhile."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._due.wait(), every_seconds)
        self._due.clear()

    @property
    def _keep_from(self) -> int:
        return max(1, self._build_from // 2)


BUILD_MEMORY = "256MB"
"""`maintenance_work_mem` for a build: an HNSW graph built outside it is built much slower, and
100,000 vectors of 384 dimensions with their neighbour lists take about 200 MB."""

REFRESH_LOCK = 0x6D6E656D655F6F69 & 0x7FFF_FFFF_FFFF_FFFF
"""The advisory lock one refresh at a time holds (any number that no other lock uses)."""

REFRESH_LOCK_RETRY_SECONDS = 0.5
"""How often a refresh waiting for another's to end asks for the lock again."""

TRY_REFRESH_LOCK_SQL = text("SELECT pg_try_advisory_lock(:key)")


async def _take_refresh_lock(autocommit: AsyncConnection) -> None:
    """`REFRESH_LOCK` for this session, once no other refresh holds it: asked for again and
    again, never waited for inside a statement.

    A statement waiting for a lock keeps its snapshot for as long as it waits, and the refresh
    that holds the lock builds and drops indexes concurrently, which waits for every
    transaction with an older snapshot to end: the two would wait for each other until
    PostgreSQL ended one of them as a deadlock (two processes starting together, or `mneme
    owner-indexes refresh` while a server refreshes). Between two tries this connection has
    no transaction open."""
    while True:
        taken = await autocommit.execute(TRY_REFRESH_LOCK_SQL, {"key": REFRESH_LOCK})
        if taken.scalar_one():
            return
        await asyncio.sleep(REFRESH_LOCK_RETRY_SECONDS)


async def indexed_columns(engine: AsyncEngine) -> list[VectorColumn]:
    """The columns whose owners get indexes of their own: the live one, and during a change of
    model the one being filled once its fill reached the end (it is then all but full, and its
    tenants switch to it from then on)."""
    state = await load_state(engine)
    live = state.column("live")
    if live is None:
        raise OwnerIndexesRefused("no vector column is live")
    columns = [VectorColumn(live.name, live.model or "", live.dims)]
    filling = state.column("filling")
    if filling is not None and filling.filled:
        columns.append(VectorColumn(filling.name, filling.model or "", filling.dims))
    return columns


async def _require_owner(connection: AsyncConnection) -> None:
    if not await sees_all_tenants(connection):
        raise OwnerIndexesRefused(
            "the owner role cannot bypass row-level security, so it cannot read every "
            "tenant's statistics; grant it BYPASSRLS or use a superuser URL"
        )


async def _build(
    autocommit: AsyncConnection,
    index: OwnerIndex,
    ef_construction: int,
    *,
    replace: bool = False,
) -> None:
    """The owner's index, concurrently (writes go on); with `replace`, beside the one it
    replaces."""
    condition = (
        await autocommit.execute(
            OWNER_CONDITION_SQL,
            {
                "tenant_id": index.tenant_id,
                "scope": index.owner.scope,
                "user_id": index.owner.user_id,
                "kind": index.kind,
            },
        )
    ).scalar_one()
    create = replace_index_concurrently if replace else create_index_concurrently
    definition = hnsw_definition(index.column, ef_construction)
    await create(autocommit, index.name, f"{definition} {condition}")
    verb = "rebuilt" if replace else "built"
    logger.info(
        "%s %s for the %s memories of %s of tenant %s",
        verb,
        index.name,
        index.kind,
        index.owner.key,
        index.tenant_id,
    )


async def keep_owner_indexes(indexes: OwnerIndexes, every_seconds: float) -> None:
    """`refresh` as the process starts, then every `every_seconds` and when asked to
    (`refresh_soon`), for as long as the process runs. A failed refresh is logged and tried
    again at the next turn; a connection that cannot maintain the indexes stops the loop
    (nothing would change by trying again).

    The first turn is at once: an owner may have outgrown the threshold while no process kept
    the indexes (all stopped, or the one asked to build them stopped first), and a process
    learns of an owner's growth from the recounts it runs itself. Waiting a turn, that owner's
    vectors would be sorted exactly for its first ten minutes. Processes that start together
    refresh one after another (the refresh's lock), the later ones finding nothing to do."""
    while True:
        try:
            report = await indexes.refresh()
        except OwnerIndexesRefused as refused:
            logger.warning("owner vector indexes are not maintained: %s", refused)
            return
        except Exception:
            # Cancelled mid-statement (the process stopping), the driver may raise its own
            # error instead of the cancellation: the loop must end then, not wait for its next
            # turn (a shutdown waits for it).
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                return
            logger.exception("refreshing the owner vector indexes failed; trying again later")
        else:
            if report.built or report.rebuilt or report.dropped or report.retired:
                logger.info("owner vector indexes: %s", "; ".join(report.lines()))
        await indexes.until_due(every_seconds)
