"""The fusion statements of two or more code versions, replayed side by side on one database of
the realistic scenario: which runs faster, and whether they return the same hits.

Run from the repository root:

    python -m benchmarks.scripts.statement_replay --tree before=/path/to/checkout --tree after=.
        [--data DIR] [--sizes 1k,10k,100k] [--questions 40] [--passes 5]
        [--what search|context] [--body JSON] [--first-search] [--question-suffix TEXT]
        [--env NAME=DIR:VAR=VALUE[,VAR=VALUE]]
        [--database-url URL --migration-database-url URL]

The first run loads the realistic scenario into an embedded Postgres under `--data` (one owner
per size among other users and tenants, as `mneme bench load --scenario realistic` loads it,
their own vector indexes built) with the owners' questions, each embedded once, and keeps both;
later runs with the same `--data` reuse them (loading an owner of 100k memories takes minutes).
With `--database-url` and `--migration-database-url` it loads into that database instead (a
server of the caller's, built as the PostgreSQL a deployment runs, such as one with JIT), and
every later run on that `--data` (this script's, `http_replay`'s, `extraction_pass`'s) replays
there: the database must exist with its owner role and the extensions, as for any PostgreSQL the
service runs on, and hold no scenario yet.

`--tree NAME=DIR` compiles the statements with the code in DIR (put first on PYTHONPATH of a
child process; the dependencies are this virtualenv's); `--env NAME=DIR:VAR=VALUE[,…]` does the
same with settings overridden. Each version builds, for every question, the statement the
service would run and how it would run it: its text for the filter shape and for the owners it
writes in, its bound values, its planner settings (`--what search`: `POST …/memories/search`
with the API's defaults and `--body`'s fields, such as a filter; `context`: the default context
block's three memory sections in one statement). With `--first-search`, each statement is the
one a process's first search of its owner sends (for a version that learnt which owners are
large from its searches' results, before it had learnt anything). With `--question-suffix`,
each question's text ends in it (before its question mark, such as " last month?": a question
about a time), its vector the question's own. The replay runs each
version's statements on a connection of its own, on their generic plans as the service runs
them, each version taking each place in the order in turn, one unrecorded pass and then
`--passes`. It prints, per size, each version's p50 statement round
trip, its change against the first version's, and for how many questions it returned the same
rows as the first (ids, sections, ranks, and the lexical, neighbour and thread scores), and what
share of the first version's hits it returned in any order (for a change meant to rank
differently: how far its top hits moved), the shared buffers its statements touched (one
`EXPLAIN (ANALYZE, BUFFERS)` each in the unrecorded pass: the work, whatever the machine's speed
does meanwhile), and the spread of its time per statement over the first version's (the 10th
and 90th percentiles: a change that speeds some questions and slows others, which the p50 may
not show). Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MANIFEST = "scenario.json"
"""In `--data`: the sizes loaded, the corpus's shape, and every owner's questions."""
CLUSTER_DIR = "cluster"

COMPARED_SCORES = ("lexical_score", "neighbour_score", "thread_score")
"""The scores besides the ranks that two versions must agree on for the same hits (rounded to
1e-9). Recency and the final score move with the clock between two runs; they are left out."""


@dataclass(frozen=True)
class Version:
    name: str
    tree: Path
    environment: dict[str, str] = field(default_factory=dict)


def parse_version(spec: str, *, with_environment: bool) -> Version:
    """`NAME=DIR` (a `--tree`), or `NAME=DIR:VAR=VALUE[,VAR=VALUE]` (an `--env`)."""
    name, separator, rest = spec.partition("=")
    if not separator or not name or not rest:
        raise ValueError(f"expected NAME=DIR, got {spec!r}")
    environment: dict[str, str] = {}
    tree = rest
    if with_environment:
        tree, colon, assignments = rest.partition(":")
        if not colon or not assignments:
            raise ValueError(f"expected NAME=DIR:VAR=VALUE[,VAR=VALUE], got {spec!r}")
        for assignment in assignments.split(","):
            variable, equals, value = assignment.partition("=")
            if not equals or not variable:
                raise ValueError(f"expected VAR=VALUE, got {assignment!r} in {spec!r}")
            environment[variable] = value
    path = Path(tree).resolve()
    if not (path / "service" / "__init__.py").is_file():
        raise ValueError(f"{tree} holds no service package")
    return Version(name, path, environment)


# ---------------------------------------------------------------------------------------------
# The database: loaded once, kept under --data.


SERVER_FILE = "server.json"
"""In `--data`, when the scenario was loaded into a server of the caller's (`--database-url`):
its runtime and owner URLs, which every later run on that `--data` uses."""


class OwnServer:
    """A server the caller runs (`SERVER_FILE`): there is nothing to start or stop."""

    def stop(self) -> None:
        return None


def _cluster_urls(data: Path) -> tuple[Any, str, str]:
    """The server the scenario under `data` is kept on, and its runtime and owner URLs for the
    bench database: the caller's own (`SERVER_FILE`), or the embedded cluster under `data`,
    started (initialised on first use)."""
    from benchmarks.database import BENCH_DATABASE
    from service.config import Settings
    from service.embedded_postgres import OWNER_ROLE, start_cluster

    own = _own_server_urls(data)
    if own is not None:
        return OwnServer(), *own
    settings = Settings()
    cluster = start_cluster(data / CLUSTER_DIR, settings.embedded_shared_buffers_mb)
    return (
        cluster,
        cluster.url(settings.db_runtime_role, BENCH_DATABASE),
        cluster.url(OWNER_ROLE, BENCH_DATABASE),
    )


async def _load(data: Path, arguments: argparse.Namespace, sizes: Sequence[int]) -> None:
    """Load the scenario's owners of `sizes` into a new database under `data`, and write the
    manifest (last, so a load that failed is loaded again next time)."""
    from pydantic import SecretStr

    from benchmarks.bulk import BulkSettings, MemoryTable
    from benchmarks.database import BENCH_DATABASE
    from benchmarks.datasets import load_dataset
    from benchmarks.load import embed_pool, load_resources, size_label
    from benchmarks.scenario import ScenarioLoader, build_size
    from benchmarks.scenario_corpus import ScenarioShape, SourceText, sample_questions
    from service import db_migrations
    from service.config import Settings
    from service.db import create_engine
    from service.embedded_postgres import bootstrap
    from service.memories.owner_indexes import OwnerIndexes

    cluster, runtime_url, owner_url = await asyncio.to_thread(_cluster_urls, data)
    try:
        if not isinstance(cluster, OwnServer):
            await bootstrap(cluster, BENCH_DATABASE)
        base = Settings()
        owner_engine = create_engine(owner_url, base, pool_size=1, max_overflow=0)
        try:
            await db_migrations.upgrade(owner_engine, base)
        finally:
            await owner_engine.dispose()
        settings = base.model_copy(
            update={
                "database_url": SecretStr(runtime_url),
                "migration_database_url": SecretStr(owner_url),
                "migrate_on_start": False,
            }
        )
        source = SourceText(load_dataset(arguments.dataset, "locomo", image_captions=False))
        shape = ScenarioShape(
            seed=arguments.seed,
            background_user_memories=arguments.memories_per_user,
            users_per_tenant=arguments.users_per_tenant,
            org_per_tenant=arguments.org_memories_per_tenant,
            small_tenants=arguments.small_tenants,
        )
        questions: dict[str, list[dict[str, Any]]] = {}
        async with load_resources(settings, load_connections=2, clients=1) as held:
            pool, _ = await embed_pool(held.embedder, source.pool, progress=False)
            table = MemoryTable(
                held.owner_engine,
                BulkSettings(
                    connections=2,
                    vector_noise=arguments.vector_noise,
                    embedding_model=held.embedder.model_name,
                ),
            )
            await table.check_privileges()
            loader = ScenarioLoader(
                table, pool, arguments.vector_noise, shape.seed, held.embedder.model_name
            )
            for size in sizes:
                label = size_label(size)
                started = time.perf_counter()
                owner, owners, tenants = build_size(
                    source, shape, label, size, first=size == sizes[0]
                )
                await loader.load(owners, tenants, lambda _rows: None)
                await OwnerIndexes.configured(held.owner_engine, settings).refresh()
                questions[label] = [
                    {
                        "tenant_id": owner.tenant_id,
                        "user_id": owner.user_id,
                        "text": question.text,
                        "embedding": await held.embedder.embed_query(question.text),
                    }
                    for question in sample_questions(owner, arguments.questions, shape.seed)
                ]
                _say(f"{label}: loaded in {time.perf_counter() - started:.0f} s")
        manifest = {
            "sizes": [size_label(size) for size in sizes],
            "dataset": str(arguments.dataset),
            "shape": {
                "seed": shape.seed,
                "memories_per_user": shape.background_user_memories,
                "users_per_tenant": shape.users_per_tenant,
                "org_memories_per_tenant": shape.org_per_tenant,
                "small_tenants": shape.small_tenants,
                "vector_noise": arguments.vector_noise,
            },
            "questions": questions,
        }
        (data / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    finally:
        await asyncio.to_thread(cluster.stop)


# ---------------------------------------------------------------------------------------------
# One version's statements, compiled in a child process by its own code.


class _RecordingDriver:
    """An asyncpg connection (`service.db.Driver`) that keeps what the service's search sends
    through it: the planner settings (`execute`) and the statement with its values (`fetch`).

    `benchmarks.rawsql.service_statement` records the same way; this file keeps its own
    because it compiles each version's statements with that version's packages on the path,
    which may predate it."""

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


async def compile_statements(
    runtime_url: str,
    questions: dict[str, list[dict[str, Any]]],
    count: int,
    what: str,
    body: dict[str, Any] | None = None,
    *,
    first_search: bool = False,
) -> list[dict[str, Any]]:
    """Every question's statement as this process's `service` builds and runs it (`what`:
    a search with the API's defaults and `body`'s fields, or a default context block's memory
    sections): the service's own `PlannedSearch` runs it, twice, on a driver that records what
    it sends. A version that learns the owners' indexes from a search's result learns them in
    the first run, as its first search of an owner did; the second is the statement and
    settings the service then runs. With `first_search`, the statement is the first run's, in
    a process that has learnt nothing of the owner (`_forget_learnt_owners`)."""
    from benchmarks.rawsql import asyncpg_connection, service_search_params
    from service.config import Settings
    from service.db import create_engine, set_tenant_sql
    from service.memories.fusion import (
        GENERIC_SEARCH_PLAN_SQL,
        PlannedSearch,
        runs_generic_plans,
    )
    from service.memories.schemas import SearchRequest

    settings = Settings()
    engine = create_engine(runtime_url, settings, pool_size=1, max_overflow=0)
    statements: list[dict[str, Any]] = []
    body = body or {}
    try:
        async with engine.connect() as connection:
            driver = await asyncpg_connection(connection)
            generic_plan = await runs_generic_plans(driver)
            for label, asked in questions.items():
                for index, question in enumerate(asked[:count]):
                    if what == "search":
                        requests = [
                            SearchRequest.model_validate({"query": question["text"], **body})
                        ]
                    else:
                        requests = _context_searches(question["text"])
                    tenant = question["tenant_id"]
                    params = [
                        await service_search_params(
                            settings, tenant, question["user_id"], request, question["embedding"]
                        )
                        for request in requests
                    ]
                    if first_search:
                        _forget_learnt_owners()
                    for _ in range(1 if first_search else 2):
                        recording = _RecordingDriver(driver)
                        async with driver.transaction():
                            await driver.execute(set_tenant_sql(tenant))
                            if generic_plan:
                                # What `FusionRepository.planned()` sets before a search.
                                await driver.execute(GENERIC_SEARCH_PLAN_SQL)
                            search = PlannedSearch(
                                recording,
                                tenant,
                                engine.dialect,
                                generic_plan=generic_plan,
                                statistics=None,
                            )
                            await search.search_sections(params)
                    if recording.statement is None:
                        raise RuntimeError("the search sent no statement")
                    sql, values = recording.statement
                    planner = [GENERIC_SEARCH_PLAN_SQL] if generic_plan else []
                    statements.append(
                        {
                            "size": label,
                            "question": index,
                            "tenant_id": tenant,
                            "settings": "; ".join([*planner, *recording.settings]),
                            "sql": sql,
                            "values": values,
                        }
                    )
    finally:
        await engine.dispose()
    return statements


def kept_scenario(data: Path, program: str) -> dict[str, Any] | None:
    """The manifest of the scenario loaded under `data` (`MANIFEST`: its sizes, shape and
    questions), or None, said on stderr as `program`'s, when none was loaded there."""
    manifest = data / MANIFEST
    if not manifest.exists():
        _say(
            f"{program}: {data} holds no loaded scenario: load it with "
            "`python -m benchmarks.scripts.statement_replay --data` first"
        )
        return None
    kept: dict[str, Any] = json.loads(manifest.read_text(encoding="utf-8"))
    return kept


def _own_server_urls(data: Path) -> tuple[str, str] | None:
    """The runtime and owner URLs of the caller's server the scenario under `data` was loaded
    into, if it was (`SERVER_FILE`)."""
    own = data / SERVER_FILE
    if not own.exists():
        return None
    urls = json.loads(own.read_text(encoding="utf-8"))
    return urls["runtime"], urls["owner"]


def _keep_own_server(data: Path, runtime_url: str, owner_url: str) -> None:
    """Remember in `data` that its scenario is loaded into the caller's server (`SERVER_FILE`)."""
    from service.db import as_async_url

    urls = {"runtime": as_async_url(runtime_url), "owner": as_async_url(owner_url)}
    (data / SERVER_FILE).write_text(json.dumps(urls), encoding="utf-8")


def _forget_learnt_owners() -> None:
    """Forget what this process learnt of owners from its searches' results: a version that
    did keeps them in `fusion.repository.indexed_owners`, and its next search of an owner is
    then a process's first. (A version that asks before each search has nothing to forget.)"""
    from service.memories.fusion import repository

    learnt = getattr(repository, "indexed_owners", None)
    if learnt is not None:
        repository.indexed_owners = type(learnt)(repository.INDEXED_OWNERS_TTL, kept=10_000)  # type: ignore[attr-defined]


def _context_searches(query: str) -> list[Any]:
    """The searches of a default context block for `query`, as this process's service makes
    them. A version from before they had a function of their own made the same ones inline:
    each memory section's filter, confirmed memories only, 4 hits by MMR at 0.7."""
    from service.context.schemas import ContextRequest
    from service.memories.schemas import SearchRequest

    try:
        from service.context.service import memory_section_searches
    except ImportError:
        from service.context.service import MEMORY_SECTIONS

        return [
            SearchRequest.model_validate(
                {
                    "query": query,
                    "scopes": scopes,
                    "kinds": kinds,
                    "lifecycles": ["confirmed"],
                    "limit": 4,
                    "mmr_lambda": 0.7,
                }
            )
            for scopes, kinds in MEMORY_SECTIONS.values()
        ]
    return [search for _, search in memory_section_searches(ContextRequest(query=query))]


def run_in_child(version: Version, script: Path, arguments: Sequence[str], what: str) -> bytes:
    """The output file `script` writes when run as `version` (its tree first on the import
    path, its environment on top of this one's) with `arguments` and `--out FILE`; `what` it
    was doing names a failure (RuntimeError, with the child's last stderr)."""
    environment = {**os.environ, **version.environment, "PYTHONPATH": str(version.tree)}
    with tempfile.TemporaryDirectory(prefix="mneme-version-") as scratch:
        out = Path(scratch) / "out"
        command = [sys.executable, str(script.resolve()), *arguments, "--out", str(out)]
        done = subprocess.run(  # noqa: S603  # this interpreter, our script, our arguments
            command, env=environment, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{version.name}: {what} failed:\n{done.stderr[-3000:]}")
        return out.read_bytes()


def asked_with(
    questions: dict[str, list[dict[str, Any]]], suffix: str
) -> dict[str, list[dict[str, Any]]]:
    """`questions` (by size) with `suffix` at the end of each one's text, in place of its
    question mark if it ends in one; each keeps its vector."""
    return {
        size: [
            {**question, "text": question["text"].removesuffix("?") + suffix} for question in asked
        ]
        for size, asked in questions.items()
    }


def _compile_in_child(
    version: Version,
    runtime_url: str,
    manifest: Path,
    count: int,
    what: str,
    body: dict[str, Any],
    first_search: bool,
    question_suffix: str = "",
) -> list[dict[str, Any]]:
    """`compile_statements` run by `version`'s code in a child process."""
    arguments = ["--runtime-url", runtime_url, "--manifest", str(manifest)]
    arguments += ["--questions", str(count), "--what", what, "--body", json.dumps(body)]
    if first_search:
        arguments.append("--first-search")
    if question_suffix:
        arguments.append(f"--question-suffix={question_suffix}")
    output = run_in_child(version, Path(__file__), arguments, "compiling")
    statements: list[dict[str, Any]] = pickle.loads(output)  # noqa: S301  # our own child's
    return statements


# ---------------------------------------------------------------------------------------------
# The replay.


@dataclass
class Figures:
    """One size's figures per version, in this replay and in `http_replay`'s."""

    seconds: dict[str, list[float]] = field(default_factory=dict)
    same: dict[str, int] = field(default_factory=dict)
    """Per version: the questions it answered as the first version did (its rows; over HTTP,
    its hits in order)."""
    shared: dict[str, float] = field(default_factory=dict)
    """Per version: the sum over questions of the share of the first version's hits it
    returned too (in the same section, in any order)."""
    buffers: dict[str, int] = field(default_factory=dict)
    """Per version: the shared buffers its statements touched, summed over the questions (one
    `EXPLAIN (ANALYZE, BUFFERS)` of each in the unrecorded pass): the work a change saves or
    adds, whatever the machine's speed does meanwhile. (Not counted over HTTP.)"""
    cpu_seconds: dict[str, list[float]] = field(default_factory=dict)
    """Per version: the server's own CPU time around each recorded request (over HTTP only)."""
    statements: dict[str, list[float]] = field(default_factory=dict)
    """Per version: the seconds each recorded request's fusion statement took as its server
    timed it (over HTTP only)."""
    questions: int = 0

    def compare(self, versions: Sequence[Version], answers: dict[int, Any]) -> None:
        """One question's answers, by version index, counted against the first version's."""
        self.questions += 1
        for which, answer in answers.items():
            name = versions[which].name
            self.same[name] = self.same.get(name, 0) + (answer == answers[0])
            self.shared[name] = self.shared.get(name, 0.0) + hits_share(answers[0], answer)

    def against_first(self, name: str, first: str) -> tuple[str, str, str, str]:
        """A version's report cells against the first version's: its p50's change, the
        questions answered alike, the share of the first's hits returned, the spread of its
        time per question (`question_ratios`)."""
        baseline = statistics.median(self.seconds[first])
        change = (statistics.median(self.seconds[name]) - baseline) / baseline
        low, high = question_ratios(self.seconds[name], self.seconds[first])
        return (
            f"{change:+.1%}",
            f"{self.same[name]}/{self.questions}",
            f"{self.shared[name] / self.questions:.3f}",
            f"{low:.3f} / {high:.3f}",
        )


def _rows_key(rows: Sequence[Any]) -> list[tuple[Any, ...]]:
    return [
        (
            row["section"],
            row["id"],
            row["lexical_rank"],
            row["vector_rank"],
            *(None if row[name] is None else round(row[name], 9) for name in COMPARED_SCORES),
        )
        for row in rows
    ]


def hits_share(first: Sequence[tuple[Any, ...]], other: Sequence[tuple[Any, ...]]) -> float:
    """How many of `first`'s hits (section and id) `other` returned too, as a share (1 when
    `first` returned none)."""
    wanted = {row[:2] for row in first}
    if not wanted:
        return 1.0
    return len(wanted & {row[:2] for row in other}) / len(wanted)


def run_order(versions: int, turn: int) -> list[int]:
    """The order the versions run one question in at `turn`: each takes each place in turn.
    Where a version runs among the others moves its time (a reversed order every other turn
    left the middle one of three always second, and it read 5-20 % slower than the same
    statements run first or last)."""
    return [(turn + step) % versions for step in range(versions)]


async def replay(
    runtime_url: str,
    versions: Sequence[Version],
    compiled: dict[str, list[dict[str, Any]]],
    passes: int,
) -> dict[str, Figures]:
    """Each version's statements on a connection of its own, alternating which goes first;
    the figures per size."""
    from benchmarks.rawsql import asyncpg_connection
    from service.config import Settings
    from service.db import create_engine

    engine = create_engine(runtime_url, Settings(), pool_size=len(versions), max_overflow=0)
    figures: dict[str, Figures] = {}
    try:
        connections = [await engine.connect() for _ in versions]
        drivers = [await asyncpg_connection(connection) for connection in connections]
        first = compiled[versions[0].name]
        for round_number in range(passes + 1):
            for position, reference in enumerate(first):
                size = figures.setdefault(reference["size"], Figures())
                order = run_order(len(versions), round_number + position)
                answers: dict[int, list[tuple[Any, ...]]] = {}
                for which in order:
                    statement = compiled[versions[which].name][position]
                    driver = drivers[which]
                    async with as_the_service_runs(driver, statement):
                        started = time.perf_counter()
                        rows = await driver.fetch(statement["sql"], *statement["values"])
                        elapsed = time.perf_counter() - started
                        if round_number == 0:
                            name = versions[which].name
                            size.buffers[name] = size.buffers.get(name, 0) + (
                                await _buffers_touched(driver, statement)
                            )
                    answers[which] = _rows_key(rows)
                    if round_number:
                        size.seconds.setdefault(versions[which].name, []).append(elapsed)
                if round_number == 0:
                    size.compare(versions, answers)
        for connection in connections:
            await connection.close()
    finally:
        await engine.dispose()
    return figures


@asynccontextmanager
async def as_the_service_runs(driver: Any, statement: dict[str, Any]) -> AsyncIterator[None]:
    """A transaction of `driver` set up as the service runs a compiled `statement`
    (`compile_statements`): its tenant, then the planner settings its search made."""
    from service.db import set_tenant_sql

    async with driver.transaction():
        await driver.execute(set_tenant_sql(statement["tenant_id"]))
        if statement["settings"]:
            await driver.execute(statement["settings"])
        yield


BUFFERS_STATEMENT = "mneme_replay_buffers"
"""The name `_buffers_touched` prepares a statement under (for one EXPLAIN, then released)."""


async def _buffers_touched(driver: Any, statement: dict[str, Any]) -> int:
    """The shared buffers one run of `statement` touches (hits and reads: the same count
    whether its pages were cached), from `EXPLAIN (ANALYZE, BUFFERS)` in the transaction that
    set its tenant and planner settings, of the plan the replay times: the statement is
    prepared and executed, so the planner settings choose a generic or a custom plan as they
    do for the service. (EXPLAIN of the statement with its values would plan it for those
    values, a custom plan, which may read other indexes than the generic one.)"""
    # EXECUTE takes no bound values: each is passed as a literal of the type the server
    # inferred for its parameter, all of them rendered by one query.
    await driver.execute(f"PREPARE {BUFFERS_STATEMENT} AS {statement['sql']}")
    try:
        types = await driver.fetchval(
            "SELECT parameter_types::text[] FROM pg_prepared_statements WHERE name = $1",
            BUFFERS_STATEMENT,
        )
        rendered = ", ".join(
            f"quote_nullable(CAST(CAST(${index} AS {kind}) AS text))"
            for index, kind in enumerate(types, start=1)
        )
        literals = (
            await driver.fetchval(f"SELECT ARRAY[{rendered}]", *statement["values"])
            if types
            else []
        )
        arguments = ", ".join(
            f"CAST({literal} AS {kind})" for literal, kind in zip(literals, types, strict=True)
        )
        plan = await driver.fetchval(
            "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) "
            f"EXECUTE {BUFFERS_STATEMENT}" + (f"({arguments})" if arguments else "")
        )
    finally:
        await driver.execute(f"DEALLOCATE {BUFFERS_STATEMENT}")
    # The service's connections decode JSON themselves; a bare asyncpg one returns its text.
    top = (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]
    return int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))


def question_ratios(seconds: Sequence[float], first: Sequence[float]) -> tuple[float, float]:
    """The 10th and 90th percentiles of a version's time for each statement over the first
    version's time for the same statement (the two lists in the replay's order): a change that
    speeds some questions and slows others shows there while its p50 stays put."""
    ratios = [mine / theirs for mine, theirs in zip(seconds, first, strict=True)]
    if len(ratios) < 2:
        return ratios[0], ratios[0]
    deciles = statistics.quantiles(ratios, n=10, method="inclusive")
    return deciles[0], deciles[-1]


def report(versions: Sequence[Version], figures: dict[str, Figures], what: str) -> str:
    lines = [
        f"## Fusion statements replayed ({what}), p50 of the statement's round trip",
        "",
        "| size | version | p50 ms | against the first | same rows as the first "
        "| the first's hits returned | shared buffers (against the first) "
        "| each question against the first (p10 / p90) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    first = versions[0].name
    for size, each in figures.items():
        first_buffers = each.buffers[first]
        for version in versions:
            p50 = statistics.median(each.seconds[version.name]) * 1000
            buffers = each.buffers[version.name]
            change = same = shared = spread = ""
            touched = f"{buffers}"
            if version is not versions[0]:
                change, same, shared, spread = each.against_first(version.name, first)
                touched += f" ({(buffers - first_buffers) / max(first_buffers, 1):+.1%})"
            lines.append(
                f"| {size} | {version.name} | {p50:.1f} | {change} | {same} | {shared} "
                f"| {touched} | {spread} |"
            )
    return "\n".join(lines) + "\n"


def per_question_report(versions: Sequence[Version], figures: dict[str, Figures]) -> str:
    """Each question's median time per version (its passes), and its ratio to the first's:
    which questions a change speeds up or slows down."""
    names = [version.name for version in versions]
    lines = [
        "",
        "## Each question, median of its passes (ms)",
        "",
        "| size | question | "
        + " | ".join(names)
        + " | "
        + " | ".join(f"{name} / {names[0]}" for name in names[1:])
        + " |",
        "| --- | --- |" + " --- |" * (2 * len(names) - 1),
    ]
    for size, each in figures.items():
        medians = {
            name: [
                statistics.median(each.seconds[name][question :: each.questions]) * 1000
                for question in range(each.questions)
            ]
            for name in names
        }
        for question in range(each.questions):
            times = [medians[name][question] for name in names]
            ratios = [f"{time / times[0]:.2f}" for time in times[1:]]
            lines.append(
                f"| {size} | {question} | "
                + " | ".join(f"{time:.1f}" for time in times)
                + " | "
                + " | ".join(ratios)
                + " |"
            )
    return "\n".join(lines) + "\n"


def _say(message: str) -> None:
    sys.stderr.write(message + "\n")


def add_tree_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that name code versions: `--tree NAME=DIR`, `--env NAME=DIR:VAR=VALUE,…`
    (read by `named_versions`)."""
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=DIR")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=DIR:VAR=VALUE")


def named_versions(arguments: argparse.Namespace) -> list[Version]:
    """The versions `--tree` and `--env` name, trees first; ValueError for a spec that names
    none (see `parse_version`)."""
    versions = [parse_version(spec, with_environment=False) for spec in arguments.tree]
    return versions + [parse_version(spec, with_environment=True) for spec in arguments.env]


def add_version_arguments(parser: argparse.ArgumentParser, *, passes: int) -> None:
    """The options a replay of code versions on the kept scenario takes (this one's, and
    `http_replay`'s): the versions, where the scenario is kept, how much of it to ask."""
    add_tree_arguments(parser)
    parser.add_argument(
        "--data",
        type=Path,
        default=Path(tempfile.gettempdir()) / "mneme-statement-replay",
        help="where the scenario's database is kept (default: %(default)s)",
    )
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--passes", type=int, default=passes)
    parser.add_argument("--what", choices=("search", "context"), default="search")
    parser.add_argument(
        "--body",
        type=_json_object,
        default={},
        metavar="JSON",
        help="fields added to every search request's body, as a JSON object (--what search)",
    )


def _json_object(value: str) -> dict[str, Any]:
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"not JSON: {error}") from error
    if not isinstance(parsed, dict):
        raise argparse.ArgumentTypeError('a JSON object, such as {"categories": ["food"]}')
    return parsed


def distinct_versions(arguments: argparse.Namespace, program: str) -> list[Version] | None:
    """The versions `--tree` and `--env` name, one or more, or None, said on stderr as
    `program`'s, when a spec names none or two share a name."""
    try:
        versions = named_versions(arguments)
    except ValueError as error:
        _say(f"{program}: {error}")
        return None
    if not versions or len({version.name for version in versions}) < len(versions):
        _say(f"{program}: give one or more versions with distinct names (--tree, --env)")
        return None
    return versions


def chosen_versions(arguments: argparse.Namespace, program: str) -> list[Version] | None:
    """The versions `--tree` and `--env` name, or None, said on stderr as `program`'s, when
    they cannot be compared (fewer than two, names alike, a tree without the service) or
    `--questions` or `--passes` ask for nothing."""
    try:
        versions = named_versions(arguments)
    except ValueError as error:
        _say(f"{program}: {error}")
        return None
    if len(versions) < 2 or len({version.name for version in versions}) < len(versions):
        _say(f"{program}: give two or more versions with distinct names (--tree, --env)")
        return None
    if arguments.questions < 1 or arguments.passes < 1:
        _say(f"{program}: --questions and --passes must be at least 1")
        return None
    return versions


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    from benchmarks.cli import DATASET_ENV, DEFAULT_DATASET, REALISTIC_SIZES

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_version_arguments(parser, passes=5)
    parser.add_argument("--sizes", default=REALISTIC_SIZES)
    parser.add_argument(
        "--dataset", type=Path, default=Path(os.environ.get(DATASET_ENV) or DEFAULT_DATASET)
    )
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument("--memories-per-user", type=int, default=250)
    parser.add_argument("--users-per-tenant", type=int, default=10)
    parser.add_argument("--org-memories-per-tenant", type=int, default=20)
    parser.add_argument("--small-tenants", type=int, default=0)
    parser.add_argument("--vector-noise", type=float, default=0.15)
    parser.add_argument(
        "--database-url",
        help="load the scenario into this database (the runtime role's URL) instead of an "
        "embedded cluster under --data; every later run on that --data uses it. The database, "
        "its owner role and extensions must exist, as for any PostgreSQL the service runs on",
    )
    parser.add_argument(
        "--migration-database-url",
        help="the owner role's URL of --database-url's database (it migrates and loads it)",
    )
    parser.add_argument(
        "--per-question", action="store_true", help="also each question's time per version"
    )
    parser.add_argument(
        "--first-search",
        action="store_true",
        help="each statement as a process's first search of its owner sends it",
    )
    parser.add_argument(
        "--question-suffix",
        default="",
        help="end each question's text in this, before its question mark "
        '(" last month?": every question about a time); its vector is unchanged',
    )
    # The child's side: compile this version's statements into a file.
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--runtime-url", help=argparse.SUPPRESS)
    parser.add_argument("--manifest", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _arguments(argv)
    if arguments.out is not None:
        questions = json.loads(arguments.manifest.read_text(encoding="utf-8"))["questions"]
        if arguments.question_suffix:
            questions = asked_with(questions, arguments.question_suffix)
        statements = asyncio.run(
            compile_statements(
                arguments.runtime_url,
                questions,
                arguments.questions,
                arguments.what,
                arguments.body,
                first_search=arguments.first_search,
            )
        )
        arguments.out.write_bytes(pickle.dumps(statements))
        return 0

    from benchmarks.load import parse_sizes, size_label
    from service.db import as_async_url

    versions = chosen_versions(arguments, "statement_replay")
    if versions is None:
        return 2
    try:
        sizes = parse_sizes(arguments.sizes)
    except ValueError as error:
        _say(f"statement_replay: {error}")
        return 2
    data: Path = arguments.data
    manifest = data / MANIFEST
    wanted = [size_label(size) for size in sizes]
    if manifest.exists():
        own = _own_server_urls(data)
        if arguments.database_url and (
            own is None or own[0] != as_async_url(arguments.database_url)
        ):
            _say(
                f"statement_replay: {data} holds a scenario loaded elsewhere, not into "
                "--database-url: give another --data to load it there"
            )
            return 2
        kept = json.loads(manifest.read_text(encoding="utf-8"))
        loaded, small_tenants = kept["sizes"], kept["shape"].get("small_tenants", 0)
        if loaded != wanted or small_tenants != arguments.small_tenants:
            _say(
                f"statement_replay: {data} holds the sizes {','.join(loaded)} among "
                f"{small_tenants} small tenants, not {','.join(wanted)} among "
                f"{arguments.small_tenants}: give another --data to load those"
            )
            return 2
    else:
        if (data / CLUSTER_DIR).exists() or (data / SERVER_FILE).exists():
            _say(f"statement_replay: {data} holds a load that did not finish: remove it first")
            return 2
        data.mkdir(parents=True, exist_ok=True)
        if arguments.database_url or arguments.migration_database_url:
            if not (arguments.database_url and arguments.migration_database_url):
                _say("statement_replay: give both --database-url and --migration-database-url")
                return 2
            _keep_own_server(data, arguments.database_url, arguments.migration_database_url)
        asyncio.run(_load(data, arguments, sizes))

    cluster, runtime_url, _ = _cluster_urls(data)
    try:
        try:
            compiled = {
                version.name: _compile_in_child(
                    version,
                    runtime_url,
                    manifest,
                    arguments.questions,
                    arguments.what,
                    arguments.body,
                    arguments.first_search,
                    arguments.question_suffix,
                )
                for version in versions
            }
        except RuntimeError as error:
            _say(f"statement_replay: {error}")
            return 1
        counts = {len(statements) for statements in compiled.values()}
        if len(counts) != 1:
            _say("statement_replay: the versions compiled different numbers of statements")
            return 1
        figures = asyncio.run(replay(runtime_url, versions, compiled, arguments.passes))
    finally:
        cluster.stop()
    sys.stdout.write(report(versions, figures, arguments.what))
    if arguments.per_question:
        sys.stdout.write(per_question_report(versions, figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
