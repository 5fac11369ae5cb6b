"""A retrieval run as a JSON document (every number and the configuration behind it) and as
markdown tables rendered from that document, so the two can never disagree."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from benchmarks.datasets import TURN_ISSUES, Dataset
from benchmarks.metrics import METRIC_NAMES, mean_scores, percentile
from benchmarks.modes import SEARCH_LIMIT
from benchmarks.retrieval import RetrievalOptions, RetrievalRun
from service.config import Settings
from service.db_migrations import PROJECT_ROOT
from service.memories.search import linear_lexical_weight
from service.providers import embedder_config_from_settings


def _git(*arguments: str) -> str | None:
    """Output of a git command in the project, or None (no git, not a checkout, error)."""
    git = shutil.which("git")
    if git is None:
        return None
    try:
        completed = subprocess.run(  # noqa: S603 - fixed arguments, no shell
            [git, *arguments],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return completed.stdout.strip() if completed.returncode == 0 else None


def environment() -> dict[str, Any]:
    """Where and on what the run happened."""
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "git": {
            "commit": _git("rev-parse", "HEAD"),
            "tracked_changes": None if status is None else bool(status),
        },
        "machine": {
            "platform": platform.platform(),
            "machine": platform.machine(),
            "processor": platform.processor() or None,
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
        },
    }


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f}"


def _latency(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p95": None, "mean": None, "max": None}
    return {
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "mean": sum(values) / len(values),
        "max": max(values),
    }


def summarise(
    run: RetrievalRun, options: RetrievalOptions, settings: Settings
) -> dict[str, dict[str, Any]]:
    """Per mode: effective parameters, mean metrics overall and by category, latency."""
    categories = sorted({question.category for question in run.questions})
    results: dict[str, dict[str, Any]] = {}
    for mode in options.modes:
        outcomes = [question.by_mode[mode.name] for question in run.questions]
        by_category: dict[str, dict[str, Any]] = {}
        for category in categories:
            scores = [
                question.by_mode[mode.name].scores
                for question in run.questions
                if question.category == category
            ]
            by_category[category] = {"questions": len(scores), **mean_scores(scores)}
        results[mode.name] = {
            "parameters": mode.effective(settings),
            "questions": len(outcomes),
            "overall": mean_scores(outcome.scores for outcome in outcomes),
            "by_category": by_category,
            "latency_ms": _latency([outcome.latency_ms for outcome in outcomes]),
            "searches_without_query_embedding": run.not_embedded[mode.name],
        }
    return results


def build_report(
    *,
    dataset: Dataset,
    run: RetrievalRun,
    options: RetrievalOptions,
    settings: Settings,
    database: str,
    limits: Mapping[str, int | None],
    wall_seconds: float,
) -> dict[str, Any]:
    """The whole run as one JSON-ready document."""
    load = run.load
    return {
        "benchmark": "retrieval",
        **environment(),
        "config": {
            "dataset": {
                "format": dataset.format,
                "path": str(dataset.path),
                "sha256": dataset.sha256,
                "image_captions": dataset.image_captions,
            },
            "limits": dict(limits),
            "database": database,
            "memories": options.memories,
            "search": {
                "limit": SEARCH_LIMIT,
                "with_decay": options.with_decay,
                "recency_weight": settings.search_recency_weight if options.with_decay else 0.0,
                "confidence_weight": (
                    settings.search_confidence_weight if options.with_decay else 0.0
                ),
                "candidate_pool": settings.search_candidate_pool,
                "vector_pool": settings.search_vector_pool,
                "hnsw_ef_search": settings.hnsw_ef_search,
                "settings_rrf_k": settings.search_rrf_k,
                "settings_linear_lexical_weight": linear_lexical_weight(settings),
            },
            "modes": {mode.name: mode.effective(settings) for mode in options.modes},
            "embedder": {
                "provider": settings.embedding_provider,
                "profile": asdict(embedder_config_from_settings(settings).resolved_profile()),
                # As the API reported it for the stored memories.
                "models": dict(load.embedding_models),
                "dims": settings.embedding_dims,
                "local_threads": settings.embedding_local_threads,
            },
        },
        "data": {
            **dataset.report.to_json(),
            "conversations_evaluated": len(dataset.conversations),
            "questions_evaluated": dataset.question_count,
            "turns_sent": dataset.turn_count,
            "observations_sent": (dataset.observation_count if options.memories != "turns" else 0),
            "turns_stored": load.stored,
            "turns_merged_into_identical_memories": load.merged_duplicates,
            "turns_refused_by_service": dict(load.refused),
            "memories_stored_without_embedding": load.stored_without_embedding,
        },
        "results": summarise(run, options, settings),
        "timing": {
            "wall_seconds": wall_seconds,
            "load_seconds": run.load_seconds,
            "ingest_turns_per_second": (
                load.stored / run.load_seconds if run.load_seconds > 0 else None
            ),
            "search_seconds": run.search_seconds,
        },
        "questions": [
            {
                "id": question.question_id,
                "conversation": question.conversation_id,
                "category": question.category,
                "gold": sorted(question.gold),
                "modes": {
                    name: {
                        "first_relevant": outcome.first_relevant,
                        "latency_ms": outcome.latency_ms,
                        **outcome.scores,
                    }
                    for name, outcome in question.by_mode.items()
                },
            }
            for question in run.questions
        ],
    }


def _parameters(parameters: Mapping[str, Any]) -> str:
    if parameters.get("fusion") == "rrf":
        return f"rrf k={parameters['rrf_k']}"
    if parameters.get("fusion") == "linear":
        return f"linear w_lex={parameters['linear_lexical_weight']:g}"
    return "—"


def _row(cells: Iterable[object]) -> str:
    return "| " + " | ".join(str(cell) for cell in cells) + " |"


def _milliseconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def _counts(counts: Mapping[str, int], reasons: Mapping[str, str]) -> str:
    if not counts:
        return "none"
    return "; ".join(
        f"{count} {name} ({reasons.get(name, name)})" for name, count in counts.items()
    )


def render_markdown(report: Mapping[str, Any]) -> str:
    """Tables for a terminal or a pull request, from a `build_report` document."""
    config, data, results = report["config"], report["data"], report["results"]
    dataset, search, timing = config["dataset"], config["search"], report["timing"]
    memories = config.get("memories", "turns")
    # What was sent, what it was stored as, and the unit of the ingest rate, by what was stored.
    sent, stored_as, unit = {
        "turns": (str(data["turns_sent"]), "", "turns"),
        "observations": (
            f"{data['observations_sent']} observations",
            " (observations stored as facts)",
            "facts",
        ),
        "turns-and-observations": (
            f"{data['turns_sent']} + {data['observations_sent']} observations",
            " (turns, and observations stored as facts beside them)",
            "memories",
        ),
    }[memories]
    commit = report["git"]["commit"]
    machine = report["machine"]
    captions = ""
    if dataset["format"] == "locomo":
        captions = f", image captions {'appended' if dataset['image_captions'] else 'left out'}"
    decay = (
        f"recency weight {search['recency_weight']:g}, confidence weight "
        f"{search['confidence_weight']:g}"
    )
    lines = [
        f"## Retrieval: {dataset['format']} — {data['questions_evaluated']} questions, "
        f"{data['conversations_evaluated']} conversation(s), {data['turns_stored']} memories"
        f"{stored_as}",
        "",
        f"Dataset `{dataset['path']}` (sha256 {dataset['sha256'][:12]}…{captions}); "
        f"top {search['limit']} per "
        f"search; {decay}; embedder {', '.join(config['embedder']['models']) or 'none'}; "
        f"{config['database']} database; commit {commit[:10] if commit else 'unknown'}"
        f"{' with local changes' if report['git']['tracked_changes'] else ''}; "
        f"{machine['platform']}, {machine['cpu_count']} CPUs; {report['date']}.",
        f"Embedding profile {config['embedder']['profile']['name']} (fusion weight of BM25 "
        f"{search['settings_linear_lexical_weight']}).",
        f"Wall time {timing['wall_seconds']:.0f} s (storing {timing['load_seconds']:.0f} s, "
        f"{_rate(timing.get('ingest_turns_per_second'))} {unit}/s through the API; "
        f"searching {timing['search_seconds']:.0f} s).",
        "",
        _row(["mode", "fusion", *METRIC_NAMES, "p50 ms", "p95 ms"]),
        _row(["---", "---", *["---:"] * (len(METRIC_NAMES) + 2)]),
    ]
    for name, result in results.items():
        overall, latency = result["overall"], result["latency_ms"]
        lines.append(
            _row(
                [
                    name,
                    _parameters(result["parameters"]),
                    *(f"{overall[metric]:.3f}" for metric in METRIC_NAMES),
                    _milliseconds(latency["p50"]),
                    _milliseconds(latency["p95"]),
                ]
            )
        )
    lines += [
        "",
        "### By question category",
        "",
        _row(["category", "questions", "mode", *METRIC_NAMES]),
        _row(["---", "---:", "---", *["---:"] * len(METRIC_NAMES)]),
    ]
    categories = sorted({c for result in results.values() for c in result["by_category"]})
    for category in categories:
        for name, result in results.items():
            scores = result["by_category"][category]
            lines.append(
                _row(
                    [
                        category,
                        scores["questions"],
                        name,
                        *(f"{scores[metric]:.3f}" for metric in METRIC_NAMES),
                    ]
                )
            )
    reasons = data["reasons"]
    lines += [
        "",
        "### Data",
        "",
        f"- Questions: {data['questions_in_file']} in the file; skipped: "
        f"{_counts(data['questions_skipped'], reasons)}; "
        f"{data['questions_evaluated']} evaluated (after limits).",
        f"- Evidence repairs: {_counts(data['evidence_repairs'], reasons)}.",
        f"- Turns: {data['turns_in_file']} in the file, issues: "
        f"{_counts(data['turn_issues'], TURN_ISSUES)}; {sent} sent, "
        f"{data['turns_stored']} stored, {data['turns_merged_into_identical_memories']} merged "
        f"into an identical memory, refused: {_counts(data['turns_refused_by_service'], {})}, "
        f"{data['memories_stored_without_embedding']} stored without an embedding.",
    ]
    for name, result in results.items():
        missing = result["searches_without_query_embedding"]
        if missing:
            lines.append(f"- **{name}: {missing} searches ran without a query embedding.**")
    lines.append("")
    return "\n".join(lines)
