"""A load run as a JSON document (every number and the configuration behind it) and as markdown
tables rendered from that document, like the retrieval benchmark's report."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from benchmarks.corpus import describe
from benchmarks.load import (
    SEARCH_LIMIT,
    LevelResult,
    LoadOptions,
    LoadRun,
    SizeResult,
    size_label,
)
from benchmarks.report import environment
from service.config import Settings


def host() -> dict[str, Any]:
    """What `report.environment` leaves out and a load test depends on: CPU model and memory."""
    cpu_model = None
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                cpu_model = line.partition(":")[2].strip()
                break
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = None
    return {"cpu_model": cpu_model, "memory_bytes": memory}


def _level_json(level: LevelResult) -> dict[str, Any]:
    return {
        **level.to_json(),
        "latencies_ms": [round(value, 3) for value in level.latencies_ms],
    }


def _size_json(result: SizeResult) -> dict[str, Any]:
    levels: dict[str, Any] = {}
    for clients, paths in result.levels.items():
        service, raw = _level_json(paths["service"]), _level_json(paths["raw_sql"])
        service_p50, raw_p50 = service["latency_ms"]["p50"], raw["latency_ms"]["p50"]
        levels[str(clients)] = {
            "service": service,
            "raw_sql": raw,
            "service_over_raw_p50": (
                service_p50 / raw_p50 if service_p50 is not None and raw_p50 else None
            ),
        }
    return {
        "label": size_label(result.step.user_memories),
        "bulk": result.step.to_json(),
        "api_ingest": result.api_ingest,
        "queries": result.queries,
        "query_embedding_ms": result.query_embedding_ms,
        "search": levels,
        "context": _level_json(result.context),
        "agreement": result.agreement,
        "recall": result.recall,
        "plans": result.plans,
        "seconds": result.seconds,
        "load_average": result.load_average,
    }


def build_load_report(
    *, run: LoadRun, options: LoadOptions, settings: Settings, wall_seconds: float
) -> dict[str, Any]:
    """The whole run as one JSON-ready document."""
    report = {"benchmark": "load", **environment()}
    report["machine"] = {**report["machine"], **host()}
    return {
        **report,
        "config": {
            "database": "throwaway embedded",
            "sizes": list(options.sizes),
            "corpus": describe(options.shape),
            "pool": {"size": options.pool_size, **run.pool},
            "vectors": run.vectors,
            "embedder": {
                "provider": settings.embedding_provider,
                "model": run.embedding_model,
                "dims": settings.embedding_dims,
                "local_threads": settings.embedding_local_threads,
            },
            "search": {
                "request": {"query": "<question>", "limit": SEARCH_LIMIT},
                "mode": "hybrid",
                "fusion": "rrf",
                "rrf_k": settings.search_rrf_k,
                "candidate_pool": settings.search_candidate_pool,
                "vector_pool": settings.search_vector_pool,
                "recency_weight": settings.search_recency_weight,
                "confidence_weight": settings.search_confidence_weight,
                "hnsw_ef_search": settings.hnsw_ef_search,
            },
            "measurement": {
                "concurrency": list(options.concurrency),
                "requests_per_level": options.requests,
                "level_seconds_cap": options.level_seconds,
                "distinct_queries": options.queries,
                "recall_queries": options.recall_queries,
                "api_rows": options.api_rows,
            },
            "bulk": {
                "connections": options.load_connections,
                "owner_indexes": owner_index_config(settings),
            },
            "server": run.server,
            "postgres": run.postgres,
        },
        "sizes": [_size_json(result) for result in run.sizes],
        "heavy_user": run.heavy_user,
        "timing": {"wall_seconds": wall_seconds},
    }


def owner_index_config(settings: Settings) -> dict[str, Any]:
    """What the owners' own vector indexes built after each load are built under."""
    return {
        "build_from": settings.owner_vector_index_from,
        "most": settings.owner_vector_indexes_max,
        "ef_construction": settings.owner_vector_index_ef_construction,
        "ef_search": settings.owner_vector_index_ef_search,
    }


def _row(cells: Iterable[object]) -> str:
    return "| " + " | ".join(str(cell) for cell in cells) + " |"


def _number(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def _count(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def _mib(value: int | None) -> str:
    return "—" if value is None else f"{value / 2**20:,.0f}"


def _scans(plan: Mapping[str, Any] | None) -> str:
    """The plan's scans of the memory table and its indexes (not CTEs or functions)."""
    if not plan:
        return "—"
    scans = [
        scan.replace(" Scan", "")
        for scan in plan["scans"]
        if scan.endswith(" memory") or " ix_" in scan or " uq_" in scan or " pk_" in scan
    ]
    return ", ".join(scans) or "—"


def render_load_markdown(report: Mapping[str, Any]) -> str:
    """Tables for a terminal or a pull request, from a `build_load_report` document."""
    config, sizes = report["config"], report["sizes"]
    corpus, search, postgres = config["corpus"], config["search"], config["postgres"]
    commit = report["git"]["commit"]
    machine = report["machine"]
    fidelity = config["vectors"]["fidelity"]
    owner_indexes = config["bulk"]["owner_indexes"]
    lines = [
        f"## Load: {', '.join(size['label'] for size in sizes)} memories",
        "",
        f"Corpus seed {corpus['seed']}: {corpus['memories_per_user']} memories per user, "
        f"{corpus['users_per_tenant']} users per tenant, {corpus['org_memories_per_tenant']} "
        f"org memories per tenant; {config['pool']['size']} pool sentences embedded in "
        f"{config['pool']['embed_seconds']:.0f} s, row vectors = pool vector + noise "
        f"{config['vectors']['noise']:g} (cosine to the row's true embedding "
        f"{fidelity['cosine_true_vs_derived']:.3f}; the pool sentence's own "
        f"{fidelity['cosine_true_vs_pool_sentence']:.3f}). Search: `POST …/memories/search` "
        f"{{query, limit {search['request']['limit']}}} = hybrid RRF k={search['rrf_k']}, pool "
        f"{search['candidate_pool']}; owners' own vector indexes from "
        f"{owner_indexes['build_from']:,} memories of a kind (at most {owner_indexes['most']}, "
        f"ef_construction {owner_indexes['ef_construction']}, walked at ef_search of at least "
        f"{owner_indexes['ef_search']}). PostgreSQL "
        f"{postgres.get('server_version')} + pgvector {postgres.get('pgvector')}, "
        f"shared_buffers {postgres.get('shared_buffers')}; uvicorn "
        f"{config['server'].get('uvicorn_workers', 1)} worker(s), query-vector cache "
        f"{config['server'].get('query_embedding_cache_size', 0)}, DB pool "
        f"{config['server']['db_pool_size']}+{config['server']['db_max_overflow']}; commit "
        f"{commit[:10] if commit else 'unknown'}"
        f"{' with local changes' if report['git']['tracked_changes'] else ''}; "
        f"{machine['platform']}, {machine['cpu_count']} CPUs ({machine.get('cpu_model')}), "
        f"{_mib(machine.get('memory_bytes'))} MiB RAM; {report['date']}; wall time "
        f"{report['timing']['wall_seconds']:.0f} s.",
        "",
        "### Ingest",
        "",
        _row(
            [
                "corpus",
                "rows added",
                "COPY s",
                "COPY rows/s",
                "VACUUM ANALYZE s",
                "owner indexes",
                "owner indexes s",
                "bulk rows/s incl. owner indexes",
                "table + indexes MiB",
                "owner indexes MiB",
                "API rows",
                "API rows/s",
                "API p50 ms / 100-row batch",
            ]
        ),
        _row(["---", *["---:"] * 12]),
    ]
    for size in sizes:
        bulk, api = size["bulk"], size["api_ingest"] or {}
        relation = bulk["relation_bytes"]
        lines.append(
            _row(
                [
                    f"{bulk['total_rows']:,}",
                    f"{bulk['rows_added']:,}",
                    _number(bulk["copy_seconds"]),
                    _count(bulk["copy_rows_per_second"]),
                    _number(bulk["vacuum_analyze_seconds"]),
                    bulk["owner_indexes_built"],
                    _number(bulk["owner_index_seconds"]),
                    _count(bulk["rows_per_second_with_owner_graphs"]),
                    _mib(sum(relation.values())),
                    _mib(bulk["owner_index_bytes"]),
                    _count(api.get("rows")),
                    _number(api.get("rows_per_second")),
                    _number((api.get("request_ms") or {}).get("p50"), 0),
                ]
            )
        )
    lines += [
        "",
        "### Search latency: service over HTTP vs the fusion statement alone",
        "",
        _row(
            [
                "corpus",
                "clients",
                "service p50 ms",
                "p95",
                "p99",
                "req/s",
                "raw SQL p50 ms",
                "p95",
                "p99",
                "q/s",
                "service / raw p50",
                "errors",
            ]
        ),
        _row(["---", *["---:"] * 11]),
    ]
    for size in sizes:
        for clients, level in size["search"].items():
            service, raw = level["service"], level["raw_sql"]
            lines.append(
                _row(
                    [
                        f"{size['bulk']['total_rows']:,}",
                        clients,
                        _number(service["latency_ms"]["p50"]),
                        _number(service["latency_ms"]["p95"]),
                        _number(service["latency_ms"]["p99"]),
                        _number(service["throughput_per_second"]),
                        _number(raw["latency_ms"]["p50"]),
                        _number(raw["latency_ms"]["p95"]),
                        _number(raw["latency_ms"]["p99"]),
                        _number(raw["throughput_per_second"]),
                        _number(level["service_over_raw_p50"], 2),
                        f"{service['errors']} / {raw['errors']}",
                    ]
                )
            )
    lines += [
        "",
        "### Vector-mode recall against an exact scan (user filter, as the API searches)",
        "",
        _row(
            [
                "corpus",
                "queries",
                "as planned R@10",
                "R@100",
                "candidates of 100",
                "p50 ms",
                "exact p50 ms",
            ]
        ),
        _row(["---", *["---:"] * 6]),
    ]
    for size in sizes:
        recall = size["recall"]
        planned, exact = recall["as planned"], recall["exact"]
        lines.append(
            _row(
                [
                    f"{size['bulk']['total_rows']:,}",
                    recall["queries"],
                    _number(planned["recall_at_10"], 3),
                    _number(planned["recall_at_pool"], 3),
                    _number(planned["candidates_mean"], 1),
                    _number(planned["ms"]["p50"]),
                    _number(exact["ms"]["p50"]),
                ]
            )
        )
    lines += [
        "",
        "### The context call (POST …/context, default budget, 1 client)",
        "",
        _row(["corpus", "context p50 ms", "p95 ms", "p99 ms", "of which query embedding p50 ms"]),
        _row(["---", "---:", "---:", "---:", "---:"]),
    ]
    for size in sizes:
        latency = size["context"]["latency_ms"]
        lines.append(
            _row(
                [
                    f"{size['bulk']['total_rows']:,}",
                    _number(latency["p50"]),
                    _number(latency["p95"]),
                    _number(latency["p99"]),
                    _number(size["query_embedding_ms"]["p50"]),
                ]
            )
        )
    lines += [
        "",
        "### Checks and plans",
        "",
        _row(
            [
                "corpus",
                "query embedding p50 ms",
                "service = raw top 10",
                "asked-about memory in top 10",
                "hybrid (default) scans",
                "vector as planned",
            ]
        ),
        _row(["---", "---:", "---:", "---:", "---", "---"]),
    ]
    for size in sizes:
        recall, agreement = size["recall"], size["agreement"]
        lines.append(
            _row(
                [
                    f"{size['bulk']['total_rows']:,}",
                    _number(size["query_embedding_ms"]["p50"]),
                    f"{agreement['identical_top10']}/{agreement['compared']}",
                    _number(agreement["target_memory_in_service_top10"], 2),
                    _scans(size["plans"].get("hybrid_default")),
                    _scans(recall["as planned"]["plan"]),
                ]
            )
        )
    lines.append("")
    if report.get("heavy_user"):
        lines += _heavy_user_markdown(report["heavy_user"])
    return "\n".join(lines)


def _heavy_user_markdown(heavy: Mapping[str, Any]) -> list[str]:
    """The heavy user's searches: service and statement, then each vector strategy."""
    service, raw = heavy["service"]["latency_ms"], heavy["raw_sql"]["latency_ms"]
    agreement = heavy["agreement"]
    lines = [
        f"### The heavy user: {heavy['memories']:,} memories of one user, 1 client",
        "",
        f"Service p50 {_number(service['p50'])} ms, p95 {_number(service['p95'])} ms; raw "
        f"statement p50 {_number(raw['p50'])} ms, p95 {_number(raw['p95'])} ms; query "
        f"embedding p50 {_number(heavy['query_embedding_ms']['p50'])} ms; service = raw top 10 "
        f"{agreement['identical_top10']}/{agreement['compared']}; errors "
        f"{heavy['service']['errors']} / {heavy['raw_sql']['errors']}.",
        "",
        _row(
            [
                "strategy",
                "hybrid p50 ms",
                "p95",
                "hybrid top 10 shared with exact",
                "vector R@10",
                "R@100",
                "vector p50 ms",
                "hybrid scans",
            ]
        ),
        _row(["---", *["---:"] * 6, "---"]),
    ]
    recall = heavy["recall"]
    strategies = heavy["strategies"]
    names = [*strategies, *(name for name in recall if isinstance(recall[name], dict))]
    for name in dict.fromkeys(names):
        figures = strategies.get(name, {"ms": {}, "plan": None})
        vector = recall.get(name, {})
        lines.append(
            _row(
                [
                    name,
                    _number(figures["ms"].get("p50")),
                    _number(figures["ms"].get("p95")),
                    _number(figures.get("top10_shared_with_exact"), 3),
                    _number(vector.get("recall_at_10"), 3),
                    _number(vector.get("recall_at_pool"), 3),
                    _number((vector.get("ms") or {}).get("p50")),
                    _scans(figures["plan"]),
                ]
            )
        )
    lines.append("")
    return lines
