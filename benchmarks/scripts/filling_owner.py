"""One owner filled on a fresh service, as a new user tries it: search p50 at each size while the
owner grows, two or more code versions side by side.

Run from the repository root:

    python -m benchmarks.scripts.filling_owner --tree before=/path/to/checkout --tree after=.
        [--sizes 1000,5000,10000] [--rounds 40] [--settle 5] [--data DIR]
        [--env NAME=DIR:VAR=VALUE[,VAR=VALUE]]

Each version is `mneme serve`'s app (uvicorn, one worker) of its tree (`--tree NAME=DIR`, its
`service` first on the import path; `--env` the same with settings changed) on an embedded
database of its own under `--data` (emptied first), with its background work as a service runs
it by default (jobs, the owner indexes' keeper) and no rate limit. One user of each is filled
through `POST …/memories/batch` (100 a request) with facts in the write path's style, "User likes
piano and chess (note 17)" (two of 78 pastimes, the same rows for every version), to each size
of `--sizes` in turn, a batch to every version before the next (each version taking each place
in turn). After each size's writes every server is asked each question in each mode
three times, then left `--settle` seconds (what it does in the background after a bulk write,
such as recounting the owner's statistics or building its vector graphs, has that long, as a
user pausing between the two would give it); then `--rounds` rounds of the two questions, in
lexical and hybrid mode, each asked of every version before the next, each version taking each
place in turn. The questions: "what does the user like to play" (every memory holds "user",
"like" and most "play"'s neighbours) and "piano or violin".

Prints, per size and version, the seconds its writes took and each question's lexical / hybrid
p50 in ms. The versions run at once on one machine, so its drift moves them alike: read the
versions against each other, not against another run. Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from benchmarks.load import parse_sizes
from benchmarks.scripts.statement_replay import (
    Version,
    _say,
    add_tree_arguments,
    distinct_versions,
    run_order,
)

if TYPE_CHECKING:
    from benchmarks.server import RunningServer

PASTIMES = (
    *("piano", "chess", "violin", "guitar", "tennis", "soccer", "golf", "cello", "drums"),
    *("poker", "bridge", "sudoku", "flute", "basketball", "volleyball", "badminton", "hockey"),
    *("baseball", "cricket", "rugby", "trumpet", "harp", "saxophone", "bowling", "darts"),
    *("billiards", "scrabble", "monopoly", "minecraft", "fortnite", "zelda", "mario", "tetris"),
    *("hiking", "swimming", "running", "cycling", "climbing", "skiing", "surfing", "sailing"),
    *("rowing", "fencing", "boxing", "karate", "yoga", "pilates", "dancing", "singing"),
    *("painting", "drawing", "knitting", "cooking", "baking", "gardening", "fishing", "hunting"),
    *("camping", "reading", "writing", "coding", "photography", "pottery", "origami", "jazz"),
    *("blues", "rock", "opera", "sushi", "pizza", "ramen", "tacos", "coffee", "tea", "wine"),
    *("beer", "chocolate", "cheese"),
)
QUESTIONS = ("what does the user like to play", "piano or violin")
MODES = ("lexical", "hybrid")
BATCH = 100
TENANT, USER = "filling-owner", "owner"


def facts(count: int, seed: int = 7) -> list[str]:
    """The owner's first `count` facts: each names two pastimes and its number (so none is a
    duplicate the service would not store again)."""
    chooser = random.Random(seed)  # noqa: S311 - a benchmark's data, not a secret
    return [
        "User likes {} and {} (note {})".format(*chooser.sample(PASTIMES, 2), number)
        for number in range(count)
    ]


@dataclass
class SizeFigures:
    """One size's figures: each version's write seconds, and its request seconds per
    (question, mode)."""

    written: dict[str, float] = field(default_factory=dict)
    seconds: dict[tuple[str, str, str], list[float]] = field(default_factory=dict)
    hits: dict[tuple[str, str, str], int] = field(default_factory=dict)
    """The fewest hits each version answered a (question, mode) with: a search that answers
    nothing is fast for that reason alone, and must show as such beside its time."""


async def _fill(
    clients: Sequence[httpx.AsyncClient],
    versions: Sequence[Version],
    headers: dict[str, str],
    rows: list[str],
    figures: SizeFigures,
) -> None:
    """Write `rows` to every version's owner, a batch to each version before the next batch
    (each version taking each place in turn), so the machine's drift and each server's
    background work meanwhile weigh on every version alike; each version's seconds summed."""
    for turn, start in enumerate(range(0, len(rows), BATCH)):
        items = [{"text": text, "category": "preference"} for text in rows[start : start + BATCH]]
        for which in run_order(len(versions), turn):
            version = versions[which]
            started = time.perf_counter()
            response = await clients[which].post(
                f"/v1/users/{USER}/memories/batch", json={"items": items}, headers=headers
            )
            elapsed = time.perf_counter() - started
            if response.status_code != 201:
                raise RuntimeError(
                    f"{version.name} answered {response.status_code}: {response.text[:500]}"
                )
            figures.written[version.name] = figures.written.get(version.name, 0.0) + elapsed


async def _search(
    client: httpx.AsyncClient, version: Version, headers: dict[str, str], question: str, mode: str
) -> tuple[float, int]:
    """The seconds one search took, and how many hits it answered."""
    started = time.perf_counter()
    response = await client.post(
        f"/v1/users/{USER}/memories/search",
        json={"query": question, "mode": mode, "limit": 10},
        headers=headers,
    )
    elapsed = time.perf_counter() - started
    if response.status_code != 200:
        raise RuntimeError(f"{version.name} answered {response.status_code}: {response.text[:500]}")
    return elapsed, len(response.json()["hits"])


async def measure(
    servers: Sequence[RunningServer],
    versions: Sequence[Version],
    sizes: Sequence[int],
    rounds: int,
    settle: float,
) -> dict[int, SizeFigures]:
    """Fill each version's owner to each size, then ask the questions; the figures by size."""
    from service.auth.dev_tokens import mint_dev_token
    from service.config import Settings

    headers = {
        "Authorization": "Bearer "
        + mint_dev_token(Settings(), tenant_id=TENANT, user_id=USER, ttl_seconds=24 * 3600)
    }
    rows = facts(max(sizes))
    figures: dict[int, SizeFigures] = {}
    async with AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                httpx.AsyncClient(base_url=server.base_url, timeout=120.0)
            )
            for server in servers
        ]
        held = 0
        turn = 0
        for size in sizes:
            each = figures[size] = SizeFigures()
            await _fill(clients, versions, headers, rows[held:size], each)
            held = size
            for _ in range(3):
                for client, version in zip(clients, versions, strict=True):
                    for question in QUESTIONS:
                        for mode in MODES:
                            await _search(client, version, headers, question, mode)
            await asyncio.sleep(settle)
            for _ in range(rounds):
                for question in QUESTIONS:
                    for mode in MODES:
                        for which in run_order(len(versions), turn):
                            elapsed, hits = await _search(
                                clients[which], versions[which], headers, question, mode
                            )
                            key = (versions[which].name, question, mode)
                            each.seconds.setdefault(key, []).append(elapsed)
                            each.hits[key] = min(hits, each.hits.get(key, hits))
                        turn += 1
    return figures


def report(versions: Sequence[Version], figures: dict[int, SizeFigures]) -> str:
    """One markdown row per size and version: each question's p50 in each mode, with the
    fewest hits it answered in brackets."""
    header = " | ".join(f'"{question}" lexical / hybrid p50 ms (hits)' for question in QUESTIONS)
    lines = [
        f"| memories | version | writes s | {header} |",
        "| ---: | --- | ---: | " + " | ".join("---:" for _ in QUESTIONS) + " |",
    ]
    for size, each in figures.items():
        for version in versions:
            cells = [
                " / ".join(
                    f"{1000 * statistics.median(each.seconds[(version.name, question, mode)]):.1f}"
                    f" ({each.hits[(version.name, question, mode)]})"
                    for mode in MODES
                )
                for question in QUESTIONS
            ]
            lines.append(
                f"| {size:,} | {version.name} | {each.written[version.name]:.1f} | "
                + " | ".join(cells)
                + " |"
            )
    return "\n".join(lines) + "\n"


async def _run(
    versions: Sequence[Version], data: Path, sizes: Sequence[int], rounds: int, settle: float
) -> dict[int, SizeFigures]:
    from benchmarks.server import loopback_server
    from service.config import Settings

    async with AsyncExitStack() as stack:
        servers = []
        for version in versions:
            directory = data / version.name
            shutil.rmtree(directory, ignore_errors=True)
            settings = Settings().model_copy(
                update={"data_dir": directory, "rate_limit_enabled": False, "workers": 1}
            )
            servers.append(
                await stack.enter_async_context(
                    loopback_server(settings, tree=version.tree, environment=version.environment)
                )
            )
        return await measure(servers, versions, sizes, rounds, settle)


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_tree_arguments(parser)
    parser.add_argument("--sizes", default="1000,5000,10000")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument(
        "--data",
        type=Path,
        default=Path(tempfile.gettempdir()) / "mneme-filling-owner",
        help="where each version's database is made, emptied first (default: %(default)s)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _arguments(argv)
    versions = distinct_versions(arguments, "filling_owner")
    if versions is None:
        return 2
    try:
        sizes = sorted(parse_sizes(arguments.sizes))
    except ValueError as error:
        _say(f"filling_owner: {error}")
        return 2
    if arguments.rounds < 1 or arguments.settle < 0:
        _say("filling_owner: --rounds must be at least 1 and --settle not negative")
        return 2
    try:
        figures = asyncio.run(
            _run(versions, arguments.data, sizes, arguments.rounds, arguments.settle)
        )
    except RuntimeError as error:
        _say(f"filling_owner: {error}")
        return 1
    sys.stdout.write(report(versions, figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
