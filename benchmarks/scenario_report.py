"""The realistic scenario's run as a JSON document and as markdown tables rendered from it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from benchmarks.load import SEARCH_LIMIT
from benchmarks.load_report import (
    _count,
    _level_json,
    _mib,
    _number,
    _row,
    _scans,
    host,
    owner_index_config,
)
from benchmarks.report import environment
from benchmarks.scenario import ScenarioOptions, ScenarioRun, ScenarioSize
from benchmarks.scenario_corpus import EPISODE_SHARE, FACT_SHARE, PAIRED_SHARE
from service.config import Settings


def _size_json(result: ScenarioSize) -> dict[str, Any]:
    bulk = result.step.to_json()
    load_seconds = result.build_seconds + result.step.seconds
    return {
        "label": result.label,
        "owner": result.owner,
        "bulk": {**bulk, "build_seconds": result.build_seconds, "load_seconds": load_seconds},
        "api_ingest": result.api_ingest,
        "questions": result.questions,
        "query_embedding_ms": result.query_embedding_ms,
        "search": {str(clients): _level_json(level) for clients, level in result.levels.items()},
        "raw_sql": _level_json(result.raw),
        "never_seen_search": _level_json(result.fresh),
        "context": _level_json(result.context),
        "recall": result.recall,
        "context_recall": result.context_recall,
        "plan": result.plan,
        "seconds": result.seconds,
        "load_average": result.load_average,
    }


def build_scenario_report(
    *, run: ScenarioRun, options: ScenarioOptions, settings: Settings, wall_seconds: float
) -> dict[str, Any]:
    """The whole run as one JSON-ready document."""
    report = {"benchmark": "load", "scenario": "realistic", **environment()}
    report["machine"] = {**report["machine"], **host()}
    return {
        **report,
        "config": {
            "database": "throwaway embedded",
            "sizes": list(options.sizes),
            "source": run.source,
            "shape": {
                **asdict(options.shape),
                "fact_share": FACT_SHARE,
                "episode_share": EPISODE_SHARE,
                "paired_share": PAIRED_SHARE,
            },
            "pool": run.pool,
            "vectors": run.fidelity,
            "embedder": {
                "provider": settings.embedding_provider,
                "model": run.embedding_model,
                "dims": settings.embedding_dims,
                "local_threads": settings.embedding_local_threads,
            },
            "search": {
                "request": {"query": "<question>", "limit": SEARCH_LIMIT},
                "defaults": "the API's (hybrid, user and org scopes)",
                "fusion": settings.search_fusion,
                "candidate_pool": settings.search_candidate_pool,
                "vector_pool": settings.search_vector_pool,
                "hnsw_ef_search": settings.hnsw_ef_search,
            },
            "measurement": {
                "reference": options.reference,
                "concurrency": list(options.concurrency),
                "requests_per_level": options.requests,
                "level_seconds_cap": options.level_seconds,
                "queries": options.queries,
                "never_seen_queries": options.fresh_queries,
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
        "timing": {"wall_seconds": wall_seconds},
    }


def _small_tenants(shape: Mapping[str, Any]) -> str:
    if not shape.get("small_tenants"):
        return ""
    return (
        f"; {shape['small_tenants']:,} small tenants ({shape['small_tenant_users']} users of "
        f"{shape['small_tenant_user_memories']} memories, "
        f"{shape['small_tenant_org_memories']} of the organization's) loaded with the first size"
    )


def render_scenario_markdown(report: Mapping[str, Any]) -> str:
    """Tables for a terminal or a pull request, from a `build_scenario_report` document."""
    config, sizes = report["config"], report["sizes"]
    source, shape, vectors = config["source"], config["shape"], config["vectors"]
    postgres, machine = config["postgres"], report["machine"]
    commit = report["git"]["commit"]
    concurrency = config["measurement"]["concurrency"]
    lines = [
        f"## Load, realistic scenario: owners of {', '.join(s['label'] for s in sizes)} memories",
        "",
        f"Source {source['path']}: {source['sentences']:,} sentences, "
        f"{config['pool']['texts']:,} pool texts (embedded in "
        f"{config['pool']['embed_seconds']:.0f} s), {source['sessions']} sessions, "
        f"{source['first_person_clauses']:,} first-person clauses; owner = "
        f"{shape['fact_share']:.0%} facts, {shape['episode_share']:.0%} episodes, the rest "
        f"chat turns, plus {shape['org_share']:.0%} organization memory; other users "
        f"{shape['background_factor']:g} x the owner's size"
        f"{_small_tenants(shape)}; seed {shape['seed']}. Row vectors "
        f"= normalised sum of its pool texts' vectors + noise {vectors['noise']:g} (cosine to the "
        f"row's true embedding {_number(vectors.get('cosine_true_vs_derived'), 3)}). Reference "
        f"ranking: {config['measurement']['reference']}. PostgreSQL "
        f"{postgres.get('server_version')} + pgvector {postgres.get('pgvector')}; commit "
        f"{commit[:10] if commit else 'unknown'}"
        f"{' with local changes' if report['git']['tracked_changes'] else ''}; "
        f"{machine['cpu_count']} CPUs ({machine.get('cpu_model')}); {report['date']}; wall time "
        f"{report['timing']['wall_seconds']:.0f} s.",
        "",
        "### Search and context (HTTP, the API's defaults, limit 10)",
        "",
        _row(
            [
                "owner",
                "table rows",
                "search p50 ms",
                "p95",
                *(f"p50 at {c}" for c in concurrency[1:]),
                "statement p50",
                "context p50",
                "never-seen p50",
                "query embedding p50",
                f"R@10 vs {config['measurement']['reference']}",
                "target in top 10",
                "errors",
            ]
        ),
        _row(["---", *["---:"] * (10 + len(concurrency[1:]))]),
    ]
    for size in sizes:
        levels = size["search"]
        first = levels[str(concurrency[0])]["latency_ms"]
        recall = size["recall"]
        errors = sum(level["errors"] for level in levels.values()) + size["context"]["errors"]
        lines.append(
            _row(
                [
                    size["label"],
                    f"{size['bulk']['total_rows']:,}",
                    _number(first["p50"]),
                    _number(first["p95"]),
                    *(_number(levels[str(c)]["latency_ms"]["p50"]) for c in concurrency[1:]),
                    _number(size["raw_sql"]["latency_ms"]["p50"]),
                    _number(size["context"]["latency_ms"]["p50"]),
                    _number(size["never_seen_search"]["latency_ms"]["p50"]),
                    _number(size["query_embedding_ms"]["p50"]),
                    _number(recall["recall_at_10"], 3),
                    _number(recall["target_in_service_top10"], 2),
                    errors + size["never_seen_search"]["errors"],
                ]
            )
        )
    lines += [
        "",
        "### Writes and load time",
        "",
        _row(
            [
                "owner",
                "rows added",
                "build s",
                "COPY s",
                "COPY rows/s",
                "VACUUM ANALYZE s",
                "owner indexes",
                "owner indexes s",
                "load s",
                "table + indexes MiB",
                "owner indexes MiB",
                "API rows/s",
                "API p50 ms / 100-row batch",
            ]
        ),
        _row(["---", *["---:"] * 12]),
    ]
    for size in sizes:
        bulk, api = size["bulk"], size["api_ingest"] or {}
        lines.append(
            _row(
                [
                    size["label"],
                    f"{bulk['rows_added']:,}",
                    _number(bulk["build_seconds"]),
                    _number(bulk["copy_seconds"]),
                    _count(bulk["copy_rows_per_second"]),
                    _number(bulk["vacuum_analyze_seconds"]),
                    bulk["owner_indexes_built"],
                    _number(bulk["owner_index_seconds"]),
                    _number(bulk["load_seconds"]),
                    _mib(sum(bulk["relation_bytes"].values())),
                    _mib(bulk["owner_index_bytes"]),
                    _number(api.get("rows_per_second")),
                    _number((api.get("request_ms") or {}).get("p50"), 0),
                ]
            )
        )
    lines += [
        "",
        "### The owners and their questions",
        "",
        _row(
            [
                "owner",
                "memories",
                "facts / episodes / turns",
                "threads",
                "distinct-token ratio (first 1,000)",
                "questions by kind",
                "R@10 by kind",
                "context sections R@10 (org / facts / episodes)",
                "target in reference top 10",
                "hybrid scans",
            ]
        ),
        _row(["---", "---:", "---:", "---:", "---:", "---", "---", "---", "---:", "---"]),
    ]
    for size in sizes:
        owner, recall = size["owner"], size["recall"]
        categories = owner["categories"]
        lines.append(
            _row(
                [
                    size["label"],
                    f"{owner['memories']:,}",
                    f"{owner['kinds'].get('semantic', 0):,} / {categories.get('episode', 0):,} / "
                    f"{categories.get('turn', 0):,}",
                    f"{owner['threads']:,}",
                    _number(owner["distinct_token_ratio_first_1000"], 3),
                    ", ".join(f"{k} {v}" for k, v in size["questions"]["by_kind"].items()),
                    ", ".join(
                        f"{k} {_number(v, 3)}" for k, v in recall["recall_at_10_by_kind"].items()
                    ),
                    " / ".join(
                        _number(section["recall_at_10"], 3)
                        for section in size["context_recall"]["sections"].values()
                    ),
                    _number(recall["target_in_reference_top10"], 2),
                    _scans(size["plan"]),
                ]
            )
        )
    lines.append("")
    return "\n".join(lines)
