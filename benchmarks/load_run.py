"""The load benchmark's run (see `load` for what it measures): every corpus size in turn, then
the heavy-user scenario on the largest. The scenario (`heavy`) builds on `load`'s measurements,
so the run that drives both lives here, above them.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine
from tqdm import tqdm

from benchmarks.bulk import BulkLoader, BulkSettings, build_owner_graphs
from benchmarks.corpus import Corpus, build_pool
from benchmarks.heavy import load_heavy_user, measure_heavy_user
from benchmarks.load import (
    RECALL_DEPTH,
    SEARCH_LIMIT,
    LevelResult,
    LoadOptions,
    LoadRun,
    SearchBench,
    SizeResult,
    _agreement,
    _plan_json,
    _say,
    api_ingest,
    embed_pool,
    latency_summary,
    load_resources,
    postgres_settings,
    sample_search_queries,
    size_label,
    vector_fidelity,
    vector_recall,
)
from benchmarks.rawsql import FusionStatement, asyncpg_connection, service_search_params
from benchmarks.server import loopback_server
from service.config import Settings
from service.memories.schemas import SearchRequest
from service.providers import Embedder


async def run_load(settings: Settings, options: LoadOptions) -> LoadRun:
    """The whole benchmark against the (throwaway) database `settings` points at."""
    async with load_resources(
        settings, load_connections=options.load_connections, clients=max(options.concurrency)
    ) as held:
        return await _run(settings, options, held.embedder, held.owner_engine, held.runtime_engine)


async def _run(
    settings: Settings,
    options: LoadOptions,
    embedder: Embedder,
    owner_engine: AsyncEngine,
    runtime_engine: AsyncEngine,
) -> LoadRun:
    pool = build_pool(options.pool_size, options.shape.seed)
    corpus = Corpus(options.shape, pool)
    pool_vectors, pool_seconds = await embed_pool(
        embedder, [s.text for s in pool], progress=options.progress
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
    await loader.check_privileges()
    fidelity = await vector_fidelity(embedder, loader, corpus, pool_vectors)
    statement = FusionStatement(runtime_engine.dialect)
    results: list[SizeResult] = []
    heavy = None
    for size in options.sizes:
        if options.heavy_user and size == options.sizes[-1]:
            heavy = await load_heavy_user(loader, corpus, options.heavy_user, options)
        results.append(
            await _measure_size(
                settings, options, embedder, corpus, loader, runtime_engine, statement, size
            )
        )
    heavy_result = None
    if heavy is not None:
        heavy_result = await measure_heavy_user(
            settings, options, embedder, corpus, runtime_engine, statement, heavy
        )
    return LoadRun(
        embedding_model=embedder.model_name,
        pool={
            "sentences": len(pool),
            "embed_seconds": pool_seconds,
            "texts_per_second": len(pool) / pool_seconds if pool_seconds > 0 else None,
        },
        vectors={"noise": options.vector_noise, "fidelity": fidelity},
        postgres=await postgres_settings(runtime_engine),
        sizes=results,
        heavy_user=heavy_result,
        server={
            "uvicorn_workers": settings.workers,
            "query_embedding_cache_size": settings.query_embedding_cache_size,
            "access_log": False,
            "db_pool_size": settings.db_pool_size,
            "db_max_overflow": settings.db_max_overflow,
            "bind": "127.0.0.1",
        },
    )


async def _measure_size(
    settings: Settings,
    options: LoadOptions,
    embedder: Embedder,
    corpus: Corpus,
    loader: BulkLoader,
    runtime_engine: AsyncEngine,
    statement: FusionStatement,
    size: int,
) -> SizeResult:
    label = size_label(size)
    size_started = time.perf_counter()
    shape = corpus.shape
    bar = tqdm(
        total=shape.total_rows(size) - loader.rows_loaded,
        desc=f"{label}: COPY",
        unit="row",
        unit_scale=True,
        file=sys.stderr,
        disable=not options.progress,
    )

    def copied(rows: int) -> None:
        bar.update(rows)
        if bar.n >= bar.total:
            # Closed here, so its rate is the COPY's, not COPY + VACUUM + owner indexes.
            bar.close()

    try:
        step = await loader.grow_to(size, copied)
    finally:
        bar.close()
    # The heavy user, loaded with the last size, gets its own indexes here too.
    await build_owner_graphs(loader, settings, step)
    _say(
        options,
        f"{label}: {step.total_rows} rows; COPY {step.copy_seconds:.0f} s, VACUUM ANALYZE "
        f"{step.vacuum_analyze_seconds:.0f} s, {step.owner_indexes_built} owner indexes "
        f"{step.owner_index_seconds:.0f} s",
    )

    queries = await sample_search_queries(embedder, corpus, loader.users_loaded, options)
    arguments = []
    for query in queries:
        params = await service_search_params(
            settings,
            query.tenant_id,
            query.user_id,
            SearchRequest(query=query.text, limit=SEARCH_LIMIT),
            query.embedding,
        )
        arguments.append(statement.arguments(query.tenant_id, params))
    bench = SearchBench(settings, options, runtime_engine, queries, arguments, statement)
    await bench.warm_caches()
    load_average = {"before_search": os.getloadavg()}

    levels: dict[int, dict[str, LevelResult]] = {}
    plans: dict[str, Any] = {}
    api: dict[str, Any] | None = None
    async with loopback_server(settings) as server:
        for clients in options.concurrency:
            _say(options, f"{label}: {clients} client(s): service over HTTP, then raw SQL")
            service = await bench.service_level(server.base_url, clients)
            raw, (generic, custom) = await bench.raw_level(clients)
            levels[clients] = {"service": service, "raw_sql": raw}
            plans[f"raw_prepared_plans_{clients}_clients"] = {"generic": generic, "custom": custom}
        load_average["after_search"] = os.getloadavg()
        _say(options, f"{label}: the context call, 1 client")
        context = await bench.context_level(server.base_url, 1)
        if options.api_rows:
            _say(options, f"{label}: {options.api_rows} memories through POST …/memories/batch")
            api, tenants = await api_ingest(
                server.base_url, settings, corpus, label, options.api_rows
            )
            # Every size is measured on the synthetic corpus alone.
            await loader.delete_tenants(tenants)

    _say(options, f"{label}: recall@{RECALL_DEPTH} against an exact scan")
    recall = await vector_recall(
        statement, runtime_engine, settings, queries[: options.recall_queries]
    )
    async with runtime_engine.connect() as connection:
        driver = await asyncpg_connection(connection)
        plans["hybrid_default"] = _plan_json(
            await statement.explain(driver, queries[0].tenant_id, arguments[0])
        )
    first = options.concurrency[0]
    embed_ms = [query.embed_ms for query in queries]
    return SizeResult(
        step=step,
        queries=len(queries),
        query_embedding_ms=latency_summary(embed_ms),
        levels=levels,
        recall=recall,
        plans=plans,
        agreement=_agreement(levels[first]["service"], levels[first]["raw_sql"], queries),
        api_ingest=api,
        context=context,
        seconds=time.perf_counter() - size_started,
        load_average=load_average,
    )
