"""Runs the fusion statement: what a search asks about its owners first (how large, which
vector indexes of their own), the planner setting it runs under (a generic plan, or one made
for a large owner), `FusionRepository` on the transaction's driver connection, and what a
search learns from its own result (whose statistics are due).

A search overlaps the question about its owners and the planner setting with the embedding of
its question: `FusionRepository.planned()` asks and makes the setting, and the caller awaits
the question's vector inside it.
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
from service.db import (
    Driver,
    ScopedBeginConnection,
    distributes_queries,
    fetch_search,
    owner_walk_list,
    transaction_driver,
)
from service.kit.repository import TenantRepository
from service.memories.fusion.parameters import SearchParams
from service.memories.fusion.statement import (
    compiled_search,
    owner_documents_of,
    owner_indexes_of,
    owners_searched,
)
from service.memories.postings import StatisticsRequests
from service.memories.schemas import ComponentScores, MemoryRead
from service.memories.vector_columns import VectorColumn


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
    def final_score(self) -> float:
        """The score the statement ranked it by (`scores.final_score`), without building them."""
        return float(self.record["final_score"])

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


INDEX_SCAN_AS_CONFIGURED_SQL = "SET LOCAL hnsw.ef_search TO DEFAULT"
"""The HNSW candidate list as the connection was configured (`MNEME_HNSW_EF_SEARCH`)."""

GENERIC_PLAN_SETTINGS: Mapping[str, str] = {
    "plan_cache_mode": "force_generic_plan",
    "max_parallel_workers_per_gather": "0",
}
GENERIC_SEARCH_PLAN_SQL = "; ".join(
    f"SET LOCAL {name} = {value}" for name, value in GENERIC_PLAN_SETTINGS.items()
)
"""Run the fusion statement on its generic plan (planned once per connection and filter shape),
without parallel workers.

Left to choose (`auto`), PostgreSQL replans the statement for every search: its plan for the
actual owner is always estimated cheaper than the plan for any owner, so it never switches. For
this 7 KB statement that planning cost as much as executing it (4 to 5 ms of a ~10 ms statement
at 100k memories). The generic plan also makes the result depend on the parameters alone: a
custom plan may read an owner's nearest memories from its own HNSW index (approximate) where the
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

    Before its statement a search asks what its owners are (`OWNERS_SEARCHED_SQL`, in the
    round trip that makes the planner setting): how many memories each holds, and which vector
    indexes of their own they have. The generic plan, made for any owner, sorts the owner's
    vectors exactly, which is what the many small owners need (and needs no planning per
    search). An owner with a vector index of its own (`service.memories.owner_indexes`) is
    written into the statement's text
    (`compiled_search`'s `written_owners`), which lets the planner see that the index's
    condition holds on the generic plan of that text, made once per connection and owner, and
    plans its other reads knowing the owner too: a generic plan made for an average owner reads
    a large one's filtered memories through the index of its newest, testing each of them.

    Asked of the database for every search rather than remembered by the process from earlier
    results, it is right on a process's first search of an owner, after a pause of any length,
    for a search that finds nothing, and on every replica alike.

    Where the server makes no generic plans it distributes queries (Citus: `runs_generic_plans`):
    there the owners' counts and their indexes are two queries (`OWNERS_SEARCHED_SQL`), and the
    plan is the server's own for each statement."""

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
        self._found: OwnersFound | None = None

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
        found = await self.owners_found(
            [owner for params in sections for owner in params.filter.owners],
            sections[0].vector_column,
        )
        own = [found.reads_own_indexes(params) for params in sections]
        await self._plan_for(_plan_of(sections, own) if self._generic_plan else GENERIC_PLAN)
        # The statement sorts the nearest vectors exactly (see `_search_template`), but for the
        # owners written into its text, whose own indexes it reads. A server that makes no
        # generic plans (Citus) gets them written in too: their indexes are per kind, and a
        # scan over every kind can read them only split by kind, as the written text is.
        written = {
            index: found.own_indexes_of(params)
            for index, (params, reads_own) in enumerate(zip(sections, own, strict=True))
            if reads_own
        }
        compiled, arguments = compiled_search(
            self._tenant_id, sections, self._dialect, written_owners=written
        )
        hits: list[list[SearchRow]] = [[] for _ in sections]
        due: set[Owner] = set()
        # Kept apart from the driver's cache, on a bounded shelf of its kind: a text with owners
        # written in is one of a text per large owner, any other one of a text per filter
        # shape; however many there are, a connection holds a bounded number of their plans,
        # and the large owners' never push out the texts every other search shares.
        rows = await fetch_search(
            self._driver, compiled.sql, *arguments, owners_written=bool(written)
        )
        for row in rows:
            section = row["section"]
            if not hits[section] and statistics_due(
                sections[section], row["section_documents"], row["statistics_age"]
            ):
                due.update(sections[section].filter.owners)
            hits[section].append(_search_row(row))
        if due and self._statistics is not None:
            self._statistics.ask(due)
        return hits

    async def owners_found(self, owners: Iterable[Owner], column: VectorColumn) -> OwnersFound:
        """What a search of `owners` (one user at most, and the organization) finds about them
        before its statement (`OWNERS_SEARCHED_SQL`, about the user and the organization
        whatever the search reads), asked once per block for the column it reads; where the
        server runs generic plans and no setting was made yet, the same query makes the
        generic plan's."""
        users = {owner for owner in owners if not owner.is_org}
        if len(users) > 1:
            raise ValueError("a search reads the memories of one user at most")
        user = next(iter(users), None)
        if self._found is not None and self._found.answers(user, column):
            return self._found
        if self._generic_plan:
            setting = GENERIC_PLAN_SETTINGS if self._plan is None else None
            compiled, arguments = owners_searched(
                self._tenant_id, user, column, self._dialect, setting
            )
            [row] = await self._driver.fetch(compiled.sql, *arguments)
            if setting is not None:
                self._plan = GENERIC_PLAN
            documents = dict(row["documents"] or ())
            own_indexes = row["owner_indexes"]
        else:
            documents_sql, documents_arguments = owner_documents_of(
                self._tenant_id, user, self._dialect
            )
            indexes_sql, indexes_arguments = owner_indexes_of(
                self._tenant_id, user, column, self._dialect
            )
            counted = await self._driver.fetch(documents_sql.sql, *documents_arguments)
            documents = {row["owner_key"]: row["documents"] for row in counted}
            own_indexes = await self._driver.fetchval(indexes_sql.sql, *indexes_arguments)
        self._found = OwnersFound(user, column, documents, frozenset(own_indexes or ()))
        return self._found

    async def _plan_for(self, plan: Plan) -> None:
        """Make the connection plan the next statement as `plan` says; a setting is sent only
        when it changes, and `FusionRepository.planned()` restores the configured ones when the
        block ends."""
        if plan == self._plan:
            return
        await self._driver.execute(plan.settings_sql())
        self._plan = plan


@dataclass(frozen=True)
class OwnersFound:
    """What the owners a search of `user` may read (the user, None for none, and the
    organization) are, as `OWNERS_SEARCHED_SQL` found them for the vector column `column`: how
    many memories each holds as their statistics last counted them (`documents`, by owner key;
    an owner not counted holds too few to matter), and their vector indexes of their own
    (`kind:owner key`)."""

    user: Owner | None
    column: VectorColumn
    documents: Mapping[str, int]
    own_indexes: frozenset[str]

    def answers(self, user: Owner | None, column: VectorColumn) -> bool:
        """Whether it answers for a search of `user` (None: the organization alone) reading
        `column`."""
        return column == self.column and user in (None, self.user)

    def own_indexes_of(self, params: SearchParams) -> frozenset[str]:
        """The indexes of their own of the owners `params` searches."""
        keys = {owner.key for owner in params.filter.owners}
        return frozenset(unit for unit in self.own_indexes if unit.partition(":")[2] in keys)

    def reads_own_indexes(self, params: SearchParams) -> bool:
        """Whether the search `params` reads its owners' nearest vectors from indexes of their
        own (otherwise: an exact sort of their vectors)."""
        return bool(self.own_indexes_of(params))


@dataclass(frozen=True)
class Plan:
    """How the fusion statement is planned: once for its text (its generic plan), with the
    HNSW candidate list `ef_search` (None: as configured)."""

    ef_search: int | None

    def settings_sql(self) -> str:
        if self.ef_search is None:
            return f"{GENERIC_SEARCH_PLAN_SQL}; {INDEX_SCAN_AS_CONFIGURED_SQL}"
        return f"{GENERIC_SEARCH_PLAN_SQL}; SET LOCAL hnsw.ef_search = {self.ef_search:d}"


GENERIC_PLAN = Plan(ef_search=None)
"""The plan of the many small owners: made once per connection and filter shape."""


def _plan_of(sections: Sequence[SearchParams], reads_own: Iterable[bool]) -> Plan:
    """The plan for sections each of which reads its owners' own indexes or not
    (`OwnersFound.reads_own_indexes` each). Owners with indexes of their own are written
    into the statement's text (`compiled_search`'s `written_owners`), so its generic plan,
    made once per connection and owner, reads their indexes: planning the ~15 KiB statement
    for every search cost 7 to 10 ms, more than the rest of a search of 100k memories. Their
    walks keep a candidate list of at least twice the most vector candidates a section asks
    for (`SearchParams.owner_index_ef_search` is the least)."""
    if any(reads_own):
        most = max(section.vector_candidates for section in sections)
        return Plan(ef_search=owner_walk_list(sections[0].owner_index_ef_search, most))
    return GENERIC_PLAN


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
    async def planned(
        self, *, ahead: tuple[Sequence[Owner], VectorColumn] | None = None
    ) -> AsyncIterator[PlannedSearch]:
        """The fusion statements run inside run on their generic plan
        (`GENERIC_SEARCH_PLAN_SQL`), where the server runs one; afterwards the transaction plans
        as configured again (from its next statement on, if there is one:
        `ScopedBeginConnection.restore_before_next_statement`).

        Enter it before awaiting a question's vector still on its way, naming the owners the
        search reads and the vector column it reads (`ahead`): what they are
        (`PlannedSearch.owners_found`) is asked, and the generic plan's setting made, in a round
        trip that overlaps the embedding instead of following it. Otherwise that round trip
        goes with the search, and an owner searched through an index of its own or the table's
        needs a setting of its own besides."""
        connection = await self._session.connection()
        driver = await transaction_driver(connection)
        generic_plan = await runs_generic_plans(driver)
        planned = PlannedSearch(
            driver,
            self._tenant_id,
            connection.dialect,
            generic_plan=generic_plan,
            statistics=self._statistics,
            plan_made=False,
        )
        if ahead is not None:
            await planned.owners_found(*ahead)
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
        async with self.planned() as planned:
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
