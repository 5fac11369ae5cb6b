"""`mneme bench retrieval`: retrieval quality on LoCoMo or LongMemEval, in one command.

By default a throwaway embedded Postgres is started in a temporary directory, migrated, used
and deleted; `--database-url` points the run at an existing server instead (each run then adds
its own `bench-…` tenants there). Settings come from the environment (MNEME_*, .env) as for the
service, except that rate limiting is off and tokens are signed with a per-run secret.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import SecretStr, ValidationError

from service.bench.datasets import DATASET_FORMATS, DatasetError, load_dataset
from service.bench.modes import DEFAULT_MODES, MODE_GRAMMAR, parse_modes
from service.config import Settings
from service.db_migrations import PROJECT_ROOT

DEFAULT_DATASET = PROJECT_ROOT.parent / "shared" / "bench" / "locomo10.json"
RESULTS_DIR = PROJECT_ROOT / "bench-results"


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {number}")
    return number


def add_bench_parser(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `bench` and its benchmarks to the `mneme` command line."""
    bench = subcommands.add_parser(
        "bench",
        help="benchmark the service through its HTTP API",
        description="Benchmarks that drive the real service in-process through its HTTP API.",
    )
    add_bench_commands(bench)


def add_bench_commands(parser: argparse.ArgumentParser) -> None:
    benchmarks = parser.add_subparsers(dest="bench_command", required=True)
    retrieval = benchmarks.add_parser(
        "retrieval",
        help="retrieval quality (recall@k, MRR, nDCG, latency) on LoCoMo or LongMemEval",
        description=(
            "Store every dialogue turn as an episodic memory (a fresh tenant per conversation), "
            "search every question in each mode, score against the gold turns. Prints markdown "
            "tables and writes every number, with the configuration, to a JSON file."
        ),
    )
    retrieval.add_argument(
        "--dataset",
        type=Path,
        default=DEFAULT_DATASET,
        help="benchmark file (default: ../shared/bench/locomo10.json beside the project)",
    )
    retrieval.add_argument(
        "--format",
        choices=DATASET_FORMATS,
        default="locomo",
        help="locomo (locomo10.json) or longmemeval (official JSON: longmemeval_s/m/oracle)",
    )
    retrieval.add_argument(
        "--modes",
        default=DEFAULT_MODES,
        help=f"comma-separated search modes, each {MODE_GRAMMAR} (default: %(default)s)",
    )
    retrieval.add_argument(
        "--with-decay",
        action="store_true",
        help="keep the service's recency and confidence weights (default: both 0)",
    )
    retrieval.add_argument(
        "--no-image-captions",
        dest="image_captions",
        action="store_false",
        help="store LoCoMo image turns without their BLIP caption (default: appended)",
    )
    retrieval.add_argument(
        "--limit-conversations",
        type=_positive,
        metavar="N",
        help="only the first N conversations (LongMemEval: the first N questions' haystacks)",
    )
    retrieval.add_argument(
        "--limit-questions",
        type=_positive,
        metavar="N",
        help="only the first N evaluable questions, in file order; conversations left without "
        "questions are not loaded",
    )
    retrieval.add_argument(
        "--database-url",
        help="use this server (the runtime role's URL) instead of a throwaway embedded one",
    )
    retrieval.add_argument(
        "--migration-database-url",
        help="owner URL for migrations with --database-url (default: --database-url)",
    )
    retrieval.add_argument(
        "--out",
        type=Path,
        help="JSON results file (default: bench-results/retrieval-<UTC time>.json in the project)",
    )
    retrieval.add_argument(
        "--no-progress",
        dest="progress",
        action="store_false",
        help="no progress bars on stderr",
    )


def run_bench(args: argparse.Namespace) -> int:
    """Run the benchmark the parsed arguments name; returns the process exit code."""
    if args.bench_command == "retrieval":
        return _run_retrieval(args)
    raise ValueError(f"unknown benchmark {args.bench_command!r}")


def _fail(message: str, code: int = 2) -> int:
    sys.stderr.write(f"mneme bench: {message}\n")
    return code


def _settings(args: argparse.Namespace) -> Settings:
    overrides: dict[str, Any] = {
        # Thousands of searches a minute from one caller are the point here, not abuse.
        "rate_limit_enabled": False,
        # The run mints its own tokens for its own in-process app.
        "jwt_hs256_secret": SecretStr(secrets.token_urlsafe(32)),
        # Unset means the throwaway embedded database, whatever MNEME_DATABASE_URL says.
        "database_url": SecretStr(args.database_url) if args.database_url else None,
        "migration_database_url": (
            SecretStr(args.migration_database_url) if args.migration_database_url else None
        ),
    }
    return Settings(**overrides)


def _run_retrieval(args: argparse.Namespace) -> int:
    try:
        # Imported here: the harness needs the dev extras (httpx, asgi-lifespan), which the
        # rest of the command line does not.
        from service.bench.database import throwaway_database
        from service.bench.report import build_report, render_markdown
        from service.bench.retrieval import (
            BenchmarkError,
            RetrievalOptions,
            RetrievalRun,
            benchmark_app,
        )
    except ModuleNotFoundError as exc:
        return _fail(f"{exc.name} is missing; install the dev extras: pip install -e '.[dev]'")

    if args.migration_database_url and not args.database_url:
        return _fail("--migration-database-url needs --database-url")
    try:
        modes = parse_modes(args.modes)
        dataset = load_dataset(
            args.dataset, args.format, image_captions=args.image_captions
        ).selected(conversations=args.limit_conversations, questions=args.limit_questions)
        settings = _settings(args)
    except (ValueError, DatasetError) as exc:
        return _fail(str(exc))
    except ValidationError as exc:
        return _fail(f"invalid settings: {exc}")
    if dataset.question_count == 0:
        return _fail(f"{args.dataset} has no question to evaluate")
    options = RetrievalOptions(modes=modes, with_decay=args.with_decay, progress=args.progress)

    async def measure() -> tuple[Settings, RetrievalRun]:
        if settings.database_url is not None:
            return settings, await benchmark_app(settings, dataset, options)
        async with throwaway_database(settings) as database_settings:
            return database_settings, await benchmark_app(database_settings, dataset, options)

    started = time.perf_counter()
    try:
        used_settings, run = asyncio.run(measure())
    except BenchmarkError as exc:
        return _fail(str(exc), code=1)
    report = build_report(
        dataset=dataset,
        run=run,
        options=options,
        settings=used_settings,
        database="external" if args.database_url else "throwaway embedded",
        limits={"conversations": args.limit_conversations, "questions": args.limit_questions},
        wall_seconds=time.perf_counter() - started,
    )
    out: Path = args.out or RESULTS_DIR / (
        f"retrieval-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    sys.stdout.write(render_markdown(report))
    sys.stderr.write(f"results written to {out}\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m service.bench …`, the same as `mneme bench …`."""
    parser = argparse.ArgumentParser(
        prog="python -m service.bench", description="Benchmarks of the Mneme service."
    )
    add_bench_commands(parser)
    return run_bench(parser.parse_args(argv))
