"""What an owner's size costs the write path: the time of one extraction pass (a human turn's
facts reconciled with what the owner remembers and written) for owners of 1k, 10k and 100k
memories, for two or more code versions on one database of the realistic scenario.

Run from the repository root:

    python -m benchmarks.scripts.extraction_pass --tree before=/path/to/checkout --tree now=.
        [--data DIR] [--passes 12] [--rounds 2]

The database is the one `python -m benchmarks.scripts.statement_replay` keeps under `--data`
(run that first with the same `--data`: loading the scenario takes minutes). Each version runs
in a child process with the code of its tree (first on PYTHONPATH; the dependencies are this
virtualenv's): the app in process, its write path driven directly, the model the project's
loopback OpenAI-compatible server. For each size's owner the child opens a thread of its own
and, `--passes` times after one unrecorded pass, appends a human turn and its answer and runs
the pass over it (`WritePath.extract`): the model proposes three new facts, two of the
scenario's largest category (`context`, whose facts add up) and one `preference` (a category
where a new fact replaces a similar one), which the pass reconciles with the owner's facts (the
search that shows the model what is known, each fact's nearest facts and those of its category
it may replace) and writes. The thread, and with it the facts written, is deleted at the end.
The versions run one after the other, in the opposite order in each of `--rounds`. Prints per
size each version's p50 pass and its change against the first version's, and the facts its
passes wrote; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.scripts.statement_replay import (
    Version,
    _cluster_urls,
    kept_scenario,
    parse_version,
    run_in_child,
)

TOPICS = (
    "the garden",
    "a new recipe",
    "the marathon plan",
    "the piano lessons",
    "a trip to Kyoto",
    "the book club",
    "the sailing course",
    "the chess openings",
)


def _proposed_facts(number: int) -> list[dict[str, Any]]:
    """Three new facts (the number makes each text new): two of `context`, one `preference`."""
    topic = TOPICS[number % len(TOPICS)]
    fact = {"subject": "", "scope": "user", "confidence": 0.95, "evidence": "", "supersedes": []}
    return [
        {**fact, "text": f"User mentioned {topic} again (note {number}a).", "category": "context"},
        {
            **fact,
            "text": f"User is busy with {topic} this week (note {number}b).",
            "category": "context",
        },
        {
            **fact,
            "text": f"User prefers talking about {topic} in the evening (note {number}c).",
            "category": "preference",
        },
    ]


async def measure(
    runtime_url: str, owner_url: str, sizes: Sequence[str], passes: int
) -> dict[str, Any]:
    """This version's pass times per size (seconds) and the facts its passes wrote."""
    from asgi_lifespan import LifespanManager
    from httpx import ASGITransport, AsyncClient
    from pydantic import SecretStr

    from service.auth.tokens import mint_dev_token
    from service.config import Settings
    from service.extraction.pipeline import WritePath
    from service.main import create_app
    from tests.fixtures.openai_server import API_KEY, MODEL, FakeOpenAIServer, extraction

    server = FakeOpenAIServer()
    numbers = iter(range(10**9))
    server.reply = lambda request: extraction(_proposed_facts(next(numbers)))
    server.start()
    settings = Settings(
        _env_file=None,
        database_url=SecretStr(runtime_url),
        migration_database_url=SecretStr(owner_url),
        rate_limit_enabled=False,
        jobs_enabled=False,
        migrate_on_start=False,
        thread_summary_keep_recent=0,
        owner_vector_index_refresh_seconds=0,
        extraction_strategy="every_turn",
        llm_base_url=server.base_url,
        llm_api_key=API_KEY,
        llm_model=MODEL,
        llm_max_retries=0,
    )
    figures: dict[str, Any] = {}
    try:
        app = create_app(settings)
        async with (
            LifespanManager(app),
            AsyncClient(transport=ASGITransport(app=app), base_url="http://mneme.bench") as client,
        ):
            write_path = WritePath(app.state.mneme)
            for size in sizes:
                tenant, user = f"bench-real-{size}", f"owner-{size}"
                headers = {
                    "Authorization": "Bearer "
                    + mint_dev_token(settings, tenant_id=tenant, user_id=user)
                }
                threads = f"/v1/users/{user}/threads"
                created = await client.post(threads, json={"title": "pass"}, headers=headers)
                created.raise_for_status()
                thread_id = created.json()["id"]
                seconds: list[float] = []
                written = 0
                failed: str | None = None
                try:
                    for number in range(passes + 1):
                        appended = await client.post(
                            f"{threads}/{thread_id}/messages",
                            json={
                                "messages": [
                                    {"role": "user", "content": f"Some news, number {number}."},
                                    {"role": "assistant", "content": "Noted, thank you."},
                                ]
                            },
                            headers=headers,
                        )
                        appended.raise_for_status()
                        started = time.perf_counter()
                        outcomes = await write_path.extract(
                            tenant, uuid.UUID(thread_id), org_writes=False
                        )
                        if number:
                            seconds.append(time.perf_counter() - started)
                            written += sum(
                                len(outcome.record.written)
                                for outcome in outcomes
                                if outcome.record is not None
                            )
                except Exception as error:  # a version's failing pass is a figure
                    failed = f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"
                finally:
                    deleted = await client.delete(
                        f"{threads}/{thread_id}?cascade=memories", headers=headers
                    )
                    deleted.raise_for_status()
                figures[size] = {"seconds": seconds, "written": written, "failed": failed}
    finally:
        server.stop()
    return figures


def _run_child(
    version: Version, runtime_url: str, owner_url: str, sizes: Sequence[str], passes: int
) -> dict[str, Any]:
    """`measure` run by `version`'s code in a child process."""
    arguments = ["--runtime-url", runtime_url, "--owner-url", owner_url]
    arguments += ["--sizes", ",".join(sizes), "--passes", str(passes)]
    figures: dict[str, Any] = json.loads(
        run_in_child(version, Path(__file__), arguments, "the passes")
    )
    return figures


def report(
    versions: Sequence[Version], sizes: Sequence[str], runs: dict[str, list[dict[str, Any]]]
) -> str:
    """Per size, each version's p50 pass (or why its passes failed) and the facts written."""
    first = versions[0].name
    lines = [
        "| owner | " + " | ".join(f"{v.name} p50" for v in versions) + " | facts written |",
        "| --- | " + " | ".join("---:" for _ in versions) + " | --- |",
    ]
    for size in sizes:
        p50: dict[str, float | None] = {}
        failures: dict[str, str] = {}
        for name, figures in runs.items():
            failed = [run[size]["failed"] for run in figures if run[size]["failed"]]
            seconds = [s for run in figures for s in run[size]["seconds"]]
            p50[name] = None if failed or not seconds else statistics.median(seconds)
            if failed:
                failures[name] = failed[0]
        cells = []
        for version in versions:
            value, baseline = p50[version.name], p50[first]
            if value is None:
                cells.append(f"fails ({failures.get(version.name, 'no pass')})")
            elif version.name == first or baseline is None:
                cells.append(f"{value * 1000:.1f} ms")
            else:
                cells.append(f"{value * 1000:.1f} ms ({value / baseline - 1:+.1%})")
        written = ", ".join(
            f"{name} {sum(run[size]['written'] for run in figures)}"
            for name, figures in runs.items()
        )
        lines.append(f"| {size} | " + " | ".join(cells) + f" | {written} |")
    return "\n".join(lines) + "\n"


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=DIR")
    parser.add_argument(
        "--data",
        type=Path,
        default=Path(tempfile.gettempdir()) / "mneme-statement-replay",
        help="where statement_replay keeps the scenario's database (default: %(default)s)",
    )
    parser.add_argument("--passes", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=2)
    # The child's side.
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--runtime-url", help=argparse.SUPPRESS)
    parser.add_argument("--owner-url", help=argparse.SUPPRESS)
    parser.add_argument("--sizes", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _arguments(argv)
    if arguments.out is not None:
        figures = asyncio.run(
            measure(
                arguments.runtime_url,
                arguments.owner_url,
                arguments.sizes.split(","),
                arguments.passes,
            )
        )
        arguments.out.write_text(json.dumps(figures), encoding="utf-8")
        return 0
    try:
        versions = [parse_version(spec, with_environment=False) for spec in arguments.tree]
    except ValueError as error:
        sys.stderr.write(f"extraction_pass: {error}\n")
        return 2
    if len(versions) < 2 or len({v.name for v in versions}) < len(versions):
        sys.stderr.write("extraction_pass: give two or more --tree with distinct names\n")
        return 2
    if arguments.passes < 1 or arguments.rounds < 1:
        sys.stderr.write("extraction_pass: --passes and --rounds must be at least 1\n")
        return 2
    scenario = kept_scenario(arguments.data, "extraction_pass")
    if scenario is None:
        return 2
    sizes = scenario["sizes"]
    cluster, runtime_url, owner_url = _cluster_urls(arguments.data)
    runs: dict[str, list[dict[str, Any]]] = {version.name: [] for version in versions}
    try:
        for round_number in range(arguments.rounds):
            order = versions if round_number % 2 == 0 else versions[::-1]
            for version in order:
                runs[version.name].append(
                    _run_child(version, runtime_url, owner_url, sizes, arguments.passes)
                )
    except RuntimeError as error:
        sys.stderr.write(f"extraction_pass: {error}\n")
        return 1
    finally:
        cluster.stop()
    sys.stdout.write(report(versions, sizes, runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
