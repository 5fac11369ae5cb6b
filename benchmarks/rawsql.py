"""The service's fusion statement run straight through asyncpg: the load benchmark's baseline,
and its recall probe.

Nothing here restates the SQL or the parameters. The statement is the service's own
(`service.memories.fusion`), compiled by the runtime engine's dialect, so the text Postgres
prepares is byte for byte what the service sends; the parameters are what `MemorySearch.params`
builds for a request.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession
from sqlalchemy.sql.elements import ClauseElement

from service.auth.owner import Owner
from service.config import Settings
from service.db import DriverStatement, set_tenant_sql
from service.memories.fusion import (
    GENERIC_SEARCH_PLAN_SQL,
    FusionRepository,
    PlannedSearch,
    SearchParams,
    hybrid_search_statement,
    runs_generic_plans,
)
from service.memories.schemas import SearchRequest
from service.memories.search import MemorySearch
from service.memories.vector_columns import VectorColumns


async def asyncpg_connection(connection: AsyncConnection) -> Any:
    """The asyncpg connection under a SQLAlchemy one, with the engine's server settings."""
    driver = (await connection.get_raw_connection()).driver_connection
    if driver is None:
        raise RuntimeError("the connection has no asyncpg connection under it")
    return driver


class _PrecomputedEmbedder:
    """Answers `embed_query` with a vector computed beforehand."""

    def __init__(self, vector: list[float], model_name: str) -> None:
        self._vector = vector
        self.model_name = model_name
        self.dims = len(vector)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._vector for _ in texts]

    async def embed_query(self, text: str) -> list[float]:
        return self._vector

    async def aclose(self) -> None:
        """Nothing to release."""


async def service_search_params(
    settings: Settings,
    tenant_id: str,
    user_id: str,
    request: SearchRequest,
    query_embedding: list[float],
) -> SearchParams:
    """The fusion statement's parameters for `request`, exactly as the service builds them."""
    search = MemorySearch(
        FusionRepository(AsyncSession(), tenant_id),
        VectorColumns(_PrecomputedEmbedder(query_embedding, "precomputed")),
        tenant_id,
        settings,
    )
    return search.params(Owner.user(user_id), request, query_embedding)


# Makes a ranking statement for one search's parameters (`hybrid_search_statement` and alike).
StatementBuilder = Callable[[str, SearchParams], ClauseElement]


@dataclass(frozen=True)
class PlanSummary:
    """Which scans a plan uses, and what it cost when run once."""

    scans: tuple[str, ...]
    execution_ms: float | None

    def uses(self, index: str) -> bool:
        return any(index in scan for scan in self.scans)


def _scans(node: Mapping[str, Any], found: list[str]) -> None:
    node_type = str(node.get("Node Type", ""))
    if "Scan" in node_type:
        target = node.get("Index Name") or node.get("Relation Name") or ""
        entry = f"{node_type} {target}".strip()
        if entry not in found:
            found.append(entry)
    for child in node.get("Plans", ()):
        _scans(child, found)


@dataclass(frozen=True)
class Variant:
    """The statement run with some planner settings changed for its transaction."""

    name: str
    settings: tuple[str, ...]


AS_PLANNED = Variant("as planned", ())
"""The statement exactly as the service runs it: the planner chooses."""
EXACT = Variant("exact", ("SET LOCAL enable_indexscan = off",))
"""HNSW answers only index scans, so this sorts the filtered rows by their true distance, the
vectors of an owner with indexes of its own too."""


async def explain_prepared(connection: Any, sql: str, arguments: Sequence[Any]) -> Any:
    """EXPLAIN ANALYZE of `sql` as a prepared statement runs it. EXPLAIN of the text itself
    plans it for the values bound (a custom plan) and EXECUTE takes no bind parameters, so the
    statement is PREPAREd, run once (which makes and caches its plan), and EXPLAINed through
    EXECUTE with each argument written as a typed literal by the server itself."""
    literals = []
    parameters = (await connection.prepare(sql)).get_parameters()
    for parameter, value in zip(parameters, arguments, strict=True):
        type_name = await connection.fetchval("SELECT format_type($1, NULL)", parameter.oid)
        literal = await connection.fetchval(
            f"SELECT quote_nullable(CAST($1 AS {type_name})::text)", value
        )
        literals.append(f"{literal}::{type_name}")
    # PREPARE outlives a rolled-back transaction: a name of its own each time.
    name = f"mneme_bench_{uuid.uuid4().hex}"
    execute = f"EXECUTE {name}({', '.join(literals)})"
    await connection.execute(f"PREPARE {name} AS {sql}")
    await connection.execute(execute)
    document = await connection.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {execute}")
    await connection.execute(f"DEALLOCATE {name}")
    return document


@asynccontextmanager
async def _as_the_service(
    connection: Any, tenant_id: str, variant: Variant, planned: Sequence[str] = ()
) -> AsyncIterator[bool]:
    """A transaction of `connection` set up as the service runs the statement: the tenant,
    the generic plan where the server runs one (whether it does is what the block gets), the
    settings the service's search made for its owners (`planned`, as `service_statement`
    recorded them), then `variant`'s, last so that they override those (a walk's
    `hnsw.ef_search`, say)."""
    async with connection.transaction():
        await connection.execute(set_tenant_sql(tenant_id))
        generic_plan = await runs_generic_plans(connection)
        if generic_plan:
            await connection.execute(GENERIC_SEARCH_PLAN_SQL)
        for setting in (*planned, *variant.settings):
            await connection.execute(setting)
        yield generic_plan


class RecordingDriver:
    """An asyncpg connection (`service.db.Driver`) that keeps what the service's search sends
    through it: the planner settings (`execute`) and the statement with its values (`fetch`)."""

    def __init__(self, driver: Any) -> None:
        self._driver = driver
        self.settings: list[str] = []
        self.statement: tuple[str, list[Any]] | None = None

    async def execute(self, query: str, *args: Any) -> str:
        self.settings.append(query)
        status: str = await self._driver.execute(query, *args)
        return status

    async def fetch(self, query: str, *args: Any) -> list[Any]:
        self.statement = (query, list(args))
        rows: list[Any] = await self._driver.fetch(query, *args)
        return rows

    async def fetchval(self, query: str, *args: Any) -> Any:
        return await self._driver.fetchval(query, *args)


@dataclass(frozen=True)
class ServiceStatement:
    """The fusion statement one search of the service sends, as its `PlannedSearch` makes it."""

    sql: str
    values: list[Any]
    settings: tuple[str, ...]
    """What the search set before it (the plan made for an owner), after the generic plan."""


async def service_statement(
    driver: Any, dialect: Dialect, tenant_id: str, params: Sequence[SearchParams]
) -> ServiceStatement:
    """The statement the service's own `PlannedSearch` sends for the searches `params` (one
    statement of disjoint sections), on `driver`, in a transaction set up as
    `FusionRepository.planned()` sets it, through a driver that records it: the vector indexes
    of the owners' own written into its text, as the search found them before it, and the plan
    it runs on."""
    generic_plan = await runs_generic_plans(driver)
    recording = RecordingDriver(driver)
    async with driver.transaction():
        await driver.execute(set_tenant_sql(tenant_id))
        if generic_plan:
            await driver.execute(GENERIC_SEARCH_PLAN_SQL)
        search = PlannedSearch(
            recording, tenant_id, dialect, generic_plan=generic_plan, statistics=None
        )
        await search.search_sections(params)
    if recording.statement is None:
        raise RuntimeError("the search sent no statement")
    sql, values = recording.statement
    return ServiceStatement(sql, values, tuple(recording.settings))


class FusionStatement:
    """The fusion statement as asyncpg SQL, with its parameters in positional order.

    The statement's text depends on which filter conditions a search sets; a benchmark runs
    searches of one shape, so the first `arguments()` call fixes `sql`. `build` makes the
    statement for a search's parameters: the service's own by default."""

    def __init__(self, dialect: Dialect, build: StatementBuilder = hybrid_search_statement) -> None:
        self._dialect = dialect
        self._build = build
        self.sql = ""
        self._planned: tuple[str, ...] = ()

    def arguments(self, tenant_id: str, params: SearchParams) -> list[Any]:
        statement = self._build(tenant_id, params)
        compiled = DriverStatement.compile(statement, self._dialect)
        if self.sql and compiled.sql != self.sql:
            raise ValueError("searches of different filter shapes need their own statement")
        self.sql = compiled.sql
        return list(compiled.arguments(statement.compile(dialect=self._dialect).params))

    async def learn(self, driver: Any, tenant_id: str, params: SearchParams) -> list[Any]:
        """The statement the service sends for `params` (`service_statement`: for an owner with
        vector indexes of its own, a text that reads them, and the plan made for it), kept as
        this statement's text and settings; its values, the arguments to run it with. All the
        searches learnt must get the same text (one owner's, one shape)."""
        sent = await service_statement(driver, self._dialect, tenant_id, [params])
        if self.sql and (sent.sql, sent.settings) != (self.sql, self._planned):
            raise ValueError("searches the service plans apart need their own statement")
        self.sql, self._planned = sent.sql, sent.settings
        return sent.values

    def text(self, variant: Variant) -> str:
        """The SQL for `variant`. Variants get their own text, so each is prepared (and gets
        its generic plan) apart from the statement the service runs, under its own settings."""
        if not variant.settings:
            return self.sql
        return f"/* mneme bench: {variant.name} */\n{self.sql}"

    async def ids(
        self,
        connection: Any,
        tenant_id: str,
        arguments: Sequence[Any],
        variant: Variant = AS_PLANNED,
    ) -> list[uuid.UUID]:
        """The statement in a tenant-scoped transaction, as the service runs it (on its generic
        plan where the server runs one); hit ids."""
        async with _as_the_service(connection, tenant_id, variant, self._planned):
            rows = await connection.fetch(self.text(variant), *arguments)
        return [row["id"] for row in rows]

    async def explain(
        self,
        connection: Any,
        tenant_id: str,
        arguments: Sequence[Any],
        variant: Variant = AS_PLANNED,
    ) -> PlanSummary:
        """EXPLAIN ANALYZE of one execution on the plan the service runs (`plan_document`)."""
        plan = await self.plan_document(connection, tenant_id, arguments, variant)
        found: list[str] = []
        _scans(plan["Plan"], found)
        return PlanSummary(tuple(found), plan.get("Execution Time"))

    async def plan_document(
        self,
        connection: Any,
        tenant_id: str,
        arguments: Sequence[Any],
        variant: Variant = AS_PLANNED,
    ) -> dict[str, Any]:
        """EXPLAIN (ANALYZE, FORMAT JSON) of one execution, on the plan the service runs: the
        generic plan where the server runs one, as the service's connections hold it (already
        planned), else a plan for these values."""
        async with _as_the_service(connection, tenant_id, variant, self._planned) as generic_plan:
            if generic_plan:
                document = await explain_prepared(connection, self.text(variant), arguments)
            else:
                document = await connection.fetchval(
                    "EXPLAIN (ANALYZE, FORMAT JSON) " + self.text(variant), *arguments
                )
        plan: dict[str, Any] = (json.loads(document) if isinstance(document, str) else document)[0]
        return plan

    async def plan_counts(self, connection: Any) -> tuple[int, int]:
        """How often this connection ran the prepared statement with a generic / custom plan."""
        row = await connection.fetchrow(
            "SELECT coalesce(sum(generic_plans), 0) AS generic, "
            "coalesce(sum(custom_plans), 0) AS custom "
            "FROM pg_prepared_statements WHERE statement = $1",
            self.sql,
        )
        return int(row["generic"]), int(row["custom"])


async def learnt_arguments(
    runtime_engine: AsyncEngine,
    statement: FusionStatement,
    searches: Sequence[tuple[str, SearchParams]],
) -> list[list[Any]]:
    """`statement.learn` for each search (its tenant and parameters), on one connection of
    `runtime_engine`: the arguments to run the statement the service sends for each."""
    async with runtime_engine.connect() as connection:
        driver = await asyncpg_connection(connection)
        return [await statement.learn(driver, tenant, params) for tenant, params in searches]


NEVER_BOUNDED = 2**31 - 1
"""A `bounded_from` no owner reaches: the statement scores every memory that matches."""


def exact_search_statement(tenant_id: str, params: SearchParams) -> ClauseElement:
    """The service's statement with its bounded lexical path off (`bounded_from` out of reach):
    every memory of the owner that holds a question lexeme is scored, as before the owners'
    postings existed. With index scans off (`EXACT`), its vector side sorts every candidate
    by its true distance too."""
    return hybrid_search_statement(tenant_id, replace(params, bounded_from=NEVER_BOUNDED))


# The rankings a benchmark can take as the truth to measure the service's top 10 against.
REFERENCES: dict[str, str] = {
    "exact": "the service's own statement with its bounded lexical path off and index scans "
    "off: the vector side sorts every candidate by its true distance, the lexical side scores "
    "every matching memory",
    "as-planned": "the service's own statement as the planner runs it (agreement, not truth)",
}


@dataclass(frozen=True)
class ReferenceStatement:
    """A ranking statement and the planner settings it runs under, with its own parameters."""

    name: str
    statement: FusionStatement
    variant: Variant

    def arguments(self, tenant_id: str, params: SearchParams) -> list[Any]:
        return self.statement.arguments(tenant_id, params)

    async def ids(
        self, connection: Any, tenant_id: str, arguments: Sequence[Any]
    ) -> list[uuid.UUID]:
        return await self.statement.ids(connection, tenant_id, arguments, self.variant)


def reference_statement(name: str, dialect: Dialect) -> ReferenceStatement:
    """The statement whose ranking a benchmark's recall is measured against (`REFERENCES`).

    "exact" is the service's statement with its two approximations off: the bounded lexical
    path (`exact_search_statement`) and any HNSW walk of the vectors (index scans off)."""
    if name == "exact":
        return ReferenceStatement(name, FusionStatement(dialect, exact_search_statement), EXACT)
    if name == "as-planned":
        return ReferenceStatement(name, FusionStatement(dialect), AS_PLANNED)
    raise ValueError(f"unknown reference ranking {name!r}; one of {', '.join(REFERENCES)}")
