"""The harness end to end on the synthetic conversation: through the real app's HTTP API,
against the test database, and from the command line (external and throwaway databases)."""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from benchmarks.cli import main
from benchmarks.datasets import Dataset, load_dataset
from benchmarks.metrics import METRIC_NAMES
from benchmarks.modes import DEFAULT_MODES, parse_modes
from benchmarks.report import build_report, render_markdown
from benchmarks.retrieval import RetrievalOptions, RetrievalRun, benchmark_app
from service.config import Settings
from tests.bench_harness.conftest import EVALUATED

MODES = [mode.name for mode in parse_modes(DEFAULT_MODES)]


def _report(
    dataset: Dataset, run: RetrievalRun, options: RetrievalOptions, settings: Settings
) -> dict[str, Any]:
    """The report of an in-process run against the test database, with every question."""
    return build_report(
        dataset=dataset,
        run=run,
        options=options,
        settings=settings,
        database="external",
        limits={"conversations": None, "questions": None},
        wall_seconds=1.0,
    )


async def test_every_question_is_searched_in_every_mode_through_the_api(
    settings: Settings, locomo_file: Path
) -> None:
    dataset = load_dataset(locomo_file, "locomo")
    options = RetrievalOptions(modes=parse_modes(DEFAULT_MODES), progress=False)

    run = await benchmark_app(settings, dataset, options)

    assert [q.question_id for q in run.questions] == EVALUATED
    assert all(list(q.by_mode) == MODES for q in run.questions)
    outcomes = {q.question_id: q.by_mode for q in run.questions}
    # Hits map back to gold turns through their metadata: an exact lexical match ranks first.
    assert outcomes["conv-x#q1"]["lexical"].first_relevant == 1
    assert outcomes["conv-x#q1"]["lexical"].scores["R@1"] == 1.0
    # Only the appended image caption says "brick wall".
    assert outcomes["conv-x#q9"]["lexical"].first_relevant == 1
    # D2:4 was merged into D1:4's identical memory; finding that memory finds D2:4.
    assert outcomes["conv-x#q7"]["lexical"].first_relevant == 1
    # Nine turns are in the conversation: the refused SSN turn is never stored.
    assert run.load.stored == 7
    assert run.load.merged_duplicates == 1
    assert run.load.refused == {"ssn": 1}
    assert run.load.stored_without_embedding == 0
    assert sum(run.load.embedding_models.values()) == 8
    assert not run.not_embedded
    assert all(o.latency_ms > 0 for q in run.questions for o in q.by_mode.values())

    report = _report(dataset, run, options, settings)
    json.dumps(report)
    lexical = report["results"]["lexical"]
    assert lexical["questions"] == 6
    assert lexical["overall"]["R@30"] == pytest.approx(
        sum(outcomes[q]["lexical"].scores["R@30"] for q in EVALUATED) / 6
    )
    assert lexical["by_category"]["4 single-hop"]["questions"] == 4
    assert report["config"]["modes"]["hybrid-rrf"]["rrf_k"] == settings.search_rrf_k
    # The benchmark measures what a client gets: the service's own weights.
    assert report["config"]["search"]["recency_weight"] == settings.search_recency_weight
    assert report["data"]["turns_refused_by_service"] == {"ssn": 1}
    markdown = render_markdown(report)
    for mode in MODES:
        assert f"| {mode} |" in markdown
    assert f"{lexical['overall']['R@10']:.3f}" in markdown


async def test_observations_are_stored_as_facts_and_found_by_the_turns_they_rest_on(
    settings: Settings, locomo_file: Path
) -> None:
    dataset = load_dataset(locomo_file, "locomo")
    options = RetrievalOptions(
        modes=parse_modes("lexical"), progress=False, memories="observations"
    )

    run = await benchmark_app(settings, dataset, options)

    outcomes = {q.question_id: q.by_mode["lexical"] for q in run.questions}
    # "Sheldon" and "tortoise": the fact drawn from D1:1 ranks first and stands for that turn.
    assert outcomes["conv-x#q1"].first_relevant == 1
    # No observation rests on D2:4 ("Thanks!"): a question about it finds no fact.
    assert outcomes["conv-x#q7"].first_relevant is None
    assert run.load.stored == 4
    assert run.load.refused == {}

    report = _report(dataset, run, options, settings)
    assert report["config"]["memories"] == "observations"
    assert report["data"]["observations_sent"] == 4
    assert "(observations stored as facts)" in render_markdown(report)


async def test_a_fact_is_stored_as_the_write_path_stores_one(
    settings: Settings, locomo_file: Path, owner_engine: AsyncEngine
) -> None:
    """Semantic, in its session's thread, in the order the facts were drawn."""
    dataset = load_dataset(locomo_file, "locomo")
    options = RetrievalOptions(
        modes=parse_modes("lexical"), progress=False, memories="observations"
    )
    await benchmark_app(settings, dataset, options)
    async with owner_engine.connect() as connection:
        rows = (
            await connection.execute(
                text(
                    "SELECT m.tenant_id, m.text, m.kind, t.title, "
                    "to_char(m.event_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') "
                    "FROM memory m "
                    "JOIN thread t ON t.tenant_id = m.tenant_id AND t.id = m.source_thread_id "
                    "WHERE m.tenant_id LIKE 'bench-%' AND m.metadata ? 'dia_ids' "
                    "ORDER BY m.tenant_id, m.event_at, m.id"
                )
            )
        ).all()
    by_tenant: dict[str, list[tuple[str, str, str, str]]] = {}
    for tenant, *fact in rows:
        by_tenant.setdefault(tenant, []).append((fact[0], fact[1], fact[2], fact[3]))
    # Every run of the benchmark (each its own tenant) stored the same facts, the same way:
    # a second apart from their session's time, in the order they were drawn.
    assert by_tenant
    for facts in by_tenant.values():
        assert facts == [
            ("Ada adopted a tortoise named Sheldon.", "semantic", "D1", "2023-05-08 13:56:00"),
            ("Ben asked what Sheldon eats.", "semantic", "D1", "2023-05-08 13:56:01"),
            ("Ada feeds Sheldon dandelions and kale.", "semantic", "D1", "2023-05-08 13:56:02"),
            (
                "Ben is taking cello lessons with a patient teacher.",
                "semantic",
                "D2",
                "2023-06-27 00:21:00",
            ),
        ]


def test_the_command_writes_json_and_prints_the_tables(
    settings: Settings,
    locomo_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert settings.database_url is not None
    assert settings.migration_database_url is not None
    out = tmp_path / "results" / "run.json"
    code = main(
        [
            "retrieval",
            "--dataset",
            str(locomo_file),
            "--database-url",
            settings.database_url.get_secret_value(),
            "--migration-database-url",
            settings.migration_database_url.get_secret_value(),
            "--modes",
            "lexical,hybrid-rrf-k60",
            "--limit-questions",
            "3",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0
    report = json.loads(out.read_text())
    assert (
        report["config"]["dataset"]["sha256"]
        == hashlib.sha256(locomo_file.read_bytes()).hexdigest()
    )
    assert list(report["results"]) == ["lexical", "hybrid-rrf-k60"]
    assert report["data"]["questions_evaluated"] == 3
    assert [q["id"] for q in report["questions"]] == EVALUATED[:3]
    assert set(report["questions"][0]["modes"]["lexical"]) >= set(METRIC_NAMES)
    assert report["config"]["database"] == "external"
    assert report["machine"]["cpu_count"]
    printed = capsys.readouterr().out
    assert "| lexical |" in printed
    assert "| hybrid-rrf-k60 | rrf k=60 |" in printed


# A cluster of its own, made and deleted: with the process-level tests.
@pytest.mark.slow
def test_by_default_a_throwaway_database_is_started_and_deleted(
    locomo_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    made: list[Path] = []
    mkdtemp = tempfile.mkdtemp

    def recording_mkdtemp(*args: Any, **kwargs: Any) -> str:
        made.append(Path(mkdtemp(*args, **kwargs)))
        return str(made[-1])

    monkeypatch.setattr(tempfile, "mkdtemp", recording_mkdtemp)
    out = tmp_path / "run.json"
    code = main(
        [
            "retrieval",
            "--dataset",
            str(locomo_file),
            "--modes",
            "lexical",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0
    report = json.loads(out.read_text())
    assert report["config"]["database"] == "throwaway embedded"
    assert report["results"]["lexical"]["questions"] == len(EVALUATED)
    # The cluster lived in its own temporary directory, which is gone.
    [workdir] = made
    assert workdir.parent == scratch
    assert not workdir.exists()


def test_the_command_refuses_a_bad_dataset_or_mode_list(
    tmp_path: Path, locomo_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["retrieval", "--dataset", str(tmp_path / "absent.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert main(["retrieval", "--dataset", str(locomo_file), "--modes", "bm25"]) == 2
    assert "unknown search mode" in capsys.readouterr().err


async def test_beside_the_turns_each_fact_follows_the_last_turn_it_rests_on(
    settings: Settings, locomo_file: Path, owner_engine: AsyncEngine
) -> None:
    """Turns and facts in the same threads, as a write path that draws facts while the
    conversation goes on leaves them: each fact between the last turn it rests on and the next."""
    dataset = load_dataset(locomo_file, "locomo")
    options = RetrievalOptions(
        modes=parse_modes("lexical"), progress=False, memories="turns-and-observations"
    )
    run = await benchmark_app(settings, dataset, options)
    # Nine turns (the SSN refused, "Thanks!" merged into its twin) and four facts.
    assert run.load.stored == 7 + 4
    async with owner_engine.connect() as connection:
        rows = (
            await connection.execute(
                text(
                    "SELECT m.tenant_id, m.kind, left(m.text, 12) FROM memory m "
                    "WHERE m.tenant_id LIKE 'bench-%' AND m.tenant_id IN ("
                    "  SELECT tenant_id FROM memory WHERE metadata ? 'dia_ids') "
                    "AND m.tenant_id IN ("
                    "  SELECT tenant_id FROM memory WHERE metadata ? 'dia_id') "
                    "ORDER BY m.tenant_id, m.event_at, m.id"
                )
            )
        ).all()
    by_tenant: dict[str, list[tuple[str, str]]] = {}
    for tenant, kind, start in rows:
        by_tenant.setdefault(tenant, []).append((kind, start))
    assert by_tenant
    for memories in by_tenant.values():
        assert memories == [
            ("episodic", "Ada: I adopt"),
            ("semantic", "Ada adopted "),
            ("episodic", "Ben: Congrat"),
            ("semantic", "Ben asked wh"),
            ("episodic", "Ada: Mostly "),
            ("semantic", "Ada feeds Sh"),
            ("episodic", "Ben: Thanks!"),
            ("episodic", "Ben: Look wh"),
            ("episodic", "Ada: Wonderf"),
            ("episodic", "Ben: Slowly,"),
            ("semantic", "Ben is takin"),
        ]
