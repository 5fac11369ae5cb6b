"""`mneme bench retrieval` (retrieval quality on LoCoMo or LongMemEval) and `mneme bench load`
(latency, throughput, ingest and recall at 10k-1M memories), one command each.

By default a throwaway embedded Postgres is started in a temporary directory, migrated, used
and deleted; for `retrieval`, `--database-url` points the run at an existing server instead
(each run then adds its own `bench-…` tenants there). `load` always uses a throwaway database:
it fills the memory table through COPY and builds the largest owners' vector indexes after each
load. `cluster` loads one corpus into the database `--database-url` names (a Citus cluster, say;
no index is built or dropped there, its run's tenants are deleted at the end) and into a
throwaway single node, and compares search there. Settings come from the
environment (MNEME_*, .env) as for the service, except that rate limiting is off and tokens are
signed with a per-run secret.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import secrets
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr, ValidationError

from benchmarks.datasets import (
    DATASET_FORMATS,
    STORED_MEMORIES,
    DatasetError,
    DatasetMissing,
    load_dataset,
)
from benchmarks.modes import DEFAULT_MODES, MODE_GRAMMAR, parse_modes
from service.config import Settings
from service.db_migrations import PROJECT_ROOT

if TYPE_CHECKING:
    from benchmarks.load import LoadOptions
    from benchmarks.scenario import ScenarioOptions

DEFAULT_DATASET = PROJECT_ROOT.parent / "shared" / "bench" / "locomo10.json"
DATASET_ENV = "MNEME_BENCH_DATASET"
BENCH_INSTALL = "pip install -e '.[bench]'"
LOCOMO_SOURCE = "https://github.com/snap-research/locomo (the file data/locomo10.json)"
RESULTS_DIR = PROJECT_ROOT / "bench-results"
SYNTHETIC_SIZES = "10k,100k,1m"
REALISTIC_SIZES = "1k,10k,100k"
# `mneme bench load --reference`: the names `benchmarks.rawsql.reference_statement` knows.
REFERENCE_CHOICES = ("exact", "as-planned")


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
        description=(
            "Benchmarks that drive the real service through its HTTP API: in-process "
            "(retrieval) or under uvicorn on loopback (load)."
        ),
    )
    add_bench_commands(bench)


def add_bench_commands(parser: argparse.ArgumentParser) -> None:
    benchmarks = parser.add_subparsers(dest="bench_command", required=True)
    retrieval = benchmarks.add_parser(
        "retrieval",
        help="retrieval quality (recall@k, MRR, nDCG, latency) on LoCoMo or LongMemEval",
        description=(
            "Store every dialogue turn as an episodic memory (or, with --memories, LoCoMo's "
            "observations as facts, alone or beside the turns; a fresh tenant per "
            "conversation), search every question in each mode, score against the gold turns. "
            "Prints markdown "
            "tables and writes every number, with the configuration, to a JSON file."
        ),
    )
    retrieval.add_argument(
        "--dataset",
        type=Path,
        default=Path(os.environ.get(DATASET_ENV) or DEFAULT_DATASET),
        help=f"benchmark file (default: ${DATASET_ENV}, else ../shared/bench/locomo10.json "
        "beside the project)",
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
        "--without-decay",
        dest="with_decay",
        action="store_false",
        help="set the recency and confidence weights to 0 (default: the service's settings)",
    )
    retrieval.add_argument(
        "--memories",
        choices=STORED_MEMORIES,
        default="turns",
        help="what is stored: every dialogue turn as an episodic memory (turns), LoCoMo's "
        "observations as facts (semantic memories in their session's thread), each found when "
        "a question's gold turns are among those it rests on, or both in the same threads, each "
        "fact right after the last turn it rests on (default: %(default)s)",
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
        "--embedding-profile",
        metavar="NAME",
        help="the embedding model's profile (docs/embedding-models.md; default: the model's "
        "own, as MNEME_EMBEDDING_PROFILE)",
    )
    retrieval.add_argument(
        "--embedding-model",
        type=Path,
        metavar="PATH",
        help="an ONNX model file for the local provider, tokenizer.json beside it (its sha256 "
        "is computed here: the file measured is the file given)",
    )
    retrieval.add_argument(
        "--embedding-dims",
        type=_positive,
        metavar="N",
        help="the vector column's size (a Matryoshka model is cut to it; default: the settings')",
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

    _add_load_parser(benchmarks)
    _add_cluster_parser(benchmarks)


def _add_load_parser(benchmarks: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    load = benchmarks.add_parser(
        "load",
        help="search latency/throughput (HTTP vs raw SQL), ingest rate and vector recall at "
        "scale; --scenario realistic: owners of 1k-100k memories in the write path's style",
        description=(
            "Grow a corpus through a bulk COPY path in a throwaway embedded Postgres and measure "
            "it at each size. --scenario synthetic (the default): a templated corpus (N tenants "
            "x M users x K memories); search latency through the HTTP service (uvicorn on "
            "127.0.0.1) and through the same fusion statement on asyncpg, at several client "
            "counts; recall@10 of the filtered vector path against an exact scan; ingest "
            "through POST …/memories/batch. --scenario realistic: one owner per size (1k, 10k, "
            "100k memories) whose facts ('User …'), episodes ('User shared: …') and chat turns "
            "(speaker, thread, time) are made by rules from the LoCoMo conversations read at "
            "run time, with organization memory and 2x as many memories of other users and "
            "tenants; search p50/p95 over HTTP with cached question vectors at each client "
            "count, a never-seen question's search (embedding included), the context call, "
            "recall@10 of the service's top 10 against a reference ranking (--reference), API "
            "ingest and COPY rates, and how long each size took to load. Prints markdown "
            "tables and writes every number, with the configuration, to a JSON file."
        ),
    )
    load.add_argument(
        "--scenario",
        choices=("synthetic", "realistic"),
        default="synthetic",
        help="synthetic: templated corpus, many users of K memories; realistic: owners of "
        "each size in the write path's style, from LoCoMo's text (default: %(default)s)",
    )
    load.add_argument(
        "--sizes",
        help="corpus sizes in user memories, grown in this order; for the realistic scenario "
        "the measured owner's memories (default: 10k,100k,1m; realistic: 1k,10k,100k)",
    )
    load.add_argument(
        "--dataset",
        type=Path,
        default=Path(os.environ.get(DATASET_ENV) or DEFAULT_DATASET),
        help=f"realistic: the LoCoMo file whose conversations give the text (default: "
        f"${DATASET_ENV}, else ../shared/bench/locomo10.json beside the project)",
    )
    load.add_argument(
        "--reference",
        choices=tuple(REFERENCE_CHOICES),
        default="exact",
        help="realistic: the ranking the service's top 10 is compared with; exact = the "
        "service's statement with index scans off (default: %(default)s)",
    )
    load.add_argument(
        "--never-seen-queries",
        type=_positive,
        default=100,
        help="realistic: questions asked once each, embedded by the service (default: %(default)s)",
    )
    load.add_argument(
        "--memories-per-user",
        type=_positive,
        default=250,
        metavar="K",
        help="memories of every user; sizes must be multiples of it (realistic: of every user "
        "but the measured owners) (default: %(default)s)",
    )
    load.add_argument(
        "--users-per-tenant",
        type=_positive,
        default=10,
        metavar="M",
        help="users per tenant (realistic: per tenant of other users) (default: %(default)s)",
    )
    load.add_argument(
        "--org-memories-per-tenant",
        type=_non_negative,
        default=20,
        metavar="N",
        help="org-shared memories per tenant, on top of the sizes (realistic: per tenant of "
        "other users; the owner's tenant has 5%% of its size) (default: %(default)s)",
    )
    load.add_argument(
        "--small-tenants",
        type=_non_negative,
        default=0,
        metavar="T",
        help="realistic: T more tenants, loaded with the first size, of 4 users of 40 "
        "memories and 5 of the organization's each, so each measured tenant is a small "
        "share of the table as in a service of many tenants (default: %(default)s)",
    )
    load.add_argument("--seed", type=int, default=4, help="corpus seed (default: %(default)s)")
    load.add_argument(
        "--pool-size",
        type=_positive,
        default=4096,
        help="distinct sentences embedded with the configured embedder (default: %(default)s)",
    )
    load.add_argument(
        "--vector-noise",
        type=float,
        default=0.15,
        help="norm of the Gaussian noise added to a pool vector per row; 0.15 keeps a row as "
        "close to its pool sentence as its true embedding is (default: %(default)s)",
    )
    load.add_argument(
        "--concurrency",
        default="1,8,32",
        help="concurrent clients per measurement (default: %(default)s)",
    )
    load.add_argument(
        "--requests",
        type=_positive,
        default=1000,
        help="searches per client count and path (default: %(default)s)",
    )
    load.add_argument(
        "--level-seconds",
        type=float,
        default=30.0,
        help="stop a client count's measurement after this long (default: %(default)s)",
    )
    load.add_argument(
        "--queries",
        type=_positive,
        default=200,
        help="distinct questions sampled per size (default: %(default)s)",
    )
    load.add_argument(
        "--recall-queries",
        type=_positive,
        default=100,
        help="questions whose recall@10 is measured per size (default: %(default)s)",
    )
    load.add_argument(
        "--api-rows",
        type=_non_negative,
        default=2000,
        help="memories stored through POST …/memories/batch per size; 0 skips (default: "
        "%(default)s)",
    )
    load.add_argument(
        "--heavy-user",
        default="0",
        metavar="SIZE",
        help="also load one user owning SIZE memories (e.g. 100k; in a tenant of their own, "
        "with the largest size) and measure their searches: service, raw statement, vector "
        "strategies and recall (default: none; `--sizes 900k --heavy-user 100k` is 1M rows)",
    )
    load.add_argument(
        "--load-connections",
        type=_positive,
        default=2,
        help="parallel COPY connections (default: %(default)s)",
    )
    load.add_argument(
        "--out",
        type=Path,
        help="JSON results file (default: bench-results/load-<UTC time>.json in the project)",
    )
    load.add_argument(
        "--no-progress", dest="progress", action="store_false", help="no progress on stderr"
    )
    # The run fills the memory table and builds indexes on it: only ever in a throwaway database.
    load.set_defaults(database_url=None, migration_database_url=None)


def _non_negative(value: str) -> int:
    number = int(value)
    if number < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, not {number}")
    return number


def run_bench(args: argparse.Namespace) -> int:
    """Run the benchmark the parsed arguments name; returns the process exit code."""
    if args.bench_command == "retrieval":
        return _run_retrieval(args)
    if args.bench_command == "load":
        return _run_load(args)
    if args.bench_command == "cluster":
        return _run_cluster(args)
    raise ValueError(f"unknown benchmark {args.bench_command!r}")


def _write_report(
    report: dict[str, Any], out: Path | None, kind: str, render: Callable[[dict[str, Any]], str]
) -> int:
    """Write `report` as JSON (to `out`, else a timestamped file in bench-results/) and print
    it rendered as markdown."""
    path = out or RESULTS_DIR / f"{kind}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    sys.stdout.write(render(report))
    sys.stderr.write(f"results written to {path}\n")
    return 0


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
        # The run builds the owners' vector indexes itself, right after each load; a refresh
        # of the served app's own could start in the middle of a measurement.
        "owner_vector_index_refresh_seconds": 0,
    }
    for option, setting in (
        ("embedding_profile", "embedding_profile"),
        ("embedding_dims", "embedding_dims"),
    ):
        value = getattr(args, option, None)
        if value is not None:
            overrides[setting] = value
    model: Path | None = getattr(args, "embedding_model", None)
    if model is not None:
        overrides["embedding_local_model_path"] = model
        overrides["embedding_local_model_sha256"] = hashlib.sha256(model.read_bytes()).hexdigest()
    return Settings(**overrides)


def _locomo_hint() -> str:
    """Where LoCoMo comes from, for a run that found no file to read."""
    return (
        "LoCoMo is licensed CC BY-NC 4.0: it is used here for evaluation only and is not part "
        "of this repository, so bring your own copy.\n"
        f"By default the benchmark reads {DEFAULT_DATASET} (../shared/bench/locomo10.json "
        f"beside the project); point it at a copy with --dataset PATH or {DATASET_ENV}=PATH.\n"
        f"LoCoMo is published at {LOCOMO_SOURCE}."
    )


def _run_retrieval(args: argparse.Namespace) -> int:
    try:
        # Imported here: the harness needs the bench extra (httpx, asgi-lifespan), which the
        # rest of the command line does not.
        from benchmarks.database import throwaway_database
        from benchmarks.report import build_report, render_markdown
        from benchmarks.retrieval import (
            BenchmarkError,
            RetrievalOptions,
            RetrievalRun,
            benchmark_app,
        )
    except ModuleNotFoundError as exc:
        return _fail(f"{exc.name} is missing; install the bench extra: {BENCH_INSTALL}")

    if args.migration_database_url and not args.database_url:
        return _fail("--migration-database-url needs --database-url")
    try:
        modes = parse_modes(args.modes)
        dataset = load_dataset(
            args.dataset, args.format, image_captions=args.image_captions
        ).selected(conversations=args.limit_conversations, questions=args.limit_questions)
        settings = _settings(args)
    except DatasetMissing as exc:
        return _fail(f"{exc}\n{_locomo_hint()}" if args.format == "locomo" else str(exc))
    except (ValueError, DatasetError) as exc:
        return _fail(str(exc))
    except ValidationError as exc:
        return _fail(f"invalid settings: {exc}")
    if dataset.question_count == 0:
        return _fail(f"{args.dataset} has no question to evaluate")
    if args.memories != "turns" and dataset.observation_count == 0:
        return _fail(f"{args.dataset} has no observations to store (LoCoMo's have)")
    options = RetrievalOptions(
        modes=modes, with_decay=args.with_decay, progress=args.progress, memories=args.memories
    )

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
    return _write_report(report, args.out, "retrieval", render_markdown)


def _load_options(args: argparse.Namespace) -> LoadOptions:
    from benchmarks.corpus import CorpusShape
    from benchmarks.load import LoadOptions, parse_concurrency, parse_sizes

    shape = CorpusShape(
        memories_per_user=args.memories_per_user,
        users_per_tenant=args.users_per_tenant,
        org_memories_per_tenant=args.org_memories_per_tenant,
        seed=args.seed,
    )
    sizes = parse_sizes(args.sizes or SYNTHETIC_SIZES)
    for size in sizes:
        shape.users_for(size)
    if args.small_tenants:
        raise ValueError("--small-tenants belongs to the realistic scenario")
    if args.vector_noise < 0:
        raise ValueError("--vector-noise must be at least 0")
    if max(shape.memories_per_user, shape.org_memories_per_tenant) > args.pool_size:
        raise ValueError("--pool-size must be at least the memories of one user (or org)")
    return LoadOptions(
        sizes=sizes,
        shape=shape,
        pool_size=args.pool_size,
        vector_noise=args.vector_noise,
        concurrency=parse_concurrency(args.concurrency),
        requests=args.requests,
        level_seconds=args.level_seconds,
        queries=args.queries,
        recall_queries=min(args.recall_queries, args.queries),
        api_rows=args.api_rows,
        load_connections=args.load_connections,
        progress=args.progress,
        heavy_user=0 if args.heavy_user in {"0", ""} else parse_sizes(args.heavy_user)[0],
    )


def _scenario_options(args: argparse.Namespace) -> ScenarioOptions:
    from benchmarks.load import parse_concurrency, parse_sizes
    from benchmarks.scenario import ScenarioOptions
    from benchmarks.scenario_corpus import ScenarioShape

    if args.heavy_user not in {"0", ""}:
        raise ValueError("--heavy-user belongs to the synthetic scenario")
    if args.vector_noise < 0:
        raise ValueError("--vector-noise must be at least 0")
    return ScenarioOptions(
        sizes=parse_sizes(args.sizes or REALISTIC_SIZES),
        dataset=args.dataset,
        shape=ScenarioShape(
            seed=args.seed,
            background_user_memories=args.memories_per_user,
            users_per_tenant=args.users_per_tenant,
            org_per_tenant=args.org_memories_per_tenant,
            small_tenants=args.small_tenants,
        ),
        reference=args.reference,
        vector_noise=args.vector_noise,
        concurrency=parse_concurrency(args.concurrency),
        requests=args.requests,
        level_seconds=args.level_seconds,
        queries=args.queries,
        recall_queries=min(args.recall_queries, args.queries),
        fresh_queries=args.never_seen_queries,
        api_rows=args.api_rows,
        load_connections=args.load_connections,
        progress=args.progress,
    )


def _run_load(args: argparse.Namespace) -> int:
    try:
        from benchmarks.bulk import BulkLoadRefused
        from benchmarks.database import throwaway_database
        from benchmarks.load import LoadBenchmarkError, LoadRun
        from benchmarks.load_report import build_load_report, render_load_markdown
        from benchmarks.load_run import run_load
        from benchmarks.server import ServerFailed
    except ModuleNotFoundError as exc:
        return _fail(f"{exc.name} is missing; install the bench extra: {BENCH_INSTALL}")
    if args.scenario == "realistic":
        return _run_realistic(args)
    try:
        options = _load_options(args)
        settings = _settings(args)
    except ValueError as exc:
        return _fail(str(exc))
    except ValidationError as exc:
        return _fail(f"invalid settings: {exc}")

    async def measure() -> tuple[Settings, LoadRun]:
        async with throwaway_database(settings) as database_settings:
            return database_settings, await run_load(database_settings, options)

    started = time.perf_counter()
    try:
        used_settings, run = asyncio.run(measure())
    except (LoadBenchmarkError, BulkLoadRefused, ServerFailed) as exc:
        return _fail(str(exc), code=1)
    report = build_load_report(
        run=run,
        options=options,
        settings=used_settings,
        wall_seconds=time.perf_counter() - started,
    )
    return _write_report(report, args.out, "load", render_load_markdown)


def _run_realistic(args: argparse.Namespace) -> int:
    from benchmarks.bulk import BulkLoadRefused
    from benchmarks.database import throwaway_database
    from benchmarks.load import LoadBenchmarkError
    from benchmarks.scenario import ScenarioRun, run_scenario
    from benchmarks.scenario_report import build_scenario_report, render_scenario_markdown
    from benchmarks.server import ServerFailed

    try:
        options = _scenario_options(args)
        # Read once before anything starts, so a missing or malformed file fails at once.
        load_dataset(options.dataset, "locomo", image_captions=False)
        settings = _settings(args)
    except DatasetMissing as exc:
        return _fail(f"{exc}\n{_locomo_hint()}")
    except (ValueError, DatasetError) as exc:
        return _fail(str(exc))
    except ValidationError as exc:
        return _fail(f"invalid settings: {exc}")

    async def measure() -> tuple[Settings, ScenarioRun]:
        async with throwaway_database(settings) as database_settings:
            return database_settings, await run_scenario(database_settings, options)

    started = time.perf_counter()
    try:
        used_settings, run = asyncio.run(measure())
    except (LoadBenchmarkError, BulkLoadRefused, ServerFailed, ValueError) as exc:
        return _fail(str(exc), code=1)
    report = build_scenario_report(
        run=run,
        options=options,
        settings=used_settings,
        wall_seconds=time.perf_counter() - started,
    )
    return _write_report(report, args.out, "load-realistic", render_scenario_markdown)


def _add_cluster_parser(benchmarks: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cluster = benchmarks.add_parser(
        "cluster",
        help="search on a given database (e.g. Citus) against a single node with the same corpus",
        description=(
            "Load the load benchmark's synthetic corpus through COPY into the database "
            "--database-url names (no index built or dropped there; the run's own tenants, "
            "deleted at the end) and into a throwaway embedded Postgres, which builds the "
            "largest owners' vector indexes after the load, then search both through the HTTP "
            "service and through the bare fusion statement in alternating rounds, compare the "
            "hits id for id, and EXPLAIN ANALYZE the statement on each (on Citus: tasks, "
            "worker, the shard's plan). Prints markdown and writes a JSON file."
        ),
    )
    cluster.add_argument(
        "--database-url", required=True, help="the runtime role's URL (on Citus: the coordinator)"
    )
    cluster.add_argument(
        "--migration-database-url",
        required=True,
        help="the owner's URL (BYPASSRLS: COPY into tables under row-level security)",
    )
    cluster.add_argument(
        "--size", default="100k", help="user memories in the corpus (default: %(default)s)"
    )
    cluster.add_argument("--memories-per-user", type=_positive, default=250, metavar="K")
    cluster.add_argument("--users-per-tenant", type=_positive, default=10, metavar="M")
    cluster.add_argument("--org-memories-per-tenant", type=_non_negative, default=20, metavar="N")
    cluster.add_argument("--seed", type=int, default=4)
    cluster.add_argument("--pool-size", type=_positive, default=4096)
    cluster.add_argument(
        "--concurrency", default="1,8", help="client counts (default: %(default)s)"
    )
    cluster.add_argument(
        "--rounds", type=_positive, default=10, help="alternating rounds (default: %(default)s)"
    )
    cluster.add_argument(
        "--requests-per-round",
        type=_positive,
        default=40,
        help="searches per database, path and client count in a round (default: %(default)s)",
    )
    cluster.add_argument(
        "--queries", type=_positive, default=200, help="distinct questions (default: %(default)s)"
    )
    cluster.add_argument(
        "--explains",
        type=_positive,
        default=20,
        help="questions whose statement is EXPLAIN ANALYZEd on each database "
        "(default: %(default)s)",
    )
    cluster.add_argument(
        "--out",
        type=Path,
        help="JSON results file (default: bench-results/cluster-<UTC time>.json in the project)",
    )
    cluster.add_argument(
        "--no-progress", dest="progress", action="store_false", help="no progress on stderr"
    )


def _run_cluster(args: argparse.Namespace) -> int:
    try:
        from benchmarks.bulk import BulkLoadRefused
        from benchmarks.cluster import (
            ClusterOptions,
            build_cluster_report,
            render_cluster_markdown,
            run_cluster,
            run_prefix,
        )
        from benchmarks.corpus import CorpusShape
        from benchmarks.load import LoadBenchmarkError, parse_concurrency, parse_sizes
        from benchmarks.server import ServerFailed
    except ModuleNotFoundError as exc:
        return _fail(f"{exc.name} is missing; install the bench extra: {BENCH_INSTALL}")
    try:
        shape = CorpusShape(
            memories_per_user=args.memories_per_user,
            users_per_tenant=args.users_per_tenant,
            org_memories_per_tenant=args.org_memories_per_tenant,
            seed=args.seed,
            tenant_prefix=run_prefix(),
        )
        [size] = parse_sizes(args.size)
        shape.users_for(size)
        options = ClusterOptions(
            size=size,
            shape=shape,
            pool_size=args.pool_size,
            concurrency=parse_concurrency(args.concurrency),
            rounds=args.rounds,
            requests_per_round=args.requests_per_round,
            queries=args.queries,
            explains=min(args.explains, args.queries),
            progress=args.progress,
        )
        settings = _settings(args)
    except ValueError as exc:
        return _fail(str(exc))
    except ValidationError as exc:
        return _fail(f"invalid settings: {exc}")
    try:
        run = asyncio.run(run_cluster(settings, options))
    except (LoadBenchmarkError, BulkLoadRefused, ServerFailed) as exc:
        return _fail(str(exc), code=1)
    report = build_cluster_report(run, options)
    return _write_report(report, args.out, "cluster", render_cluster_markdown)


def main(argv: list[str] | None = None) -> int:
    """`python -m benchmarks …`, the same as `mneme bench …`."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description="Benchmarks of the Mneme service."
    )
    add_bench_commands(parser)
    return run_bench(parser.parse_args(argv))
