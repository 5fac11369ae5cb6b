"""What a conversation's length costs a context block: p50 latency and server CPU of
`POST …/context` with the conversation's thread, as the thread grows, against the same block
without the thread, measured in the same run.

Run from the repository root:

    python -m benchmarks.scripts.thread_context [--tree before=/path/to/checkout] [--tree now=.]
        [--lengths 50,500,1500,3000] [--n 30]

Each `--tree NAME=DIR` is `mneme`'s app under uvicorn on loopback, imported from DIR (default:
this checkout alone), all against one throwaway embedded Postgres. Each server's user keeps one
thread, grown to each length in turn through the API (100 messages a call, user and assistant
turns alternating; the user turns are stored as episodic memories, as the write path stores
them, so the user's memories grow with the thread). Once the servers are idle again (their
background work on the appended turns done), the database is vacuumed and analyzed (what
autovacuum keeps up on a running deployment), a first block asks for the owner's statistics
(recounted in the background, done too), and then the servers are asked, in turn, `--n` times
for the block of a question with the thread and without it: the block without the thread is
the baseline (the same user's memories, the same question), so what the thread adds is what its
length costs. Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from benchmarks.database import throwaway_database
from benchmarks.server import RunningServer, loopback_server, server_cpu_seconds
from service.auth.tokens import mint_dev_token
from service.config import Settings
from service.db import create_engine

TENANT = "bench-thread"
QUESTION = "what did we say about the weekend trip"
WORDS = ("coffee", "hiking", "lisbon", "piano", "sushi", "marathon", "garden", "invoice", "kyoto")
APPEND_BATCH = 100
IDLE_CPU_SECONDS = 0.03
"""A server that ran less than this in one second is idle: its background work is done."""


@dataclass
class Figures:
    with_thread_ms: list[float] = field(default_factory=list)
    without_thread_ms: list[float] = field(default_factory=list)
    with_thread_cpu_ms: list[float] = field(default_factory=list)
    recent_turns: int = 0


def _message(number: int) -> dict[str, str]:
    role = "user" if number % 2 == 0 else "assistant"
    first, second = WORDS[number % len(WORDS)], WORDS[(number * 7) % len(WORDS)]
    return {"role": role, "content": f"Turn {number}: {first} and {second} on the weekend trip"}


async def _until_idle(servers: list[RunningServer]) -> None:
    while True:
        before = [server_cpu_seconds(server.pid) for server in servers]
        await asyncio.sleep(1.0)
        spent = [server_cpu_seconds(s.pid) - b for s, b in zip(servers, before, strict=True)]
        if max(spent) < IDLE_CPU_SECONDS:
            return


async def _vacuum_analyze(database: Settings) -> None:
    """The planner statistics and visibility of the grown tables, as autovacuum keeps them on a
    running deployment (it first looks a minute after start, longer than a length's growth).

    Until a table is analyzed, each connection plans the statement from the table's size when it
    first ran it, and keeps that plan as the table grows (only new statistics make it plan
    again): the servers' pooled connections, born at different lengths, would answer the same
    block at up to five times each other's time, whichever connection a call gets."""
    url = database.migration_database_url
    if url is None:
        raise RuntimeError("the throwaway database has no owner URL")
    engine = create_engine(
        url.get_secret_value(),
        database,
        pool_size=1,
        max_overflow=0,
        isolation_level="AUTOCOMMIT",
    )
    try:
        async with engine.connect() as connection:
            await connection.exec_driver_sql("VACUUM ANALYZE")
    finally:
        await engine.dispose()


async def _context_ms(
    client: httpx.AsyncClient, server: RunningServer, headers: dict[str, str], body: dict[str, str]
) -> tuple[float, float, httpx.Response]:
    cpu = server_cpu_seconds(server.pid)
    started = time.perf_counter()
    response = await client.post(
        f"{server.base_url}/v1/users/me/context", json=body, headers=headers
    )
    elapsed = time.perf_counter() - started
    response.raise_for_status()
    return elapsed * 1000, (server_cpu_seconds(server.pid) - cpu) * 1000, response


async def run(trees: dict[str, Path | None], lengths: list[int], n: int) -> None:
    settings = Settings(
        _env_file=None,
        data_dir=Path(tempfile.gettempdir()) / "mneme-bench-unused",
        rate_limit_enabled=False,
        log_level="warning",
    )
    async with throwaway_database(settings) as database, AsyncExitStack() as stack:
        servers = {
            name: await stack.enter_async_context(loopback_server(database, tree=tree))
            for name, tree in trees.items()
        }
        client = await stack.enter_async_context(httpx.AsyncClient(timeout=120))
        headers = {
            name: {
                "Authorization": "Bearer "
                + mint_dev_token(database, tenant_id=TENANT, user_id=f"reader-{name}")
            }
            for name in servers
        }
        threads = {}
        for name, server in servers.items():
            created = await client.post(
                f"{server.base_url}/v1/users/me/threads", json={}, headers=headers[name]
            )
            created.raise_for_status()
            threads[name] = created.json()["id"]
        stored = 0
        _line(
            "| turns | version | with the thread p50 ms | without p50 ms | the thread adds |"
            " server CPU ms a block (with) | recent turns shown |"
        )
        _line("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
        for length in lengths:
            while stored < length:
                batch = [
                    _message(number) for number in range(stored, min(length, stored + APPEND_BATCH))
                ]
                for name, server in servers.items():
                    appended = await client.post(
                        f"{server.base_url}/v1/users/me/threads/{threads[name]}/messages",
                        json={"messages": batch},
                        headers=headers[name],
                    )
                    appended.raise_for_status()
                stored += len(batch)
            await _until_idle(list(servers.values()))
            await _vacuum_analyze(database)
            # A first search of the grown owner may ask for a recount of its statistics, which
            # runs in the background: it is done before the blocks are timed.
            for name, server in servers.items():
                for body in ({"query": QUESTION, "thread_id": threads[name]}, {"query": QUESTION}):
                    await _context_ms(client, server, headers[name], body)
            await _until_idle(list(servers.values()))
            figures = {name: Figures() for name in servers}
            for _ in range(n):
                for name, server in servers.items():
                    with_thread = {"query": QUESTION, "thread_id": threads[name]}
                    ms, cpu, response = await _context_ms(
                        client, server, headers[name], with_thread
                    )
                    figures[name].with_thread_ms.append(ms)
                    figures[name].with_thread_cpu_ms.append(cpu)
                    recent = [s for s in response.json()["sections"] if s["name"] == "recent"]
                    figures[name].recent_turns = len(recent[0]["items"]) if recent else 0
                    ms, _, _ = await _context_ms(client, server, headers[name], {"query": QUESTION})
                    figures[name].without_thread_ms.append(ms)
            for name, each in figures.items():
                with_ms = statistics.median(each.with_thread_ms)
                without_ms = statistics.median(each.without_thread_ms)
                cpu_ms = statistics.median(each.with_thread_cpu_ms)
                _line(
                    f"| {stored} | {name} | {with_ms:.1f} | {without_ms:.1f} | "
                    f"{with_ms - without_ms:+.1f} | {cpu_ms:.2f} | {each.recent_turns} |"
                )


def _line(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _trees(values: list[str]) -> dict[str, Path | None]:
    trees: dict[str, Path | None] = {}
    for value in values:
        name, _, directory = value.partition("=")
        trees[name] = Path(directory).resolve() if directory else None
    return trees or {"now": None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=DIR")
    parser.add_argument("--lengths", default="50,500,1500,3000")
    parser.add_argument("--n", type=int, default=30)
    arguments = parser.parse_args()
    lengths = sorted(int(length) for length in arguments.lengths.split(","))
    asyncio.run(run(_trees(arguments.tree), lengths, arguments.n))


if __name__ == "__main__":
    main()
