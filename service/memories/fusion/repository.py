"""Runs the fusion statement: the planner setting it runs under (a generic plan, or one made
for a large owner), `FusionRepository` on the transaction's driver connection, and what a
search learns from its own result (which owners are large, whose statistics are due).

A search overlaps the planner setting with the embedding of its question:
`FusionRepository.planned()` makes the setting, and the caller awaits the question's vector
inside it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property
from typing import Any

import numpy as np
from pgvector import Vector
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncSession

from service.auth.owner import Owner
from service.db import Driver, ScopedBeginConnection, distributes_queries, transaction_driver
from service.kit.expiring import ExpiringKeys, ExpiringValues
from service.kit.repository import TenantRepository
from service.memories.fusion.parameters import SearchParams
from service.memories.fusion.statement import compiled_search, owner_indexes_of
from service.memories.postings import StatisticsRequests
from service.memories.schemas import ComponentScores, MemoryRead


@dataclass(frozen=True)
class SearchRow:
    """One hit as the fusion statement returns it: the statement's row, its vector (only when
    asked for, for MMR), and from them the memory and why it ranked.

    The memory and its scores are built from the row when first read: a search that picks
    among more candidates than it returns (MMR picks a context section's 4 of 12) validates
    only the hits it keeps, ~20 µs a row."""

    record: Mapping[str, Any]
    embedding: np.ndarray | None
    bounded: bool = False
    """Whether its section's lexical side read the owners' postings (`BOUNDED_MATCHES_SQL`)
    rather than testing every memory."""

    @property
    def id(self) -> uuid.UUID:
        memory_id: uuid.UUID = self.record["id"]
        return memory_id

    @property
    def vector_cosine(self) -> float | None:
        cosine: float | None = self.record["vector_cosine"]
        return cosine

    @cached_property
    def memory(self) -> MemoryRead:
        return MemoryRead.model_validate(dict(self.record.items()))

    @cached_property
    def scores(self) -> ComponentScores:
        row = self.record
        return ComponentScores(
            lexical_rank=row["lexical_rank"],
            lexical_score=row["lexical_score"],
            vector_rank=row["vector_rank"],
            vector_cosine=row["vector_cosine"],
            fused_score=float(row["fused_score"]),
            neighbour_score=float(row["neighbour_score"]),
            thread_score=float(row["thread_score"]),
            speaker_score=float(row["speaker_score"]),
            date_score=float(row["date_score"]),
            recency_factor=float(row["recency_factor"]),
            confidence_factor=float(row["confidence_factor"]),
            final_score=float(row["final_score"]),
        )


SHARED_INDEX_EF_SEARCH = 1000
"""The HNSW candidate list for an owner searched through the whole table's index: the
index's nearest first are the whole vector side of such a search, not a shortcut beside an
exact sort, so its recall is the search's, and the graph it walks is mostly other owners'."""


def custom_search_plan_sql(ef_search: int) -> str:
    """Plan the fusion statement for the search at hand, for owners whose vectors are best
    read from the whole table's HNSW index (see `PlannedSearch`), with the candidate list
    `ef_search` (`SHARED_INDEX_EF_SEARCH`, wider than the configured one)."""
    return (
        "SET LOCAL plan_cache_mode = force_custom_plan; "
        f"SET LOCAL max_parallel_workers_per_gather = 0; SET LOCAL hnsw.ef_search = {ef_search:d}"
    )


INDEX_SCAN_AS_CONFIGURED_SQL = "SET LOCAL hnsw.ef_search TO DEFAULT"
"""The HNSW candidate list as the connection was configured (`MNEME_HNSW_EF_SEARCH`)."""

GENERIC_SEARCH_PLAN_SQL = (
    "SET LOCAL plan_cache_mode = force_generic_plan; SET LOCAL max_parallel_workers_per_gather = 0"
)
"""Run the fusion statement on its generic plan (planned once per connection and filter shape),
without parallel workers.

Left to choose (`auto`), PostgreSQL replans the statement for every search: its plan for the
actual owner is always estimated cheaper than the plan for any owner, so it never switches. For
this 7 KB statement that planning cost as much as executing it (4 to 5 ms of a ~10 ms statement
at 100k memories). The generic plan also makes the result depend on the parameters alone: a
custom plan may read an owner's nearest memories from the HNSW index (approximate) where the
generic one sorts the owner's memories by their exact distance, so under `auto` two pooled
connections holding different plans could return different top 10s for the same question.

Parallel workers: the statement holds an exact branch and a bounded one for each section, and
only one of them runs for a given owner. Planned for any owner, the exact branch's scans over
an owner's memories may get a parallel plan, whose workers start (~10 ms on two cores) even
when the branch's one-time filter then says it does not run. A search is one request among
many: it gains nothing from taking more cores."""

DEFAULT_PLAN_CHOICE_SQL = (
    "SET LOCAL plan_cache_mode TO DEFAULT; SET LOCAL max_parallel_workers_per_gather TO DEFAULT; "
    + INDEX_SCAN_AS_CONFIGURED_SQL
)
"""The rest of the transaction plans as the server is configured to."""


async def runs_generic_plans(driver: Driver) -> bool:
    """Whether the server behind `driver` can run the fusion statement on a generic plan (asked
    once per connection: `service.db.distributes_queries`). Citus cannot: it refuses to
    distribute the statement with its parameters unbound ("could not create distributed plan"),
    and makes PostgreSQL choose custom plans for it by itself."""
    return not await distributes_queries(driver)


class PlannedSearch:
    """The fusion statement's runner inside `FusionRepository.planned()`: the planner setting
    is made, and every search runs on the transaction's driver connection.

    An owner whose memories are a large part of the table (`owner_stats.indexed_vectors`) is
    searched on a plan made for it (`custom_search_plan_sql`): planned knowing whose memories
    it reads, PostgreSQL reads their nearest vectors from the HNSW index, in a number of steps
    that follows the owner's share of the table, not its size. The generic plan, made for any
    owner, sorts the owner's vectors exactly, which is cheaper for the many small owners (and
    needs no planning per search). An owner with a vector index of its own
    (`service.memories.owner_indexes`) is written into the statement's text where its vectors are
    read (`compiled_search`'s `written_owners`), which lets the planner see that the index's
    condition holds on the generic plan of that text, made once per connection and owner. Which
    owners are large is learnt from the searches' own results (`indexed_owners`): the first
    search of a large owner in a process runs on the generic plan of any owner.

    Where the server makes no generic plans it distributes queries (Citus: `runs_generic_plans`):
    there the owners' own indexes are looked up before the statement and bound into it, which
    then reads no catalog table and goes to the tenant's shard whole (see `OWNER_STATS_SQL`)."""

    def __init__(
        self,
        driver: Driver,
        tenant_id: str,
        dialect: Dialect,
        *,
        generic_plan: bool,
        statistics: StatisticsRequests | None,
        plan_made: bool = True,
    ) -> None:
        self._driver = driver
        self._tenant_id = tenant_id
        self._dialect = dialect
        self._generic_plan = generic_plan
        self._statistics = statistics
        # Where the server makes no generic plans (Citus) no setting is ever made: the server
        # plans each statement itself.
        self._plan: Plan | None = GENERIC_PLAN if plan_made or not generic_plan else None
        """The plan the connection is set to make for the next statement (None: none set yet,
        `GENERIC_SEARCH_PLAN_SQL` not sent)."""

    @property
    def plan_made(self) -> bool:
        """Whether a plan setting was made for the statements (and is to be restored)."""
        return self._plan is not None

    async def search(self, params: SearchParams) -> list[SearchRow]:
        return (await self.search_sections([params]))[0]

    async def search_sections(self, sections: Sequence[SearchParams]) -> list[list[SearchRow]]:
        """Several searches in one statement (see `sectioned_search_statement`): each one's
        hits, best first, in the order of `sections`."""
        # Compiled once per filter shape (see `compiled_search`), and run straight on the
        # driver: SQLAlchemy's execution layer cost ~1 ms of CPU a search, a third of the
        # request's own database work in Python (docs/benchmarks.md).
        owners = [_owner_keys(self._tenant_id, params) for params in sections]
        indexes = [indexed_owners.index_of(keys) for keys in owners]
        plan = _plan_of(sections[0], indexes) if self._generic_plan else GENERIC_PLAN
        await self._plan_for(plan)
        # The statement sorts the nearest vectors exactly (see `_search_template`), but for the
        # owners written into its text, whose own indexes it reads, and the sections of owners
        # known to have an index to read that are not written in: a large enough share of the
        # table to read its index, or, on a plan made for the search, owners with indexes of
        # their own. A server that makes no generic plans (Citus) gets the owners with indexes
        # of their own written in too: their indexes are per kind, and a scan over every kind
        # can read them only split by kind, as the written text is.
        written = {
            index: indexed_owners.own_indexes(owners[index])
            for index, found in enumerate(indexes)
            if not plan.custom and found == OWN_INDEX
        }
        compiled, arguments = compiled_search(
            self._tenant_id,
            sections,
            self._dialect,
            written_owners=written,
            vector_index_sections={
                index
                for index, found in enumerate(indexes)
                if found is not None and index not in written
            },
            owner_indexes=None if self._generic_plan else await self._own_indexes(sections),
        )
        hits: list[list[SearchRow]] = [[] for _ in sections]
        due: set[Owner] = set()
        for row in await self._driver.fetch(compiled.sql, *arguments):
            section = row["section"]
            if not hits[section]:
                own_indexes = frozenset(row["owner_indexes"] or ())
                indexed_owners.learn(
                    owners[section],
                    OWN_INDEX if own_indexes else SHARED_INDEX if row["indexed_vectors"] else None,
                    own_indexes,
                )
                if statistics_due(
                    sections[section], row["section_documents"], row["statistics_age"]
                ):
                    due.update(sections[section].filter.owners)
            hits[section].append(_search_row(row))
        if due and self._statistics is not None:
            self._statistics.ask(due)
        return hits

    async def _own_indexes(self, sections: Sequence[SearchParams]) -> dict[int, set[str]]:
        """Each section's owners' own indexes (`kind:owner key`), looked up in one query of the
        catalog before the statement, for a server that distributes queries."""
        keys = sorted({owner.key for params in sections for owner in params.filter.owners})
        compiled, arguments = owner_indexes_of(
            self._tenant_id, keys, sections[0].vector_column, self._dialect
        )
        found: list[str] = await self._driver.fetchval(compiled.sql, *arguments) or []
        owners_of = [{owner.key for owner in params.filter.owners} for params in sections]
        return {
            index: {unit for unit in found if unit.partition(":")[2] in owners}
            for index, owners in enumerate(owners_of)
        }

    async def _plan_for(self, plan: Plan) -> None:
        """Make the connection plan the next statement as `plan` says; a setting is sent only
        when it changes, and `FusionRepository.planned()` restores the configured ones when the
        block ends."""
        if plan == self._plan:
            return
        await self._driver.execute(plan.settings_sql())
        self._plan = plan


@dataclass(frozen=True)
class Plan:
    """How the fusion statement is planned: for the search at hand (`custom`) or once for its
    text (generic), with the HNSW candidate list `ef_search` (None: as configured)."""

    custom: bool
    ef_search: int | None

    def settings_sql(self) -> str:
        # An owner's own index holds only its vectors: its setting's narrower list finds the
        # same nearest as the whole table's index needs the wider one for.
        if self.custom:
            return custom_search_plan_sql(self.ef_search or SHARED_INDEX_EF_SEARCH)
        if self.ef_search is None:
            return f"{GENERIC_SEARCH_PLAN_SQL}; {INDEX_SCAN_AS_CONFIGURED_SQL}"
        return f"{GENERIC_SEARCH_PLAN_SQL}; SET LOCAL hnsw.ef_search = {self.ef_search:d}"


GENERIC_PLAN = Plan(custom=False, ef_search=None)
"""The plan of the many small owners: made once per connection and filter shape."""


OWN_INDEX = "own"
"""An owner searched through a vector index of its own."""
SHARED_INDEX = "shared"
"""An owner large enough a share of the table to be searched through the table's index."""


def _plan_of(params: SearchParams, indexes: Iterable[str | None]) -> Plan:
    """The plan for sections whose owners are searched through `indexes`
    (`IndexedOwners.index_of` each). An owner read through the whole table's index needs a plan
    made for it, and the wider candidate list. Owners with indexes of their own are written
    into the statement's text (`compiled_search`'s `written_owners`), so its generic plan,
    made once per connection and owner, reads their indexes: planning the ~15 KiB statement
    for every search cost 7 to 10 ms, more than the rest of a search of 100k memories."""
    found = set(indexes)
    if SHARED_INDEX in found:
        return Plan(custom=True, ef_search=SHARED_INDEX_EF_SEARCH)
    if OWN_INDEX in found:
        return Plan(custom=False, ef_search=params.owner_index_ef_search)
    return GENERIC_PLAN


def _owner_keys(tenant_id: str, params: SearchParams) -> tuple[str, ...]:
    return (tenant_id, *sorted(owner.key for owner in params.filter.owners))


class IndexedOwners:
    """The owners (a search's tenant and owner keys) whose latest search reported an index to
    read their vectors from (`OWN_INDEX` or `SHARED_INDEX`), for `INDEXED_OWNERS_TTL`, with
    the indexes of their own it found (`kind:owner key` each, `OWNER_STATS_SQL`). In process
    memory: a process that has not seen an owner yet plans its first search generically, which
    costs time, never results."""

    def __init__(self, ttl: timedelta, kept: int) -> None:
        self._own: ExpiringValues[tuple[str, ...], frozenset[str]] = ExpiringValues(ttl, kept)
        self._shared: ExpiringKeys[tuple[str, ...]] = ExpiringKeys(ttl, kept)

    def holds(self, owners: tuple[str, ...]) -> bool:
        return self.index_of(owners) is not None

    def index_of(self, owners: tuple[str, ...]) -> str | None:
        if self._own.get(owners) is not None:
            return OWN_INDEX
        if owners in self._shared:
            return SHARED_INDEX
        return None

    def own_indexes(self, owners: tuple[str, ...]) -> frozenset[str]:
        """The owners' own indexes as their latest search found them (`kind:owner key`)."""
        return self._own.get(owners) or frozenset()

    def learn(
        self, owners: tuple[str, ...], index: str | None, own_indexes: frozenset[str] = frozenset()
    ) -> None:
        if index == OWN_INDEX:
            self._own.put(owners, own_indexes)
        else:
            self._own.discard(owners)
        if index == SHARED_INDEX:
            self._shared.add(owners)
        else:
            self._shared.discard(owners)


INDEXED_OWNERS_TTL = timedelta(minutes=5)
indexed_owners = IndexedOwners(INDEXED_OWNERS_TTL, kept=10_000)
"""The process's large owners (see `PlannedSearch`)."""


STATISTICS_MAX_AGE = timedelta(minutes=10)
"""How old a bounded search lets its owners' statistics get before it asks for a recount:
the collection's size and its common lexemes' counts move slowly (a rare lexeme is counted at
search time), so minutes of drift change the ranking little."""


def statistics_due(params: SearchParams, documents: int | None, age: float | None) -> bool:
    """Whether a section's search should have its owners' statistics recounted: it ran exactly
    over enough memories to be bounded (the statistics are missing or short), or it ran
    bounded on statistics older than `STATISTICS_MAX_AGE`."""
    if age is not None:
        return age > STATISTICS_MAX_AGE.total_seconds()
    return documents is not None and documents >= params.bounded_from


class FusionRepository(TenantRepository):
    """Runs the fusion statement in the request's tenant-scoped transaction. With `statistics`,
    a search that finds its owners' statistics missing or old asks for a recount through it."""

    def __init__(
        self, session: AsyncSession, tenant_id: str, statistics: StatisticsRequests | None = None
    ) -> None:
        super().__init__(session, tenant_id)
        self._statistics = statistics

    @asynccontextmanager
    async def planned(self, *, ahead: bool = True) -> AsyncIterator[PlannedSearch]:
        """The fusion statements run inside run on their generic plan
        (`GENERIC_SEARCH_PLAN_SQL`), where the server runs one; afterwards the transaction plans
        as configured again (from its next statement on, if there is one:
        `ScopedBeginConnection.restore_before_next_statement`).

        Enter it before awaiting a question's vector still on its way (`ahead`): the setting's
        round trip then overlaps the embedding instead of following it. With the vector in
        hand (`ahead=False`) there is nothing to overlap: the setting goes with the plan the
        search needs, in one query (an owner searched through an index of its own or the
        table's needs a setting of its own besides the generic plan's). The settings go as
        simple queries: nothing to prepare, one round trip each."""
        connection = await self._session.connection()
        driver = await transaction_driver(connection)
        generic_plan = await runs_generic_plans(driver)
        if generic_plan and ahead:
            await driver.execute(GENERIC_SEARCH_PLAN_SQL)
        planned = PlannedSearch(
            driver,
            self._tenant_id,
            connection.dialect,
            generic_plan=generic_plan,
            statistics=self._statistics,
            plan_made=ahead,
        )
        yield planned
        # Not after a failed statement: the transaction is aborted, and ends with the setting.
        if generic_plan and planned.plan_made:
            if isinstance(driver, ScopedBeginConnection):
                # Sent only if the transaction goes on: a request's search is usually its last
                # statement before COMMIT, which ends the settings anyway.
                driver.restore_before_next_statement(DEFAULT_PLAN_CHOICE_SQL)
            else:
                await driver.execute(DEFAULT_PLAN_CHOICE_SQL)

    async def search(self, params: SearchParams) -> list[SearchRow]:
        """`PlannedSearch.search` under a planner setting of its own."""
        return (await self.search_sections([params]))[0]

    async def search_sections(self, sections: Sequence[SearchParams]) -> list[list[SearchRow]]:
        """`PlannedSearch.search_sections` under a planner setting of its own (the vectors
        are in hand: it goes with the statement's plan)."""
        async with self.planned(ahead=False) as planned:
            return await planned.search_sections(sections)


def _search_row(row: Mapping[str, Any]) -> SearchRow:
    return SearchRow(
        record=row,
        embedding=hit_vector(row["embedding"]),
        bounded=row["statistics_age"] is not None,
    )


def hit_vector(sent: bytes | None) -> np.ndarray | None:
    """A hit's vector as the statement sends it (pgvector's binary form, `vector_send`), as
    float32 values; None for a hit the statement sent none for."""
    return None if sent is None else Vector.from_binary(sent).to_numpy()
