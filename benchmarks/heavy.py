"""The heavy user: one user who owns a large share of the corpus (e.g. 100k of 1M memories).

Every other user of the load benchmark owns 250 memories, whose vectors a search sorts by their
exact distance. A user with 100k memories changes that arithmetic: the exact sort reads and
compares 100k vectors, so each kind of memory the user holds enough of
(`MNEME_OWNER_VECTOR_INDEX_FROM`) gets an HNSW index of the user's own, and its searches walk
those. This module loads such a user (its own tenant, loaded with the largest corpus size, after
which the largest owners' indexes are built), then measures that user's searches: the service
over HTTP and the bare statement at one client, and the statement the service sends for the user
under each vector strategy — as planned, the exact sort, and the walk of the user's indexes
under several `hnsw.*` settings — for latency (hybrid, as the API searches) and for vector
recall@10 against the exact scan.
"""

from __future__ import annotations

import random
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from benchmarks.bulk import BulkLoader
from benchmarks.corpus import Corpus, MemoryRow
from benchmarks.load import (
    SEARCH_LIMIT,
    LoadOptions,
    Query,
    SearchBench,
    _agreement,
    _overlap,
    _plan_json,
    latency_summary,
    vector_recall,
)
from benchmarks.rawsql import (
    AS_PLANNED,
    EXACT,
    FusionStatement,
    Variant,
    asyncpg_connection,
    learnt_arguments,
    service_search_params,
)
from benchmarks.server import loopback_server
from service.config import Settings
from service.memories.schemas import SearchRequest
from service.providers import Embedder

HEAVY_TENANT = "bench-heavy-00000"
HEAVY_USER = "user-heavy"
# Questions, and searches per path at one client (fewer than the corpus levels: a heavy user's
# search reads far more rows), for at least this long.
HEAVY_QUERIES = 50
HEAVY_REQUESTS = 300
HEAVY_LEVEL_SECONDS = 60.0
# Questions each vector strategy's hybrid latency is measured on, and the time that may take
# (a heavy user's hybrid search takes seconds on a loaded machine: see docs/benchmarks.md).
STRATEGY_QUERIES = 60
STRATEGY_SECONDS = 90.0


def hnsw_variant(name: str, *settings: str) -> Variant:
    """The walk of the user's own indexes under `settings` for its transaction, made after the
    service's own settings for the search (`rawsql.FusionStatement`), so they override those."""
    return Variant(name, settings)


# AS_PLANNED walks as the service does (`MNEME_HNSW_*`, and the candidate list a search sets
# for an owner's own indexes); the others name the order and change one knob at a time
# (ef_search and max_scan_tuples: the service's).
STRICT = "SET LOCAL hnsw.iterative_scan = strict_order"
RELAXED = hnsw_variant("HNSW relaxed", "SET LOCAL hnsw.iterative_scan = relaxed_order")
STRATEGIES: tuple[Variant, ...] = (
    AS_PLANNED,
    hnsw_variant("HNSW strict", STRICT),
    hnsw_variant("HNSW strict, ef_search 40", STRICT, "SET LOCAL hnsw.ef_search = 40"),
    hnsw_variant("HNSW strict, ef_search 200", STRICT, "SET LOCAL hnsw.ef_search = 200"),
    RELAXED,
    hnsw_variant(
        "HNSW relaxed, ef_search 40",
        "SET LOCAL hnsw.iterative_scan = relaxed_order",
        "SET LOCAL hnsw.ef_search = 40",
    ),
    hnsw_variant(
        "HNSW strict, max_scan_tuples 5000", STRICT, "SET LOCAL hnsw.max_scan_tuples = 5000"
    ),
    hnsw_variant("HNSW no iterative scan", "SET LOCAL hnsw.iterative_scan = off"),
)


# Whose hybrid latency is measured: the vector side is a small part of it (the lexical side
# reads every matching memory of the user), so the vector-only knobs are left to the recall
# measurement, which runs the statement in vector mode under every strategy.
HYBRID_STRATEGIES: tuple[Variant, ...] = (AS_PLANNED, STRATEGIES[1], RELAXED)


@dataclass(frozen=True)
class HeavyUser:
    """The heavy user's rows, and how long their COPY took."""

    rows: list[MemoryRow]
    copy_seconds: float


def _say(options: LoadOptions, message: str) -> None:
    if options.progress:
        sys.stderr.write(message + "\n")


async def load_heavy_user(
    loader: BulkLoader, corpus: Corpus, memories: int, options: LoadOptions
) -> HeavyUser:
    """COPY the heavy user's memories, to be counted by the next `grow_to` and given indexes
    of their own by the owners' index build after it."""
    _say(options, f"heavy user: {memories} memories of {HEAVY_USER} ({HEAVY_TENANT})")
    rows = corpus.heavy_user_rows(HEAVY_TENANT, HEAVY_USER, memories)
    seconds = await loader.add_owner(HEAVY_TENANT, HEAVY_USER, rows)
    return HeavyUser(rows, seconds)


async def _heavy_queries(
    embedder: Embedder, corpus: Corpus, heavy: HeavyUser, count: int, seed: int
) -> list[Query]:
    """Questions the heavy user asks about random memories of theirs, each embedded alone."""
    rng = random.Random(f"heavy-queries-{seed}")  # noqa: S311 - reproducible, not secret
    queries: list[Query] = []
    for _ in range(count):
        row = rng.choice(heavy.rows)
        text = corpus.question(row, rng)
        started = time.perf_counter()
        vector = await embedder.embed_query(text)
        queries.append(
            Query(
                HEAVY_TENANT,
                HEAVY_USER,
                text,
                (row.id,),
                vector,
                (time.perf_counter() - started) * 1000,
            )
        )
    return queries


async def strategy_latency(
    statement: FusionStatement,
    runtime_engine: AsyncEngine,
    queries: Sequence[Query],
    arguments: Sequence[Sequence[Any]],
    variants: Sequence[Variant],
) -> dict[str, Any]:
    """The default hybrid search (as the API runs it) under each vector strategy: latency, its
    plan, and how many of its top 10 the same search with the exact vector sort also returns.
    Stops taking new questions after `STRATEGY_SECONDS`."""
    figures: dict[str, dict[str, list[float]]] = {
        variant.name: {"ms": [], "top10_as_exact": []} for variant in (EXACT, *variants)
    }
    plans: dict[str, Any] = {}
    async with runtime_engine.connect() as connection:
        driver = await asyncpg_connection(connection)
        deadline = time.perf_counter() + STRATEGY_SECONDS
        for query, values in zip(queries, arguments, strict=True):
            if time.perf_counter() > deadline:
                break
            exact: list[uuid.UUID] = []
            for variant in (EXACT, *variants):
                started = time.perf_counter()
                ids = await statement.ids(driver, query.tenant_id, values, variant)
                figures[variant.name]["ms"].append((time.perf_counter() - started) * 1000)
                exact = exact or ids
                figures[variant.name]["top10_as_exact"].append(_overlap(ids, exact, SEARCH_LIMIT))
        for variant in (EXACT, *variants):
            plans[variant.name] = _plan_json(
                await statement.explain(driver, queries[0].tenant_id, arguments[0], variant)
            )
    return {
        name: {
            "queries": len(values["ms"]),
            "ms": latency_summary(values["ms"]),
            "top10_shared_with_exact": sum(values["top10_as_exact"]) / len(values["ms"]),
            "plan": plans[name],
        }
        for name, values in figures.items()
    }


async def measure_heavy_user(
    settings: Settings,
    options: LoadOptions,
    embedder: Embedder,
    corpus: Corpus,
    runtime_engine: AsyncEngine,
    statement: FusionStatement,
    heavy: HeavyUser,
) -> dict[str, Any]:
    """The heavy user's searches: service and statement at one client, then every strategy."""
    started = time.perf_counter()
    queries = await _heavy_queries(
        embedder, corpus, heavy, min(options.queries, HEAVY_QUERIES), corpus.shape.seed
    )
    searches = [
        (
            query.tenant_id,
            await service_search_params(
                settings,
                query.tenant_id,
                query.user_id,
                SearchRequest(query=query.text, limit=SEARCH_LIMIT),
                query.embedding,
            ),
        )
        for query in queries
    ]
    # Only this bench's HTTP level runs, which sends the questions themselves: the statement of
    # any owner stands in for its raw side (the raw level below runs the one the service sent).
    arguments = [statement.arguments(tenant, params) for tenant, params in searches]
    bench_options = replace(
        options,
        requests=min(options.requests, HEAVY_REQUESTS),
        level_seconds=max(options.level_seconds, HEAVY_LEVEL_SECONDS),
    )
    # No warm-up pass over every question (seconds each): each level warms up with its own.
    bench = SearchBench(settings, bench_options, runtime_engine, queries, arguments, statement)
    _say(options, "heavy user: 1 client, service over HTTP, then raw SQL")
    async with loopback_server(settings) as server:
        service = await bench.service_level(server.base_url, 1)
    # The bare statement is the one the service sends for this owner (with indexes of its own,
    # the text that walks them), learnt after the service's searches, so it is the statement
    # those ended with; the strategies run it, each under its own settings.
    sent = FusionStatement(runtime_engine.dialect)
    sent_arguments = await learnt_arguments(runtime_engine, sent, searches)
    raw, _ = await SearchBench(
        settings, bench_options, runtime_engine, queries, sent_arguments, sent
    ).raw_level(1)
    _say(options, "heavy user: vector strategies (latency, recall against an exact scan)")
    strategies = await strategy_latency(
        sent,
        runtime_engine,
        queries[:STRATEGY_QUERIES],
        sent_arguments[:STRATEGY_QUERIES],
        HYBRID_STRATEGIES,
    )
    recall = await vector_recall(
        FusionStatement(runtime_engine.dialect),
        runtime_engine,
        settings,
        queries[: options.recall_queries],
        STRATEGIES,
        sent=True,
    )
    return {
        "tenant_id": HEAVY_TENANT,
        "user_id": HEAVY_USER,
        "memories": len(heavy.rows),
        "copy_seconds": heavy.copy_seconds,
        "queries": len(queries),
        "query_embedding_ms": latency_summary([query.embed_ms for query in queries]),
        "service": service.to_json(),
        "raw_sql": raw.to_json(),
        "agreement": _agreement(service, raw, queries),
        "strategies": strategies,
        "recall": recall,
        "seconds": time.perf_counter() - started,
    }
