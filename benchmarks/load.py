"""The load benchmark: grow a synthetic corpus through the bulk path, then measure search latency
through the real HTTP service and through the bare fusion statement, recall of the filtered
vector path against an exact scan, and ingest through the API — at each corpus size.

Per size, in this order:
1. grow the corpus (COPY, VACUUM ANALYZE), then build the largest owners' own vector indexes,
   as a service process with the owner role does after a load (see `bulk`);
2. sample questions asked by one user of one tenant each, about one of that user's memories,
   and embed them one by one with the service's embedder (the query-embedding cost alone);
3. warm the caches with one pass of the statement, start the service under uvicorn on loopback,
   and for each client count send the same request list through HTTP (`POST …/memories/search`,
   the API's default hybrid search, limit 10), then run it through the statement itself on
   asyncpg connections (its tenant-scoped transaction: BEGIN, SET LOCAL, statement, COMMIT);
4. store a few thousand memories through `POST …/memories/batch` (one client, 100 per request,
   embedded by the service), then delete them, so every size is measured on the corpus alone;
5. recall of the statement in vector mode, as the planner runs it, against the same statement
   with index scans off (an exact scan).
"""

from __future__ import annotations

import asyncio
import itertools
import math
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import httpx
import numpy as np
import numpy.typing as npt
from sqlalchemy.ext.asyncio import AsyncEngine
from tqdm import tqdm

from benchmarks.bulk import BulkLoader, BulkStep
from benchmarks.corpus import Corpus, CorpusShape, MemoryRow, sample_queries
from benchmarks.metrics import percentile
from benchmarks.rawsql import (
    AS_PLANNED,
    EXACT,
    FusionStatement,
    PlanSummary,
    Variant,
    asyncpg_connection,
    service_search_params,
)
from service.auth.tokens import mint_dev_token
from service.config import Settings
from service.db import create_engine
from service.memories.schemas import BATCH_MAX, SearchRequest
from service.providers import Embedder, build_embedder, embedder_config_from_settings

# The loading and searching principal: a service may address any user of its tenant.
BENCH_SERVICE = "mneme-bench"
SEARCH_LIMIT = 10
RECALL_DEPTH = 10
# The API's largest page of hits (SearchRequest.limit).
SEARCH_LIMIT_MAX = 100
# Pool sentences embedded per call; a progress bar moves between calls.
POOL_EMBED_BATCH = 256
# Rows whose true embedding is compared with the vector the bulk path derives for them.
FIDELITY_SAMPLE = 256
WARM_UP_PER_CLIENT = 2
REQUEST_TIMEOUT_SECONDS = 120.0
POSTGRES_SETTINGS = (
    "server_version",
    "shared_buffers",
    "work_mem",
    "maintenance_work_mem",
    "effective_cache_size",
    "max_connections",
    "max_wal_size",
    "max_parallel_workers_per_gather",
    "random_page_cost",
    "jit",
    "plan_cache_mode",
    "statement_timeout",
    "hnsw.ef_search",
    "hnsw.iterative_scan",
    "hnsw.max_scan_tuples",
    "hnsw.scan_mem_multiplier",
)


class LoadBenchmarkError(RuntimeError):
    """The service failed a benchmark request it should have answered."""


@dataclass(frozen=True)
class LoadOptions:
    sizes: tuple[int, ...]
    shape: CorpusShape
    pool_size: int = 4096
    vector_noise: float = 0.15
    concurrency: tuple[int, ...] = (1, 8, 32)
    requests: int = 1000
    level_seconds: float = 30.0
    queries: int = 200
    recall_queries: int = 100
    api_rows: int = 2000
    load_connections: int = 2
    progress: bool = True
    # Memories of one extra user in a tenant of their own, loaded with the largest size; 0: none.
    heavy_user: int = 0


@dataclass(frozen=True)
class Query:
    tenant_id: str
    user_id: str
    text: str
    # Memories that answer it (any of them in the top 10 counts); empty when none does alone.
    targets: tuple[uuid.UUID, ...]
    embedding: list[float]
    embed_ms: float


@dataclass
class LevelResult:
    """One client count on one path: every latency, and the failures."""

    clients: int
    latencies_ms: list[float] = field(default_factory=list)
    seconds: float = 0.0
    errors: int = 0
    first_error: str | None = None
    # The hit ids each request got, by request number.
    rankings: dict[int, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "clients": self.clients,
            "requests": len(self.latencies_ms),
            "errors": self.errors,
            "first_error": self.first_error,
            "seconds": self.seconds,
            "throughput_per_second": (
                len(self.latencies_ms) / self.seconds if self.seconds > 0 else None
            ),
            "latency_ms": latency_summary(self.latencies_ms),
        }


@dataclass
class SizeResult:
    step: BulkStep
    queries: int
    query_embedding_ms: dict[str, float | None]
    levels: dict[int, dict[str, LevelResult]]
    recall: dict[str, Any]
    plans: dict[str, Any]
    agreement: dict[str, Any]
    api_ingest: dict[str, Any] | None
    # POST …/context at one client: what an agent waits for before each model call.
    context: LevelResult
    seconds: float
    # 1/5/15-minute load averages around the searches: the only hint, in the results, that
    # something else shared the machine.
    load_average: dict[str, tuple[float, float, float]]


@dataclass
class LoadRun:
    embedding_model: str
    pool: dict[str, Any]
    vectors: dict[str, Any]
    postgres: dict[str, Any]
    sizes: list[SizeResult]
    server: dict[str, Any]
    heavy_user: dict[str, Any] | None = None


def latency_summary(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p95": None, "p99": None, "mean": None, "max": None}
    return {
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "mean": sum(values) / len(values),
        "max": max(values),
    }


def _say(options: LoadOptions, message: str) -> None:
    if options.progress:
        sys.stderr.write(message + "\n")


async def embed_pool(
    embedder: Embedder, texts: Sequence[str], *, progress: bool
) -> tuple[npt.NDArray[np.float32], float]:
    """The pool's vectors, and the seconds that took."""
    started = time.perf_counter()
    vectors: list[list[float]] = []
    with tqdm(
        total=len(texts),
        desc="embedding the sentence pool",
        unit="text",
        file=sys.stderr,
        disable=not progress,
    ) as bar:
        for start in range(0, len(texts), POOL_EMBED_BATCH):
            batch = texts[start : start + POOL_EMBED_BATCH]
            vectors += await embedder.embed(batch)
            bar.update(len(batch))
    return np.asarray(vectors, dtype=np.float32), time.perf_counter() - started


async def vector_fidelity(
    embedder: Embedder, loader: BulkLoader, corpus: Corpus, pool_vectors: npt.NDArray[np.float32]
) -> dict[str, Any]:
    """How close the derived row vectors are to the rows' true embeddings, on a sample."""
    rows: list[MemoryRow] = []
    derived: list[npt.NDArray[np.float32]] = []
    user = 0
    while len(rows) < FIDELITY_SAMPLE:
        user_rows = corpus.user_rows(user)[: FIDELITY_SAMPLE - len(rows)]
        rows += user_rows
        derived.append(loader.derived_vectors(user_rows, f"user-{user}"))
        user += 1
    true = np.asarray(await embedder.embed([row.text for row in rows]), dtype=np.float32)
    base = pool_vectors[[row.pool_index for row in rows]]
    made = np.concatenate(derived)

    def mean_cosine(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> float:
        return float(np.mean(np.sum(a * b, axis=1)))

    return {
        "sample_rows": len(rows),
        "cosine_true_vs_pool_sentence": mean_cosine(true, base),
        "cosine_true_vs_derived": mean_cosine(true, made),
        "cosine_derived_vs_pool_sentence": mean_cosine(made, base),
    }


async def sample_search_queries(
    embedder: Embedder, corpus: Corpus, users: int, options: LoadOptions
) -> list[Query]:
    """Questions by random users about their own memories, each embedded alone (timed)."""
    queries: list[Query] = []
    for tenant_id, user_id, text, row in sample_queries(
        corpus, users, options.queries, corpus.shape.seed
    ):
        started = time.perf_counter()
        vector = await embedder.embed_query(text)
        queries.append(
            Query(
                tenant_id, user_id, text, (row.id,), vector, (time.perf_counter() - started) * 1000
            )
        )
    return queries


async def drive(
    clients: int,
    total: int,
    seconds: float,
    call: Callable[[int, int], Awaitable[list[str]]],
    result: LevelResult,
    *,
    record: bool,
) -> None:
    """`clients` workers take request numbers 0, 1, … until `total` are done or `seconds`
    have passed; `call(client, n)` sends request n and returns the hit ids."""
    numbers = itertools.count()
    deadline = time.perf_counter() + seconds

    async def worker(client: int) -> None:
        while time.perf_counter() < deadline and (n := next(numbers)) < total:
            sent = time.perf_counter()
            try:
                ids = await call(client, n)
            except Exception as exc:  # counted and reported: one failure must not end the run
                result.errors += 1
                result.first_error = result.first_error or f"{type(exc).__name__}: {exc}"[:500]
                continue
            if record:
                result.latencies_ms.append((time.perf_counter() - sent) * 1000)
                result.rankings.setdefault(n, ids)

    started = time.perf_counter()
    await asyncio.gather(*(worker(client) for client in range(clients)))
    if record:
        result.seconds = time.perf_counter() - started


class LevelBudget(Protocol):
    """How many requests a measured client count sends, and for how long at most."""

    @property
    def requests(self) -> int: ...

    @property
    def level_seconds(self) -> float: ...


class SearchBench:
    """One corpus size: the HTTP service and the raw statement, over the same request list."""

    def __init__(
        self,
        settings: Settings,
        options: LevelBudget,
        runtime_engine: AsyncEngine,
        queries: list[Query],
        arguments: list[list[Any]],
        statement: FusionStatement,
    ) -> None:
        self._settings = settings
        self._options = options
        self._engine = runtime_engine
        self._queries = queries
        self._arguments = arguments
        self._statement = statement
        self._tokens: dict[str, dict[str, str]] = {}

    def _headers(self, tenant_id: str) -> dict[str, str]:
        headers = self._tokens.get(tenant_id)
        if headers is None:
            token = mint_dev_token(
                self._settings, tenant_id=tenant_id, user_id=BENCH_SERVICE, service=True
            )
            headers = self._tokens[tenant_id] = {"Authorization": f"Bearer {token}"}
        return headers

    async def service_level(
        self,
        base_url: str,
        clients: int,
        *,
        warm_up_per_client: int = WARM_UP_PER_CLIENT,
        total: int | None = None,
    ) -> LevelResult:
        """`total` searches (default: the budget's) by `clients` clients, after
        `warm_up_per_client` unrecorded ones each (0: every question is sent for the first
        time, when `total` is at most the number of questions)."""
        options = self._options
        result = LevelResult(clients)
        self._tokens.clear()
        limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
        async with httpx.AsyncClient(
            base_url=base_url, limits=limits, timeout=REQUEST_TIMEOUT_SECONDS
        ) as client:

            async def call(_: int, n: int) -> list[str]:
                query = self._queries[n % len(self._queries)]
                response = await client.post(
                    f"/v1/users/{query.user_id}/memories/search",
                    headers=self._headers(query.tenant_id),
                    json={"query": query.text, "limit": SEARCH_LIMIT},
                )
                if response.status_code != 200:
                    raise LoadBenchmarkError(f"{response.status_code}: {response.text[:300]}")
                body = response.json()
                if not body["query_embedded"]:
                    raise LoadBenchmarkError("the service searched without a query embedding")
                return [hit["memory"]["id"] for hit in body["hits"]]

            if warm_up_per_client:
                warm_up = LevelResult(clients)
                await drive(
                    clients, clients * warm_up_per_client, 60.0, call, warm_up, record=False
                )
            wanted = options.requests if total is None else total
            await drive(clients, wanted, options.level_seconds, call, result, record=True)
        return result

    async def context_level(self, base_url: str, clients: int) -> LevelResult:
        """The context call an agent makes before each model turn (default budget, every
        section; no thread), over the same questions."""
        options = self._options
        result = LevelResult(clients)
        self._tokens.clear()
        limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
        async with httpx.AsyncClient(
            base_url=base_url, limits=limits, timeout=REQUEST_TIMEOUT_SECONDS
        ) as client:

            async def call(_: int, n: int) -> list[str]:
                query = self._queries[n % len(self._queries)]
                response = await client.post(
                    f"/v1/users/{query.user_id}/context",
                    headers=self._headers(query.tenant_id),
                    json={"query": query.text},
                )
                if response.status_code != 200:
                    raise LoadBenchmarkError(f"{response.status_code}: {response.text[:300]}")
                body = response.json()
                if body["token_count"] > body["budget_tokens"]:
                    raise LoadBenchmarkError("the context block exceeded its budget")
                return [item["id"] for section in body["sections"] for item in section["items"]]

            warm_up = LevelResult(clients)
            await drive(clients, clients * WARM_UP_PER_CLIENT, 60.0, call, warm_up, record=False)
            await drive(clients, options.requests, options.level_seconds, call, result, record=True)
        return result

    async def raw_level(self, clients: int) -> tuple[LevelResult, tuple[int, int]]:
        """The statement in its tenant-scoped transaction on `clients` asyncpg connections of
        the runtime role; also how often Postgres used a generic / custom plan for it."""
        options = self._options
        result = LevelResult(clients)
        statement = self._statement
        connections = [await self._engine.connect() for _ in range(clients)]
        try:
            drivers = [await asyncpg_connection(c) for c in connections]

            async def call(client: int, n: int) -> list[str]:
                index = n % len(self._queries)
                ids = await statement.ids(
                    drivers[client], self._queries[index].tenant_id, self._arguments[index]
                )
                return [str(memory_id) for memory_id in ids]

            warm_up = LevelResult(clients)
            await drive(clients, clients * WARM_UP_PER_CLIENT, 60.0, call, warm_up, record=False)
            await drive(clients, options.requests, options.level_seconds, call, result, record=True)
            generic = custom = 0
            for driver in drivers:
                g, c = await statement.plan_counts(driver)
                generic, custom = generic + g, custom + c
        finally:
            for connection in connections:
                await connection.close()
        return result, (generic, custom)

    async def warm_caches(self) -> None:
        """One pass of every query through the statement, so both paths start equally warm."""
        async with self._engine.connect() as connection:
            driver = await asyncpg_connection(connection)
            for query, arguments in zip(self._queries, self._arguments, strict=True):
                await self._statement.ids(driver, query.tenant_id, arguments)


def _overlap(found: Sequence[uuid.UUID], exact: Sequence[uuid.UUID], depth: int) -> float:
    truth = set(exact[:depth])
    return len(set(found[:depth]) & truth) / len(truth) if truth else 1.0


async def vector_recall(
    statement: FusionStatement,
    runtime_engine: AsyncEngine,
    settings: Settings,
    queries: Sequence[Query],
    variants: Sequence[Variant] = (AS_PLANNED,),
    *,
    sent: bool = False,
) -> dict[str, Any]:
    """Recall of the statement in vector mode, as planned (or under other `variants`), against
    the same statement with index scans off (an exact distance sort). With `sent`, the
    statement is the one the service sends for each question (`FusionStatement.learn`: for an
    owner with vector indexes of its own, the text that walks them; every question must be
    one owner's), else the statement of any owner, which sorts the vectors exactly.

    The request asks for the whole candidate pool (limit = pool), weights 0, so the hits are the
    vector candidates in distance order: recall@10 is what a client sees, recall@pool is what
    the fusion gets to work with."""
    depth = settings.search_candidate_pool
    measured: dict[str, dict[str, list[float]]] = {
        variant.name: {"recall_at_10": [], "recall_at_pool": [], "ms": [], "candidates": []}
        for variant in (*variants, EXACT)
    }
    plans: dict[str, Any] = {}
    async with runtime_engine.connect() as connection:
        driver = await asyncpg_connection(connection)
        for query in queries:
            request = SearchRequest(
                query=query.text,
                mode="vector",
                limit=min(depth, SEARCH_LIMIT_MAX),
                recency_weight=0.0,
                confidence_weight=0.0,
            )
            params = await service_search_params(
                settings, query.tenant_id, query.user_id, request, query.embedding
            )
            arguments = (
                await statement.learn(driver, query.tenant_id, params)
                if sent
                else statement.arguments(query.tenant_id, params)
            )
            found: dict[str, list[uuid.UUID]] = {}
            for variant in (EXACT, *variants):
                started = time.perf_counter()
                found[variant.name] = await statement.ids(
                    driver, query.tenant_id, arguments, variant
                )
                figures = measured[variant.name]
                figures["ms"].append((time.perf_counter() - started) * 1000)
                figures["candidates"].append(len(found[variant.name]))
                figures["recall_at_10"].append(
                    _overlap(found[variant.name], found[EXACT.name], RECALL_DEPTH)
                )
                figures["recall_at_pool"].append(
                    _overlap(found[variant.name], found[EXACT.name], depth)
                )
                if variant.name not in plans:
                    plans[variant.name] = _plan_json(
                        await statement.explain(driver, query.tenant_id, arguments, variant)
                    )
    results: dict[str, Any] = {"queries": len(queries), "pool": depth}
    for name, figures in measured.items():
        recalls = figures["recall_at_10"]
        results[name] = {
            "recall_at_10": _mean(recalls),
            "recall_at_10_min": min(recalls, default=None),
            "queries_below_1_at_10": sum(1 for value in recalls if value < 1.0),
            "recall_at_pool": _mean(figures["recall_at_pool"]),
            "candidates_mean": _mean(figures["candidates"]),
            "ms": latency_summary(figures["ms"]),
            "plan": plans.get(name),
        }
    return results


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _plan_json(plan: PlanSummary | None) -> dict[str, Any] | None:
    if plan is None:
        return None
    return {"scans": list(plan.scans), "execution_ms": plan.execution_ms}


def _agreement(service: LevelResult, raw: LevelResult, queries: Sequence[Query]) -> dict[str, Any]:
    """Did the service and the bare statement rank the same memories for each request? And did
    the memory a question was written about come back in the service's top 10?"""
    common = sorted(set(service.rankings) & set(raw.rankings))
    same = sum(1 for n in common if service.rankings[n] == raw.rankings[n])
    answered = [n for n in sorted(service.rankings) if queries[n % len(queries)].targets]
    found = sum(
        1
        for n in answered
        if {str(target) for target in queries[n % len(queries)].targets} & set(service.rankings[n])
    )
    return {
        "compared": len(common),
        "identical_top10": same,
        "target_memory_in_service_top10": found / len(answered) if answered else None,
        "target_checked": len(answered),
    }


async def api_ingest(
    base_url: str, settings: Settings, corpus: Corpus, size_label: str, rows_wanted: int
) -> tuple[dict[str, Any], list[str]]:
    """Store `rows_wanted` fresh memories through `POST …/memories/batch` (100 per request,
    one client); returns the figures and the tenants it created."""
    shape = replace(corpus.shape, tenant_prefix=f"bench-api-{size_label}")
    api_corpus = Corpus(shape, corpus.pool)
    batches: list[IngestBatch] = []
    user = 0
    remaining = rows_wanted
    while remaining > 0:
        rows = api_corpus.user_rows(user)[:remaining]
        for start in range(0, len(rows), BATCH_MAX):
            items = [
                {
                    "kind": row.kind,
                    "category": row.category,
                    "text": row.text,
                    "confidence": row.confidence,
                    "lifecycle": row.lifecycle,
                    "event_at": None if row.event_at is None else row.event_at.isoformat(),
                }
                for row in rows[start : start + BATCH_MAX]
            ]
            batches.append(IngestBatch(shape.owner_of(user), shape.user_id(user), items))
        remaining -= len(rows)
        user += 1
    return await post_batches(base_url, settings, batches), sorted({b.tenant_id for b in batches})


@dataclass(frozen=True)
class IngestBatch:
    """One `POST …/memories/batch` body's items, for one user of one tenant."""

    tenant_id: str
    user_id: str
    items: list[dict[str, Any]]


async def post_batches(
    base_url: str, settings: Settings, batches: Sequence[IngestBatch]
) -> dict[str, Any]:
    """Send each batch through `POST …/memories/batch`, one after another (one client), with a
    service token of its tenant; the figures."""
    latencies: list[float] = []
    rows = stored = duplicates = unembedded = 0
    started = time.perf_counter()
    async with httpx.AsyncClient(base_url=base_url, timeout=REQUEST_TIMEOUT_SECONDS) as client:
        for batch in batches:
            token = mint_dev_token(
                settings, tenant_id=batch.tenant_id, user_id=BENCH_SERVICE, service=True
            )
            sent = time.perf_counter()
            response = await client.post(
                f"/v1/users/{batch.user_id}/memories/batch",
                headers={"Authorization": f"Bearer {token}"},
                json={"items": batch.items},
            )
            latencies.append((time.perf_counter() - sent) * 1000)
            if response.status_code != 201:
                raise LoadBenchmarkError(
                    f"POST …/memories/batch answered {response.status_code}: {response.text[:300]}"
                )
            rows += len(batch.items)
            for item in response.json()["items"]:
                duplicates += bool(item["duplicate"])
                stored += not item["duplicate"]
                unembedded += item["embedding_model"] is None
    seconds = time.perf_counter() - started
    return {
        "rows": rows,
        "requests": len(batches),
        "rows_per_request": BATCH_MAX,
        "clients": 1,
        "seconds": seconds,
        "rows_per_second": rows / seconds if seconds > 0 else None,
        "request_ms": latency_summary(latencies),
        "stored": stored,
        "duplicates": duplicates,
        "stored_without_embedding": unembedded,
    }


async def postgres_settings(engine: AsyncEngine) -> dict[str, Any]:
    """The server settings in force for the service's connections (its role, its options)."""
    values: dict[str, Any] = {}
    async with engine.connect() as connection:
        driver = await asyncpg_connection(connection)
        # hnsw.* settings exist once the vector library is loaded in the session.
        await driver.fetchval("SELECT '[1]'::vector <=> '[1]'::vector")
        for name in POSTGRES_SETTINGS:
            values[name] = await driver.fetchval("SELECT current_setting($1, true)", name)
        values["pgvector"] = await driver.fetchval(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        )
    return values


def size_label(rows: int) -> str:
    """10000 → 10k, 1000000 → 1m (as the command line spells sizes)."""
    for factor, suffix in ((1_000_000, "m"), (1_000, "k")):
        if rows % factor == 0:
            return f"{rows // factor}{suffix}"
    return str(rows)


def parse_sizes(spec: str) -> tuple[int, ...]:
    """`10k,100k,1m` → (10000, 100000, 1000000), increasing and without repeats."""
    sizes: set[int] = set()
    for part in spec.split(","):
        token = part.strip().lower()
        if not token:
            continue
        factor = {"k": 1_000, "m": 1_000_000}.get(token[-1], 1)
        number = token[:-1] if factor > 1 else token
        try:
            value = float(number) * factor
        except ValueError:
            raise ValueError(
                f"cannot read corpus size {part.strip()!r} (e.g. 10k, 100k, 1m)"
            ) from None
        if value < 1 or not math.isclose(value, round(value)):
            raise ValueError(f"corpus size {part.strip()!r} must be a positive whole number")
        sizes.add(round(value))
    if not sizes:
        raise ValueError("no corpus size given")
    return tuple(sorted(sizes))


def parse_concurrency(spec: str) -> tuple[int, ...]:
    """`1,8,32` → (1, 8, 32)."""
    try:
        levels = sorted({int(part) for part in spec.split(",") if part.strip()})
    except ValueError:
        raise ValueError(f"cannot read client counts {spec!r} (e.g. 1,8,32)") from None
    if not levels or levels[0] < 1:
        raise ValueError("client counts must be positive")
    return tuple(levels)


@dataclass(frozen=True)
class LoadResources:
    """What a load run holds for its whole length: the configured embedder (the sentence pool
    and the questions), owner connections for the bulk path, runtime connections for the
    searches."""

    embedder: Embedder
    owner_engine: AsyncEngine
    runtime_engine: AsyncEngine


@asynccontextmanager
async def load_resources(
    settings: Settings, *, load_connections: int, clients: int
) -> AsyncIterator[LoadResources]:
    """`LoadResources` for the (throwaway) database `settings` points at, closed on the way out:
    `load_connections` COPY streams (and one more), `clients` concurrent searches (and one
    more)."""
    if settings.migration_database_url is None or settings.database_url is None:
        raise ValueError("the load benchmark needs the runtime and the owner database URLs")
    embedder = build_embedder(embedder_config_from_settings(settings))
    owner_engine = create_engine(
        settings.migration_database_url.get_secret_value(),
        settings,
        pool_size=load_connections + 1,
        max_overflow=1,
    )
    runtime_engine = create_engine(
        settings.database_url.get_secret_value(),
        settings,
        pool_size=clients + 1,
        max_overflow=0,
    )
    try:
        yield LoadResources(embedder, owner_engine, runtime_engine)
    finally:
        await embedder.aclose()
        await owner_engine.dispose()
        await runtime_engine.dispose()
