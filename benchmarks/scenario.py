"""`mneme bench load --scenario realistic`: owners of 1k, 10k and 100k memories written the way
the write path writes them (see `scenario_corpus`), among other users and tenants, measured
through the HTTP service.

Per size S, in this order:
1. build the owner of S memories (its tenant's organization memory, and 2 x S memories of other
   users of that tenant and of other tenants), COPY them through the bulk path (vectors from the
   embedded pool), VACUUM ANALYZE, then build the largest owners' own vector indexes, as a
   service process with the owner role does after a load; the database keeps every smaller
   size's owners, so each owner is a minority of the table;
2. draw the owner's questions — generic, about one memory, the source's own — and embed each;
3. under uvicorn on loopback: every question once (so each later search finds its vector in the
   service's cache); a set of other questions once each, never seen before, so each search
   embeds its question; then the search at each client count, the bare statement at one client,
   the context call at one client, and API ingest of fresh memories (deleted afterwards);
4. recall@10 of the service's top 10 (one client) against the reference ranking
   (`rawsql.reference_statement`), run by the same process on the same data.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker
from tqdm import tqdm

from benchmarks.bulk import (
    MEMORY_COLUMNS,
    BulkSettings,
    BulkStep,
    MemoryTable,
    build_owner_graphs,
    vector_payloads,
)
from benchmarks.corpus import noisy_vectors
from benchmarks.datasets import load_dataset
from benchmarks.load import (
    BENCH_SERVICE,
    FIDELITY_SAMPLE,
    REQUEST_TIMEOUT_SECONDS,
    SEARCH_LIMIT,
    IngestBatch,
    LevelResult,
    LoadBenchmarkError,
    Query,
    SearchBench,
    _plan_json,
    embed_pool,
    latency_summary,
    load_resources,
    post_batches,
    postgres_settings,
    size_label,
)
from benchmarks.rawsql import (
    FusionStatement,
    ReferenceStatement,
    asyncpg_connection,
    learnt_arguments,
    reference_statement,
    service_search_params,
)
from benchmarks.scenario_corpus import (
    ScenarioOwner,
    ScenarioQuestion,
    ScenarioRow,
    ScenarioShape,
    SourceText,
    build_organization,
    build_user,
    describe_source,
    distinct_token_ratio,
    sample_questions,
)
from benchmarks.server import loopback_server
from service.auth.tokens import mint_dev_token
from service.config import Settings
from service.context.service import MEMORY_SECTIONS
from service.db import tenant_transaction
from service.memories.fusion import FusionRepository, SearchParams
from service.memories.schemas import BATCH_MAX, SearchRequest
from service.providers import Embedder

SCENARIO_COLUMNS = (*MEMORY_COLUMNS, "speaker", "source_thread_id")
# Rows per COPY chunk (one transaction each), so a 100k owner streams while it is encoded.
ROWS_PER_CHUNK = 5_000
RECALL_DEPTH = 10


@dataclass(frozen=True)
class ScenarioOptions:
    sizes: tuple[int, ...]
    dataset: Path
    shape: ScenarioShape
    reference: str = "exact"
    vector_noise: float = 0.15
    concurrency: tuple[int, ...] = (1, 8, 32)
    requests: int = 1000
    level_seconds: float = 30.0
    queries: int = 200
    recall_queries: int = 100
    fresh_queries: int = 100
    api_rows: int = 2000
    load_connections: int = 2
    progress: bool = True


@dataclass
class ScenarioSize:
    label: str
    step: BulkStep
    build_seconds: float
    owner: dict[str, Any]
    questions: dict[str, Any]
    query_embedding_ms: dict[str, float | None]
    levels: dict[int, LevelResult]
    raw: LevelResult
    fresh: LevelResult
    context: LevelResult
    recall: dict[str, Any]
    context_recall: dict[str, Any]
    """R@10 of a context's memory sections against the reference (`context_recall`)."""
    api_ingest: dict[str, Any] | None
    plan: dict[str, Any] | None
    seconds: float
    load_average: dict[str, tuple[float, float, float]] = field(default_factory=dict)


@dataclass
class ScenarioRun:
    embedding_model: str
    source: dict[str, Any]
    pool: dict[str, Any]
    fidelity: dict[str, Any]
    postgres: dict[str, Any]
    sizes: list[ScenarioSize]
    server: dict[str, Any]


def _say(options: ScenarioOptions, message: str) -> None:
    if options.progress:
        sys.stderr.write(message + "\n")


class ScenarioLoader:
    """COPYs whole owners into the memory table, with vectors derived from the sentence pool."""

    def __init__(
        self,
        table: MemoryTable,
        pool_vectors: npt.NDArray[np.float32],
        noise: float,
        seed: int,
        model: str,
    ) -> None:
        self.table = table
        self._pool = pool_vectors
        self._noise = noise
        self._seed = seed
        self._model = model

    def vectors(self, rows: Sequence[ScenarioRow], key: str) -> npt.NDArray[np.float32]:
        """Each row's vector: the normalised sum of its pool texts' vectors, plus noise."""
        base = np.zeros((len(rows), self._pool.shape[1]), dtype=np.float32)
        for n, row in enumerate(rows):
            base[n] = self._pool[list(row.pool)].sum(axis=0)
        base /= np.linalg.norm(base, axis=1, keepdims=True)
        return noisy_vectors(base, self._noise, key, self._seed)

    def records(self, rows: Sequence[ScenarioRow], key: str) -> list[tuple[Any, ...]]:
        payloads = vector_payloads(self.vectors(rows, key))
        return [
            (
                row.tenant_id,
                row.id,
                "user" if row.user_id is not None else "org",
                row.user_id,
                row.kind,
                row.category,
                row.text,
                payload,
                self._model,
                row.confidence,
                row.lifecycle,
                row.lifecycle == "proposed",
                row.event_at,
                row.created_at,
                row.created_at,
                row.speaker,
                row.source_thread_id,
            )
            for row, payload in zip(rows, payloads, strict=True)
        ]

    async def load(
        self,
        owners: Sequence[ScenarioOwner],
        tenants: Sequence[str],
        progress: Callable[[int], object],
    ) -> tuple[float, float]:
        """COPY the owners (their tenants and users first), then VACUUM ANALYZE; the seconds of
        each."""
        started = time.perf_counter()
        users = sorted({(o.tenant_id, o.user_id) for o in owners if o.user_id is not None})
        async with self.table.connection() as connection, connection.transaction():
            await connection.copy_records_to_table(
                "tenant", records=[(tenant,) for tenant in tenants], columns=["id"]
            )
            await connection.copy_records_to_table(
                "user_account", records=users, columns=["tenant_id", "id"]
            )
        chunks: list[Callable[[], list[tuple[Any, ...]]]] = []
        for owner in owners:
            key = f"{owner.tenant_id}-{owner.user_id or 'org'}"
            for start in range(0, len(owner.rows), ROWS_PER_CHUNK):
                rows = owner.rows[start : start + ROWS_PER_CHUNK]
                chunks.append(partial(self.records, rows, f"{key}-{start}"))
        await self.table.copy_chunks(chunks, SCENARIO_COLUMNS, progress)
        copy_seconds = time.perf_counter() - started
        started = time.perf_counter()
        await self.table.vacuum_analyze()
        return copy_seconds, time.perf_counter() - started


def build_size(
    source: SourceText, shape: ScenarioShape, label: str, size: int, *, first: bool = False
) -> tuple[ScenarioOwner, list[ScenarioOwner], list[str]]:
    """The measured owner, every owner a size adds (it included), and the new tenants; the
    `first` size also brings the shape's small tenants."""
    tenant = shape.tenant_id(label)
    owner = build_user(source, tenant, shape.owner_id(label), size, shape.seed)
    owners = [owner, build_organization(source, tenant, shape.org_memories(size), shape.seed)]
    tenants = [tenant]
    for tenant_id, user_id, first_user in shape.background(label, size):
        if first_user:
            tenants.append(tenant_id)
            owners.append(build_organization(source, tenant_id, shape.org_per_tenant, shape.seed))
        owners.append(
            build_user(source, tenant_id, user_id, shape.background_user_memories, shape.seed)
        )
    for tenant_id, users in shape.small() if first else ():
        tenants.append(tenant_id)
        owners.append(
            build_organization(source, tenant_id, shape.small_tenant_org_memories, shape.seed)
        )
        owners.extend(
            build_user(source, tenant_id, user_id, shape.small_tenant_user_memories, shape.seed)
            for user_id in users
        )
    return owner, owners, tenants


async def _queries(
    embedder: Embedder, owner: ScenarioOwner, questions: Sequence[ScenarioQuestion]
) -> list[Query]:
    """The owner's questions, each embedded alone (timed)."""
    queries = []
    for question in questions:
        started = time.perf_counter()
        vector = await embedder.embed_query(question.text)
        queries.append(
            Query(
                owner.tenant_id,
                owner.user_id or "",
                question.text,
                question.targets,
                vector,
                (time.perf_counter() - started) * 1000,
            )
        )
    return queries


async def _params(settings: Settings, query: Query) -> SearchParams:
    return await service_search_params(
        settings,
        query.tenant_id,
        query.user_id,
        SearchRequest(query=query.text, limit=SEARCH_LIMIT),
        query.embedding,
    )


async def _arguments(
    settings: Settings,
    queries: Sequence[Query],
    build: Callable[[str, Any], list[Any]],
) -> list[list[Any]]:
    return [build(query.tenant_id, await _params(settings, query)) for query in queries]


async def _sent_arguments(
    settings: Settings,
    runtime_engine: AsyncEngine,
    queries: Sequence[Query],
    statement: FusionStatement,
) -> list[list[Any]]:
    """Each question's arguments for the statement the service itself sends for it
    (`FusionStatement.learn`): for an owner with vector indexes of its own, the text that
    reads them, so the bare statement is the service's own rather than the statement of any
    owner that the parameters alone build."""
    searches = [(query.tenant_id, await _params(settings, query)) for query in queries]
    return await learnt_arguments(runtime_engine, statement, searches)


async def reference_recall(
    reference: ReferenceStatement,
    runtime_engine: AsyncEngine,
    queries: Sequence[Query],
    arguments: Sequence[Sequence[Any]],
    service: LevelResult,
    kinds: Sequence[str],
) -> dict[str, Any]:
    """For each question the service answered at one client: how many of the reference's top
    10 the service's top 10 holds, and whether a target memory is in either."""
    recalls: dict[str, list[float]] = {}
    service_found = reference_found = targeted = 0
    latencies: list[float] = []
    async with runtime_engine.connect() as connection:
        driver = await asyncpg_connection(connection)
        for n, (query, values) in enumerate(zip(queries, arguments, strict=True)):
            ranking = service.rankings.get(n)
            if ranking is None:
                continue
            started = time.perf_counter()
            exact = [str(i) for i in await reference.ids(driver, query.tenant_id, values)]
            latencies.append((time.perf_counter() - started) * 1000)
            truth = set(exact[:RECALL_DEPTH])
            got = set(ranking[:RECALL_DEPTH])
            recall = len(got & truth) / len(truth) if truth else 1.0
            recalls.setdefault(kinds[n], []).append(recall)
            if query.targets:
                targeted += 1
                targets = {str(target) for target in query.targets}
                service_found += bool(targets & got)
                reference_found += bool(targets & truth)
    every = [value for values in recalls.values() for value in values]
    return {
        "reference": reference.name,
        "queries": len(every),
        "recall_at_10": sum(every) / len(every) if every else None,
        "recall_at_10_min": min(every, default=None),
        "queries_below_1": sum(1 for value in every if value < 1.0),
        "recall_at_10_by_kind": {
            kind: sum(values) / len(values) for kind, values in sorted(recalls.items())
        },
        "targeted_queries": targeted,
        "target_in_service_top10": service_found / targeted if targeted else None,
        "target_in_reference_top10": reference_found / targeted if targeted else None,
        "reference_ms": latency_summary(latencies),
    }


async def context_recall(
    settings: Settings,
    reference_name: str,
    runtime_engine: AsyncEngine,
    queries: Sequence[Query],
) -> dict[str, Any]:
    """For each question, a context's memory sections (the organization's facts, the user's
    facts, the user's episodes, with a context's default lifecycle) ranked by the fusion
    statement as a context runs it, all three in one statement: how many of each section's
    reference top 10, run on that section's filter alone, it holds. The context's MMR choice
    among a section's hits comes after the ranking and is left out, as the search's recall
    leaves it out."""
    requests = {
        name: {"scopes": scopes, "kinds": kinds, "lifecycles": ["confirmed"]}
        for name, (scopes, kinds) in MEMORY_SECTIONS.items()
    }
    # One reference per section: a statement is prepared for one filter shape.
    references = {
        name: reference_statement(reference_name, runtime_engine.dialect) for name in requests
    }
    sessionmaker = async_sessionmaker(runtime_engine, expire_on_commit=False)
    recalls: dict[str, list[float]] = {name: [] for name in requests}
    for query in queries:
        params = [
            await service_search_params(
                settings,
                query.tenant_id,
                query.user_id,
                SearchRequest(query=query.text, limit=RECALL_DEPTH, **request),
                query.embedding,
            )
            for request in requests.values()
        ]
        async with tenant_transaction(sessionmaker, query.tenant_id) as session:
            sections = await FusionRepository(session, query.tenant_id).search_sections(params)
        async with runtime_engine.connect() as connection:
            driver = await asyncpg_connection(connection)
            for name, section_params, hits in zip(requests, params, sections, strict=True):
                reference = references[name]
                arguments = reference.arguments(query.tenant_id, section_params)
                truth = {str(i) for i in await reference.ids(driver, query.tenant_id, arguments)}
                got = {str(hit.memory.id) for hit in hits[:RECALL_DEPTH]}
                recalls[name].append(len(got & truth) / len(truth) if truth else 1.0)
    return {
        "reference": reference_name,
        "queries": len(queries),
        "sections": {
            name: {
                "recall_at_10": sum(values) / len(values) if values else None,
                "recall_at_10_min": min(values, default=None),
            }
            for name, values in recalls.items()
        },
    }


async def api_ingest(
    base_url: str,
    settings: Settings,
    source: SourceText,
    shape: ScenarioShape,
    label: str,
    rows: int,
) -> tuple[dict[str, Any], str]:
    """Store a fresh user's `rows` memories (facts, episodes, turns with speaker and thread)
    through `POST …/memories/batch`; the figures and the tenant to delete."""
    tenant = f"bench-real-api-{label}"
    owner = build_user(source, tenant, "api-user", rows, shape.seed)
    # A memory names a thread of its own user as its source: the sessions' threads are made
    # first (not timed: they are not memory writes).
    threads = await create_threads(
        base_url,
        settings,
        tenant,
        "api-user",
        sorted({str(row.source_thread_id) for row in owner.rows if row.source_thread_id}),
    )
    batches = [
        IngestBatch(
            tenant,
            "api-user",
            [
                {
                    "kind": row.kind,
                    "category": row.category,
                    "text": row.text,
                    "confidence": row.confidence,
                    "lifecycle": row.lifecycle,
                    "speaker": row.speaker,
                    "source_thread_id": (
                        None if row.source_thread_id is None else threads[str(row.source_thread_id)]
                    ),
                    "event_at": None if row.event_at is None else row.event_at.isoformat(),
                }
                for row in owner.rows[start : start + BATCH_MAX]
            ],
        )
        for start in range(0, len(owner.rows), BATCH_MAX)
    ]
    return await post_batches(base_url, settings, batches), tenant


async def create_threads(
    base_url: str, settings: Settings, tenant: str, user: str, sessions: Sequence[str]
) -> dict[str, str]:
    """One thread of `user` per session; the thread id each session got."""
    token = mint_dev_token(settings, tenant_id=tenant, user_id=BENCH_SERVICE, service=True)
    threads: dict[str, str] = {}
    async with httpx.AsyncClient(base_url=base_url, timeout=REQUEST_TIMEOUT_SECONDS) as client:
        for session in sessions:
            response = await client.post(
                f"/v1/users/{user}/threads",
                headers={"Authorization": f"Bearer {token}"},
                json={"title": f"session {session[:8]}"},
            )
            if response.status_code != 201:
                raise LoadBenchmarkError(
                    f"POST …/threads answered {response.status_code}: {response.text[:300]}"
                )
            threads[session] = str(response.json()["id"])
    return threads


async def vector_fidelity(
    embedder: Embedder, loader: ScenarioLoader, owner: ScenarioOwner
) -> dict[str, Any]:
    """How close the derived vectors are to the rows' true embeddings, on a sample."""
    rows = owner.rows[:: max(1, len(owner.rows) // FIDELITY_SAMPLE)][:FIDELITY_SAMPLE]
    true = np.asarray(await embedder.embed([row.text for row in rows]), dtype=np.float32)
    derived = loader.vectors(rows, "fidelity")
    cosines = np.sum(true * derived, axis=1)
    return {
        "sample_rows": len(rows),
        "cosine_true_vs_derived": float(np.mean(cosines)),
        "cosine_true_vs_derived_p10": float(np.percentile(cosines, 10)),
    }


async def run_scenario(settings: Settings, options: ScenarioOptions) -> ScenarioRun:
    """The realistic scenario against the (throwaway) database `settings` points at."""
    source = SourceText(load_dataset(options.dataset, "locomo", image_captions=False))
    async with load_resources(
        settings, load_connections=options.load_connections, clients=max(options.concurrency)
    ) as held:
        return await _run(
            settings, options, source, held.embedder, held.owner_engine, held.runtime_engine
        )


async def _run(
    settings: Settings,
    options: ScenarioOptions,
    source: SourceText,
    embedder: Embedder,
    owner_engine: AsyncEngine,
    runtime_engine: AsyncEngine,
) -> ScenarioRun:
    pool_vectors, pool_seconds = await embed_pool(embedder, source.pool, progress=options.progress)
    table = MemoryTable(
        owner_engine,
        BulkSettings(
            connections=options.load_connections,
            vector_noise=options.vector_noise,
            embedding_model=embedder.model_name,
        ),
    )
    await table.check_privileges()
    loader = ScenarioLoader(
        table, pool_vectors, options.vector_noise, options.shape.seed, embedder.model_name
    )
    reference = reference_statement(options.reference, runtime_engine.dialect)
    results: list[ScenarioSize] = []
    fidelity: dict[str, Any] = {}
    total_rows = 0
    for size in options.sizes:
        result, owner = await _measure_size(
            settings, options, source, embedder, loader, runtime_engine, reference, size, total_rows
        )
        total_rows = result.step.total_rows
        if not fidelity:
            fidelity = await vector_fidelity(embedder, loader, owner)
        results.append(result)
    return ScenarioRun(
        embedding_model=embedder.model_name,
        source={"path": str(options.dataset), **describe_source(source)},
        pool={
            "texts": len(source.pool),
            "embed_seconds": pool_seconds,
            "texts_per_second": len(source.pool) / pool_seconds if pool_seconds else None,
        },
        fidelity={"noise": options.vector_noise, **fidelity},
        postgres=await postgres_settings(runtime_engine),
        sizes=results,
        server={
            "uvicorn_workers": settings.workers,
            "query_embedding_cache_size": settings.query_embedding_cache_size,
            "db_pool_size": settings.db_pool_size,
            "db_max_overflow": settings.db_max_overflow,
            "bind": "127.0.0.1",
        },
    )


def _owner_summary(owner: ScenarioOwner) -> dict[str, Any]:
    kinds: dict[str, int] = {}
    categories: dict[str, int] = {}
    for row in owner.rows:
        kinds[row.kind] = kinds.get(row.kind, 0) + 1
        categories[row.category] = categories.get(row.category, 0) + 1
    sample = [row.text for row in owner.rows[:1000]]
    return {
        "tenant_id": owner.tenant_id,
        "user_id": owner.user_id,
        "memories": len(owner.rows),
        "kinds": kinds,
        "categories": dict(sorted(categories.items())),
        "threads": len({row.source_thread_id for row in owner.rows if row.source_thread_id}),
        "distinct_token_ratio_first_1000": distinct_token_ratio(sample),
    }


async def _measure_size(
    settings: Settings,
    options: ScenarioOptions,
    source: SourceText,
    embedder: Embedder,
    loader: ScenarioLoader,
    runtime_engine: AsyncEngine,
    reference: ReferenceStatement,
    size: int,
    rows_before: int,
) -> tuple[ScenarioSize, ScenarioOwner]:
    """One size: load it, then measure its owner; the figures and the owner."""
    label = size_label(size)
    shape = options.shape
    size_started = time.perf_counter()
    _say(options, f"{label}: building the owner, its organization and the other users")
    started = time.perf_counter()
    owner, owners, tenants = await asyncio.to_thread(
        partial(build_size, source, shape, label, size, first=rows_before == 0)
    )
    build_seconds = time.perf_counter() - started
    rows = sum(len(o.rows) for o in owners)
    step = BulkStep(
        user_memories=size,
        total_rows=rows_before + rows,
        rows_added=rows,
        tenants_added=len(tenants),
        users_added=sum(1 for o in owners if o.user_id is not None),
    )
    with tqdm(
        total=rows,
        desc=f"{label}: COPY",
        unit="row",
        unit_scale=True,
        file=sys.stderr,
        disable=not options.progress,
    ) as bar:
        step.copy_seconds, step.vacuum_analyze_seconds = await loader.load(
            owners, tenants, bar.update
        )
    # The served app's own refresh is off (`owner_vector_index_refresh_seconds` 0).
    await build_owner_graphs(loader.table, settings, step)
    _say(
        options,
        f"{label}: {step.total_rows} rows; build {build_seconds:.0f} s, COPY "
        f"{step.copy_seconds:.0f} s, VACUUM ANALYZE {step.vacuum_analyze_seconds:.0f} s, "
        f"{step.owner_indexes_built} owner indexes {step.owner_index_seconds:.0f} s",
    )

    asked = sample_questions(owner, options.queries, shape.seed)
    fresh_questions = [
        q
        for q in sample_questions(owner, options.fresh_queries * 2, shape.seed, salt="fresh")
        if q.text not in {a.text for a in asked}
    ][: options.fresh_queries]
    queries = await _queries(embedder, owner, asked)
    fresh = await _queries(embedder, owner, fresh_questions)
    statement = FusionStatement(runtime_engine.dialect)
    arguments = await _sent_arguments(settings, runtime_engine, queries, statement)
    reference_arguments = await _arguments(settings, queries, reference.arguments)
    bench = SearchBench(settings, options, runtime_engine, queries, arguments, statement)
    fresh_arguments = await _sent_arguments(settings, runtime_engine, fresh, statement)
    fresh_bench = SearchBench(settings, options, runtime_engine, fresh, fresh_arguments, statement)
    await bench.warm_caches()
    load_average = {"before_search": os.getloadavg()}
    levels: dict[int, LevelResult] = {}
    api: dict[str, Any] | None = None
    async with loopback_server(settings) as server:
        _say(options, f"{label}: every question once (its vector cached), then never-seen ones")
        await bench.service_level(server.base_url, 1, warm_up_per_client=0, total=len(queries))
        fresh_level = await fresh_bench.service_level(
            server.base_url, 1, warm_up_per_client=0, total=len(fresh)
        )
        for clients in options.concurrency:
            _say(options, f"{label}: {clients} client(s), search over HTTP")
            levels[clients] = await bench.service_level(server.base_url, clients)
        load_average["after_search"] = os.getloadavg()
        _say(options, f"{label}: the bare statement and the context call, 1 client")
        raw, _ = await bench.raw_level(1)
        context = await bench.context_level(server.base_url, 1)
        if options.api_rows:
            _say(options, f"{label}: {options.api_rows} memories through POST …/memories/batch")
            api, api_tenant = await api_ingest(
                server.base_url, settings, source, shape, label, options.api_rows
            )
            await loader.table.delete_tenants([api_tenant])

    _say(options, f"{label}: recall@{RECALL_DEPTH} against the {reference.name} reference")
    first = levels[options.concurrency[0]]
    recall_count = min(options.recall_queries, len(queries))
    recall = await reference_recall(
        reference,
        runtime_engine,
        queries[:recall_count],
        reference_arguments[:recall_count],
        first,
        [q.kind for q in asked[:recall_count]],
    )
    sections_recall = await context_recall(
        settings, reference.name, runtime_engine, queries[:recall_count]
    )
    async with runtime_engine.connect() as connection:
        driver = await asyncpg_connection(connection)
        plan = _plan_json(await statement.explain(driver, queries[0].tenant_id, arguments[0]))
    kinds: dict[str, int] = {}
    for question in asked:
        kinds[question.kind] = kinds.get(question.kind, 0) + 1
    result = ScenarioSize(
        label=label,
        step=step,
        build_seconds=build_seconds,
        owner=_owner_summary(owner),
        questions={
            "asked": len(asked),
            "by_kind": dict(sorted(kinds.items())),
            "never_seen": len(fresh),
        },
        query_embedding_ms=latency_summary([q.embed_ms for q in (*queries, *fresh)]),
        levels=levels,
        raw=raw,
        fresh=fresh_level,
        context=context,
        recall=recall,
        context_recall=sections_recall,
        api_ingest=api,
        plan=plan,
        seconds=time.perf_counter() - size_started,
        load_average=load_average,
    )
    return result, owner
