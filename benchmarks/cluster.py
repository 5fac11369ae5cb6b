"""`mneme bench cluster`: search on a database you point it at (a Citus cluster distributed by
tenant, say) against a throwaway single-node Postgres holding the same corpus, and where the
time goes.

1. One synthetic corpus (the load benchmark's: seeded tenants x users x memories, vectors
   derived from an embedded sentence pool, the same ids) is loaded into both databases through
   the bulk COPY path. After the load the throwaway single node builds the largest owners' own
   vector indexes, as a service process with the owner role does in the background. The given
   database gets no index from the run: nothing of it is built or dropped, the run's tenants
   have a prefix of their own, and they are deleted at the end.
2. The same questions, embedded once, go through the HTTP service (one `mneme serve` per
   database on loopback) and through the bare fusion statement on asyncpg (its tenant-scoped
   transaction: BEGIN, SET LOCAL, statement, COMMIT), in rounds that alternate the databases,
   so both see the same load from the rest of the machine.
3. Each question's hits are compared id for id between the two databases.
4. Where the time goes: EXPLAIN ANALYZE of the fusion statement on each database (on Citus: how
   many shards the coordinator sent it to, on which worker, the shard's plan and time there),
   and a tenant-scoped transaction around a trivial routed query, the per-request floor.
"""

from __future__ import annotations

import os
import platform
import secrets
import statistics
import sys
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from benchmarks.bulk import BulkLoader, BulkSettings, BulkStep, build_owner_graphs
from benchmarks.corpus import Corpus, CorpusShape, build_pool, describe
from benchmarks.database import throwaway_database
from benchmarks.load import (
    SEARCH_LIMIT,
    LevelResult,
    LoadOptions,
    Query,
    SearchBench,
    embed_pool,
    latency_summary,
    postgres_settings,
    sample_search_queries,
)
from benchmarks.rawsql import FusionStatement, asyncpg_connection, service_search_params
from benchmarks.server import loopback_server
from service.config import Settings
from service.db import as_async_url, create_engine, set_tenant_sql
from service.memories.fusion import SearchParams
from service.memories.schemas import SearchRequest
from service.providers import Embedder, build_embedder, embedder_config_from_settings

SINGLE_NODE = "single node"
GIVEN = "given database"
PATHS = ("service", "raw_sql")
# A request list is far shorter than this: rounds end when their requests are done.
ROUND_SECONDS = 600.0
FLOOR_SAMPLES = 200

CITUS_VERSION_SQL = "SELECT extversion FROM pg_extension WHERE extname = 'citus'"
"""The Citus extension's version in the connected database, or no row without Citus."""
ROUTED_FLOOR_SQL = "SELECT count(*) FROM tenant WHERE id = $1"
"""A query that touches one tenant's row and nothing else: on Citus, routed to one shard."""
WORKERS_SQL = "SELECT count(*) FROM pg_dist_node WHERE noderole = 'primary' AND shouldhaveshards"
"""How many Citus nodes hold shards."""
SHARDS_SQL = "SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'memory'::regclass"
"""How many shards the memory table is split into."""
CITUS_MEMORY_BYTES_SQL = "SELECT citus_total_relation_size('memory')"
"""The memory table's shards with their indexes, on every worker, in bytes."""


@dataclass(frozen=True)
class ClusterOptions:
    size: int
    shape: CorpusShape
    pool_size: int = 4096
    vector_noise: float = 0.15
    concurrency: tuple[int, ...] = (1, 8)
    rounds: int = 10
    requests_per_round: int = 40
    queries: int = 200
    explains: int = 20
    load_connections: int = 2
    progress: bool = True

    def load_options(self) -> LoadOptions:
        """The load benchmark's options for the parts of it this run reuses."""
        return LoadOptions(
            sizes=(self.size,),
            shape=self.shape,
            pool_size=self.pool_size,
            vector_noise=self.vector_noise,
            concurrency=self.concurrency,
            requests=self.requests_per_round,
            level_seconds=ROUND_SECONDS,
            queries=self.queries,
            load_connections=self.load_connections,
            progress=self.progress,
        )


@dataclass
class Side:
    """One database: its settings, engines, loader, and what was measured on it."""

    name: str
    settings: Settings
    owner_engine: AsyncEngine
    runtime_engine: AsyncEngine
    loader: BulkLoader
    builds_owner_graphs: bool
    """Whether the run builds the largest owners' own vector indexes after its load (only in
    the throwaway single node)."""
    step: BulkStep | None = None
    citus: str | None = None
    levels: dict[str, dict[int, LevelResult]] = field(default_factory=dict)
    rankings: list[list[str]] = field(default_factory=list)
    statement: FusionStatement = field(init=False)
    """The fusion statement the service sends on this side, with each question's values."""
    arguments: list[list[Any]] = field(default_factory=list)
    explain: dict[str, Any] = field(default_factory=dict)
    floor_ms: list[float] = field(default_factory=list)
    postgres: dict[str, Any] = field(default_factory=dict)
    topology: dict[str, Any] = field(default_factory=dict)


@dataclass
class ClusterRun:
    sides: list[Side]
    queries: list[Query]
    seconds: float
    load_average: dict[str, tuple[float, float, float]]


def _say(options: ClusterOptions, message: str) -> None:
    if options.progress:
        sys.stderr.write(message + "\n")


@asynccontextmanager
async def _side(
    name: str,
    settings: Settings,
    corpus: Corpus,
    pool_vectors: Any,
    options: ClusterOptions,
    embedder: Embedder,
    *,
    builds_owner_graphs: bool,
) -> AsyncIterator[Side]:
    if settings.migration_database_url is None or settings.database_url is None:
        raise ValueError("the cluster benchmark needs the runtime and the owner database URLs")
    owner_engine = create_engine(
        as_async_url(settings.migration_database_url.get_secret_value()),
        settings,
        pool_size=options.load_connections + 1,
        max_overflow=1,
    )
    runtime_engine = create_engine(
        as_async_url(settings.database_url.get_secret_value()),
        settings,
        pool_size=max(options.concurrency) + 1,
        max_overflow=0,
    )
    loader = BulkLoader(
        owner_engine,
        corpus,
        pool_vectors,
        BulkSettings(
            connections=options.load_connections,
            vector_noise=options.vector_noise,
            embedding_model=embedder.model_name,
        ),
    )
    try:
        yield Side(name, settings, owner_engine, runtime_engine, loader, builds_owner_graphs)
    finally:
        await owner_engine.dispose()
        await runtime_engine.dispose()


async def run_cluster(settings: Settings, options: ClusterOptions) -> ClusterRun:
    """The whole comparison: `settings` point at the given database (runtime and owner URLs,
    migrated); the single node is started, migrated and deleted here."""
    started = time.perf_counter()
    load_options = options.load_options()
    embedder = build_embedder(embedder_config_from_settings(settings))
    try:
        pool = build_pool(options.pool_size, options.shape.seed)
        corpus = Corpus(options.shape, pool)
        pool_vectors, _ = await embed_pool(
            embedder, [s.text for s in pool], progress=load_options.progress
        )
        async with throwaway_database(settings) as single_settings, AsyncExitStack() as stack:
            single = await stack.enter_async_context(
                _side(
                    SINGLE_NODE,
                    single_settings,
                    corpus,
                    pool_vectors,
                    options,
                    embedder,
                    builds_owner_graphs=True,
                )
            )
            given = await stack.enter_async_context(
                _side(
                    GIVEN,
                    settings.model_copy(update={"migrate_on_start": False}),
                    corpus,
                    pool_vectors,
                    options,
                    embedder,
                    builds_owner_graphs=False,
                )
            )
            sides = [single, given]
            try:
                return await _measure(sides, corpus, embedder, options, started)
            finally:
                shape = options.shape
                tenants = shape.tenants_for(shape.users_for(options.size))
                await given.loader.delete_tenants([shape.tenant_id(t) for t in range(tenants)])
    finally:
        await embedder.aclose()


async def _measure(
    sides: list[Side],
    corpus: Corpus,
    embedder: Embedder,
    options: ClusterOptions,
    started: float,
) -> ClusterRun:
    load_options = options.load_options()
    for side in sides:
        await side.loader.check_privileges()
        side.citus = await _citus_version(side.owner_engine)
        _say(options, f"{side.name}: loading {options.size} user memories by COPY")
        side.step = await side.loader.grow_to(options.size)
        graphs = "no owner indexes built"
        if side.builds_owner_graphs:
            await build_owner_graphs(side.loader, side.settings, side.step)
            graphs = (
                f"{side.step.owner_indexes_built} owner indexes "
                f"{side.step.owner_index_seconds:.0f} s"
            )
        _say(
            options,
            f"{side.name}: COPY {side.step.copy_seconds:.0f} s, VACUUM ANALYZE "
            f"{side.step.vacuum_analyze_seconds:.0f} s, {graphs}",
        )
        side.topology = await _topology(side)
        if side.citus is not None:
            # The coordinator's own relations are empty shells; the shards' sizes are above.
            side.step.relation_bytes = {}
        side.postgres = await postgres_settings(side.runtime_engine)

    queries = await sample_search_queries(
        embedder, corpus, sides[0].loader.users_loaded, load_options
    )
    searches = [
        await service_search_params(
            sides[0].settings,
            query.tenant_id,
            query.user_id,
            SearchRequest(query=query.text, limit=SEARCH_LIMIT),
            query.embedding,
        )
        for query in queries
    ]
    for side in sides:
        side.statement, side.arguments = await _service_statement(side, queries, searches)
        side.rankings = await _rankings(side, side.statement, queries, side.arguments)
    load_average = {"before_search": os.getloadavg()}
    async with AsyncExitStack() as stack:
        servers = [
            await stack.enter_async_context(loopback_server(side.settings)) for side in sides
        ]
        for number in range(options.rounds):
            _say(options, f"round {number + 1} of {options.rounds}")
            # Rotated questions per round; the side that goes first alternates.
            shift = (number * options.requests_per_round) % len(queries)
            round_queries = queries[shift:] + queries[:shift]
            order = list(zip(sides, servers, strict=True))
            if number % 2:
                order.reverse()
            for clients in options.concurrency:
                for side, server in order:
                    bench = SearchBench(
                        side.settings,
                        load_options,
                        side.runtime_engine,
                        round_queries,
                        side.arguments[shift:] + side.arguments[:shift],
                        side.statement,
                    )
                    service = await bench.service_level(server.base_url, clients)
                    raw, _ = await bench.raw_level(clients)
                    for path, result in (("service", service), ("raw_sql", raw)):
                        _merge(side.levels.setdefault(path, {}), clients, result)
    load_average["after_search"] = os.getloadavg()

    for side in sides:
        side.floor_ms = await _floor(side, queries)
        side.explain = await _explain(
            side, side.statement, queries, side.arguments, options.explains
        )
    return ClusterRun(
        sides=sides,
        queries=queries,
        seconds=time.perf_counter() - started,
        load_average=load_average,
    )


def _merge(levels: dict[int, LevelResult], clients: int, result: LevelResult) -> None:
    total = levels.setdefault(clients, LevelResult(clients))
    total.latencies_ms += result.latencies_ms
    total.seconds += result.seconds
    total.errors += result.errors
    total.first_error = total.first_error or result.first_error


async def _citus_version(engine: AsyncEngine) -> str | None:
    async with engine.connect() as connection:
        driver = await asyncpg_connection(connection)
        version: str | None = await driver.fetchval(CITUS_VERSION_SQL)
        return version


async def _topology(side: Side) -> dict[str, Any]:
    if side.citus is None:
        return {"citus": None}
    async with side.owner_engine.connect() as connection:
        driver = await asyncpg_connection(connection)
        return {
            "citus": side.citus,
            "workers": await driver.fetchval(WORKERS_SQL),
            "memory_shards": await driver.fetchval(SHARDS_SQL),
            "memory_bytes_with_indexes": await driver.fetchval(CITUS_MEMORY_BYTES_SQL),
        }


async def _service_statement(
    side: Side, queries: Sequence[Query], searches: Sequence[SearchParams]
) -> tuple[FusionStatement, list[list[Any]]]:
    """The statement the service sends for the questions on this side (on Citus, one that
    reads no catalog table: `OWNER_STATS_SQL`), and each question's values for it."""
    statement = FusionStatement(side.runtime_engine.dialect)
    async with side.runtime_engine.connect() as connection:
        driver = await asyncpg_connection(connection)
        arguments = [
            await statement.learn(driver, query.tenant_id, params)
            for query, params in zip(queries, searches, strict=True)
        ]
    return statement, arguments


async def _rankings(
    side: Side, statement: FusionStatement, queries: Sequence[Query], arguments: list[list[Any]]
) -> list[list[str]]:
    """Each question's hit ids through the statement (this also warms the caches)."""
    async with side.runtime_engine.connect() as connection:
        driver = await asyncpg_connection(connection)
        return [
            [str(i) for i in await statement.ids(driver, query.tenant_id, args)]
            for query, args in zip(queries, arguments, strict=True)
        ]


async def _floor(side: Side, queries: Sequence[Query]) -> list[float]:
    """BEGIN, SET LOCAL, a one-row routed query, COMMIT: what any request pays per transaction."""
    timings: list[float] = []
    async with side.runtime_engine.connect() as connection:
        driver = await asyncpg_connection(connection)
        for n in range(FLOOR_SAMPLES):
            tenant_id = queries[n % len(queries)].tenant_id
            sent = time.perf_counter()
            async with driver.transaction():
                await driver.execute(set_tenant_sql(tenant_id))
                await driver.fetchval(ROUTED_FLOOR_SQL, tenant_id)
            timings.append((time.perf_counter() - sent) * 1000)
    return timings


async def _explain(
    side: Side,
    statement: FusionStatement,
    queries: Sequence[Query],
    arguments: list[list[Any]],
    count: int,
) -> dict[str, Any]:
    """EXPLAIN ANALYZE of the statement for the first `count` questions, on the plan the
    service runs on that side (generic on one node, custom on Citus), summarised."""
    documents = []
    async with side.runtime_engine.connect() as connection:
        driver = await asyncpg_connection(connection)
        for query, args in list(zip(queries, arguments, strict=True))[:count]:
            documents.append(await statement.plan_document(driver, query.tenant_id, args))
    return summarise_plans(documents)


def summarise_plans(documents: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Planning and execution time on the node the statement was sent to and, for a Citus
    plan, how many tasks (shards) it ran as, on which workers, and each shard's own time."""
    summary: dict[str, Any] = {
        "explained": len(documents),
        "planning_ms": _median([d.get("Planning Time") for d in documents]),
        "execution_ms": _median([d.get("Execution Time") for d in documents]),
        # Compiling the plan with LLVM, when the planner's cost estimate crosses jit_above_cost.
        "jit_ms": _median([_jit_ms(d) for d in documents]),
    }
    tasks = [_citus_tasks(document["Plan"]) for document in documents]
    if any(job is not None for job in tasks):
        counts = sorted({job["task_count"] for job in tasks if job is not None})
        remote = [task for job in tasks if job is not None for task in job["tasks"]]
        summary["citus"] = {
            "task_counts": counts,
            "workers": sorted({task["node"] for task in remote}),
            "shard_planning_ms": _median([task["planning_ms"] for task in remote]),
            "shard_execution_ms": _median([task["execution_ms"] for task in remote]),
            "shard_jit_ms": _median([task["jit_ms"] for task in remote]),
            "shard_scans": sorted({scan for task in remote for scan in task["scans"]}),
        }
    else:
        summary["scans"] = sorted({scan for d in documents for scan in _scan_names(d["Plan"])})
    return summary


def _jit_ms(document: Mapping[str, Any]) -> float:
    timing = document.get("JIT", {}).get("Timing", {})
    total = timing.get("Total", 0.0)
    # EXPLAIN (FORMAT JSON) gives each phase's time or, for a few, a mapping with its Total.
    return float(total["Total"] if isinstance(total, Mapping) else total)


def _citus_tasks(plan: Mapping[str, Any]) -> dict[str, Any] | None:
    """The distributed job under a Citus custom scan, anywhere in the plan."""
    job = plan.get("Distributed Query", {}).get("Job")
    if job is not None:
        tasks = []
        for task in job.get("Tasks", ()):
            [remote] = task.get("Remote Plan", [[{}]])[0] or [{}]
            tasks.append(
                {
                    "node": task.get("Node", ""),
                    "planning_ms": remote.get("Planning Time"),
                    "execution_ms": remote.get("Execution Time"),
                    "jit_ms": _jit_ms(remote),
                    "scans": _scan_names(remote.get("Plan", {})),
                }
            )
        return {"task_count": job.get("Task Count"), "tasks": tasks}
    for child in plan.get("Plans", ()):
        found = _citus_tasks(child)
        if found is not None:
            return found
    return None


def _scan_names(node: Mapping[str, Any]) -> list[str]:
    found: list[str] = []
    node_type = str(node.get("Node Type", ""))
    if "Scan" in node_type and node_type != "Custom Scan":
        target = node.get("Index Name") or node.get("Relation Name") or ""
        # Shard names end in the shard id (memory_102040): the table is what compares.
        found.append(f"{node_type} {target.rstrip('0123456789').rstrip('_')}".strip())
    for child in node.get("Plans", ()):
        found += _scan_names(child)
    return found


def _median(values: Sequence[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.median(present) if present else None


def build_cluster_report(run: ClusterRun, options: ClusterOptions) -> dict[str, Any]:
    single, given = run.sides
    same = sum(1 for a, b in zip(single.rankings, given.rankings, strict=True) if a == b)
    return {
        "benchmark": "mneme bench cluster",
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "load_average": run.load_average,
        "seconds": run.seconds,
        "corpus": {**describe(options.shape), "user_memories": options.size},
        "options": {
            "rounds": options.rounds,
            "requests_per_round": options.requests_per_round,
            "concurrency": list(options.concurrency),
            "queries": len(run.queries),
            "search_limit": SEARCH_LIMIT,
        },
        "identical_top10": {"compared": len(single.rankings), "identical": same},
        "sides": {
            side.name: {
                "topology": side.topology,
                "load": side.step.to_json() if side.step else None,
                "postgres": side.postgres,
                "search_ms": {
                    path: {
                        str(clients): {
                            **latency_summary(level.latencies_ms),
                            "requests": len(level.latencies_ms),
                            "errors": level.errors,
                            "first_error": level.first_error,
                            "throughput_per_second": (
                                len(level.latencies_ms) / level.seconds if level.seconds else None
                            ),
                        }
                        for clients, level in sorted(side.levels.get(path, {}).items())
                    }
                    for path in PATHS
                },
                "transaction_floor_ms": latency_summary(side.floor_ms),
                "explain": side.explain,
            }
            for side in run.sides
        },
    }


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def render_cluster_markdown(report: Mapping[str, Any]) -> str:
    sides: Mapping[str, Any] = report["sides"]
    names = list(sides)
    lines = [
        f"# mneme bench cluster: {report['corpus']['user_memories']} user memories",
        "",
        f"load average before / after the searches: {report['load_average']['before_search']}"
        f" / {report['load_average']['after_search']}",
        "",
        "| database | topology | COPY s | owner indexes built | owner indexes s |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name in names:
        side = sides[name]
        topology = side["topology"]
        described = (
            f"Citus {topology['citus']}, {topology['workers']} workers, "
            f"{topology['memory_shards']} memory shards"
            if topology.get("citus")
            else "one Postgres"
        )
        load = side["load"] or {}
        lines.append(
            f"| {name} | {described} | {_ms(load.get('copy_seconds'))} | "
            f"{load.get('owner_indexes_built', '-')} | {_ms(load.get('owner_index_seconds'))} |"
        )
    lines += [
        "",
        "| path | clients | " + " | ".join(f"{n} p50 / p95 ms (req/s)" for n in names) + " |",
        "| --- | --- | " + " | ".join("---" for _ in names) + " |",
    ]
    for path in PATHS:
        for clients in report["options"]["concurrency"]:
            cells = []
            for name in names:
                figures = sides[name]["search_ms"][path].get(str(clients), {})
                rate = figures.get("throughput_per_second")
                cells.append(
                    f"{_ms(figures.get('p50'))} / {_ms(figures.get('p95'))} "
                    f"({'-' if rate is None else f'{rate:.0f}'})"
                    + (f", {figures['errors']} errors" if figures.get("errors") else "")
                )
            lines.append(f"| {path} | {clients} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Where the time goes (medians; EXPLAIN ANALYZE of the fusion statement):",
        "",
    ]
    for name in names:
        explain = sides[name]["explain"]
        floor = sides[name]["transaction_floor_ms"]
        text = (
            f"- {name}: planning {_ms(explain['planning_ms'])} ms, execution "
            f"{_ms(explain['execution_ms'])} ms; BEGIN + SET LOCAL + one routed row + COMMIT "
            f"{_ms(floor['p50'])} ms"
        )
        citus = explain.get("citus")
        if citus:
            text += (
                f"; tasks per statement {citus['task_counts']} on {len(citus['workers'])} "
                f"worker(s); on the shard: planning {_ms(citus['shard_planning_ms'])} ms, "
                f"execution {_ms(citus['shard_execution_ms'])} ms; scans "
                f"{', '.join(citus['shard_scans'])}"
            )
        else:
            text += f"; scans {', '.join(explain.get('scans', []))}"
        lines.append(text)
    agreement = report["identical_top10"]
    lines += [
        "",
        f"Identical top {report['options']['search_limit']} on both databases: "
        f"{agreement['identical']} of {agreement['compared']} questions.",
        "",
    ]
    return "\n".join(lines)


def run_prefix() -> str:
    """A tenant prefix of this run's own, so it never meets another run's rows."""
    return f"bench-cluster-{secrets.token_hex(3)}"
