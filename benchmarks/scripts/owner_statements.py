"""What one database connection holds, and what a search costs on it, as it serves more and
more search texts of one kind: the texts of owners with vector indexes of their own (the owner
written in, a text per large owner) or the texts every owner shares (a text per filter shape).
Those texts run through the driver's shared statement cache, or kept apart from it, each kind
on a bounded shelf of its own (`fetch_search`: `MNEME_DB_OWNER_STATEMENT_CACHE_SIZE`,
`MNEME_DB_SEARCH_STATEMENT_CACHE_SIZE`), side by side in one run.

Run from the repository root, after `statement_replay` has loaded the scenario under `--data`:

    python -m benchmarks.scripts.owner_statements [--data DIR] [--owners 10,40,120]
        [--shapes 10,40,120] [--kept 20] [--shared 100] [--rounds 3] [--small-every 5]

The largest owner's search (the first question of the largest size loaded, such as 100k, its
statement as the service sends it: with the owner written in where the owner has vector indexes
of its own, which the report says) stands for `--owners` large owners: as many texts that
differ only in a trailing comment, as the texts of that many owners differ only in the owner
they name. The smallest owner's search (the first question of the smallest size, such as 1k: a
text every small owner shares) stands for `--shapes` filter shapes the same way. On one
connection (as the superuser, every statement as the runtime role, under row-level security,
each in a transaction with the tenant set, as a request runs it), each text is searched in turn
for `--rounds` rounds, with the smallest owner's own search after every `--small-every`th.
Each way of keeping the texts gets a connection of its own: "shared", every text in the
driver's cache of `--shared` statements (least recently used first out); "apart", as the
service keeps them: the rotating texts on their kind's shelf of at most `--kept`, the smallest
owner's search on the shapes' shelf (of the configured size when the rotating texts are
owners'; beside the rotating ones when they are shapes, as it is one).

Prints, per kind, number of texts and way: the statements the backend holds prepared
(`pg_prepared_statements`) and its memory (`pg_backend_memory_contexts`, every context's total)
after the last round, and the p50 of a rotating text's search and of the smallest owner's in
the rounds after the first (the first prepares every text either way). Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.scripts.statement_replay import (
    SERVER_FILE,
    _cluster_urls,
    as_the_service_runs,
    compile_statements,
    kept_scenario,
)
from service.memories.fusion.statement import owner_literal

MEMORY_SQL = "SELECT sum(total_bytes) FROM pg_backend_memory_contexts"
HELD_SQL = "SELECT count(*) FROM pg_prepared_statements"


@dataclass
class Run:
    held: int = 0
    memory_bytes: int = 0
    large_seconds: list[float] = field(default_factory=list)
    small_seconds: list[float] = field(default_factory=list)


async def _timed(
    connection: Any, statement: dict[str, Any], sql: str, *, apart: bool, owners_written: bool
) -> float:
    """One search as a request runs it: a transaction with the tenant and the search's plan
    settings, the statement, COMMIT; its statement's time."""
    from service.db import fetch_search

    async with as_the_service_runs(connection, statement):
        started = time.perf_counter()
        if apart:
            rows = await fetch_search(
                connection, sql, *statement["values"], owners_written=owners_written
            )
        else:
            rows = await connection.fetch(sql, *statement["values"])
        elapsed = time.perf_counter() - started
    if not rows:
        raise RuntimeError("the search found nothing")
    return elapsed


OWNERS, SHAPES = "owners", "shapes"
"""The kinds of rotating text: large owners' (the owner written in), or filter shapes'."""


async def measure(
    superuser_url: str,
    runtime_role: str,
    rotating: dict[str, Any],
    small: dict[str, Any],
    texts: int,
    *,
    kind: str,
    way: str,
    kept: int,
    shared: int,
    rounds: int,
    small_every: int,
) -> Run:
    import asyncpg

    from service.config import Settings
    from service.db import ScopedBeginConnection

    connection = await asyncpg.connect(
        superuser_url.replace("postgresql+asyncpg://", "postgresql://", 1),
        connection_class=ScopedBeginConnection,
        statement_cache_size=shared,
        max_cacheable_statement_size=0,
    )
    run = Run()
    apart = way == "apart"
    owners = kind == OWNERS
    try:
        # The rotating kind's shelf holds `kept`; the other kind's what the service configures.
        configured = Settings()
        connection.owner_texts.size = kept if owners else configured.db_owner_statement_cache_size
        connection.search_shapes.size = (
            configured.db_search_statement_cache_size if owners else kept
        )
        await connection.execute(f'SET ROLE "{runtime_role}"')
        for round_number in range(rounds):
            for text in range(texts):
                sql = f"{rotating['sql']}\n-- {kind} {text}"
                seconds = await _timed(
                    connection, rotating, sql, apart=apart, owners_written=owners
                )
                if round_number:
                    run.large_seconds.append(seconds)
                if text % small_every == small_every - 1:
                    seconds = await _timed(
                        connection, small, small["sql"], apart=apart, owners_written=False
                    )
                    if round_number:
                        run.small_seconds.append(seconds)
        await connection.execute("RESET ROLE")
        run.held = int(await connection.fetchval(HELD_SQL))
        run.memory_bytes = int(await connection.fetchval(MEMORY_SQL))
    finally:
        await connection.close()
    return run


KIND_HEADINGS = {
    OWNERS: "Large owners' texts (the owner written in)",
    SHAPES: "Filter shapes' texts (shared by every owner)",
}


def report(
    runs: dict[tuple[str, int, str], Run], arguments: argparse.Namespace, owner_written: bool
) -> str:
    lines = [
        f"## Search texts on one connection (shared cache {arguments.shared}, apart "
        f"{arguments.kept}; the small owner's search after every {arguments.small_every})",
        "",
        f"The large owner's statement {'names' if owner_written else 'does not name'} its owner.",
    ]
    for kind, heading in KIND_HEADINGS.items():
        of_kind = {key: run for key, run in runs.items() if key[0] == kind}
        if not of_kind:
            continue
        lines += [
            "",
            f"### {heading}",
            "",
            "| texts | way | statements held | backend memory MB "
            "| a rotating text's search p50 ms | small owner's search p50 ms |",
            "| --- | --- | ---: | ---: | ---: | ---: |",
        ]
        for (_kind, texts, way), run in of_kind.items():
            lines.append(
                f"| {texts} | {way} | {run.held} | {run.memory_bytes / 1e6:.1f} "
                f"| {statistics.median(run.large_seconds) * 1000:.1f} "
                f"| {statistics.median(run.small_seconds) * 1000:.1f} |"
            )
    return "\n".join(lines) + "\n"


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", type=Path, default=Path(tempfile.gettempdir()) / "mneme-statement-replay"
    )
    parser.add_argument("--owners", default="10,40,120")
    parser.add_argument("--shapes", default="")
    parser.add_argument("--kept", type=int, default=20)
    parser.add_argument("--shared", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--small-every", type=int, default=5)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _arguments(argv)
    scenario = kept_scenario(arguments.data, "owner_statements")
    if scenario is None:
        return 2
    if (arguments.data / SERVER_FILE).exists():
        sys.stderr.write(
            "owner_statements: measures the embedded server only (it reads a backend's memory "
            f"as its superuser); {arguments.data} holds a scenario loaded into another\n"
        )
        return 2
    counts = {
        kind: [int(each) for each in spec.split(",") if each]
        for kind, spec in ((OWNERS, arguments.owners), (SHAPES, arguments.shapes))
    }
    fewest = min((count for each in counts.values() for count in each), default=0)
    if arguments.rounds < 2 or not 1 <= arguments.small_every <= fewest:
        sys.stderr.write(
            "owner_statements: --rounds must be at least 2, and --small-every between 1 and "
            "the fewest --owners or --shapes\n"
        )
        return 2
    questions = scenario["questions"]

    async def run(
        runtime_url: str, superuser_url: str
    ) -> tuple[dict[tuple[str, int, str], Run], dict[str, Any]]:
        from service.config import Settings

        sizes = list(questions)
        [large] = await compile_statements(
            runtime_url, {sizes[-1]: questions[sizes[-1]]}, 1, "search"
        )
        [small] = await compile_statements(
            runtime_url, {sizes[0]: questions[sizes[0]]}, 1, "search"
        )
        runs: dict[tuple[str, int, str], Run] = {}
        for kind, each in counts.items():
            for texts in each:
                for way in ("shared", "apart"):
                    runs[kind, texts, way] = await measure(
                        superuser_url,
                        Settings().db_runtime_role,
                        large if kind == OWNERS else small,
                        small,
                        texts,
                        kind=kind,
                        way=way,
                        kept=arguments.kept,
                        shared=arguments.shared,
                        rounds=arguments.rounds,
                        small_every=arguments.small_every,
                    )
        return runs, large

    from benchmarks.database import BENCH_DATABASE
    from service.embedded_postgres import SUPERUSER

    cluster, runtime_url, _owner_url = _cluster_urls(arguments.data)
    try:
        runs, large = asyncio.run(run(runtime_url, cluster.url(SUPERUSER, BENCH_DATABASE)))
    finally:
        cluster.stop()
    largest = questions[list(questions)[-1]][0]["user_id"]
    sys.stdout.write(report(runs, arguments, owner_literal(largest) in large["sql"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
