"""More requests than the service can serve, arriving at a steady rate whatever it answers: how
many it answers, how fast, and how it refuses the rest.

Run from the repository root, after `statement_replay` has loaded the scenario under `--data`:

    python -m benchmarks.scripts.overload --env before=.:MNEME_MAX_REQUESTS_IN_PROGRESS=100000,\
MNEME_DB_POOL_TIMEOUT_SECONDS=30 --env after=.:MNEME_DB_POOL_TIMEOUT_SECONDS=5
        [--data DIR] [--size 100k] [--what context|search] [--rate 150] [--seconds 30]
        [--client-timeout 30] [--connections 500]

Each version (`--tree NAME=DIR`, `--env NAME=DIR:VAR=VALUE[,VAR=VALUE]`, as `http_replay`
takes them) is served alone, one after another, on the scenario's database (uvicorn, one
worker): one server's overload must not share the machine with another's. After a warm-up of a
request a second, requests for the `--size` owner's questions (in turn) arrive `--rate` a second
for `--seconds`, each sent when its time comes whether or not the ones before were answered,
as many clients' requests do; a client gives up on a request after `--client-timeout` seconds
(the Python client's default is 30), over at most `--connections` connections.

It prints, per version: the answers the clients got in time (200) per second of the run, their
p50 / p90 / p99 time, the requests refused (503, by problem code) with their p50 time, those the
clients gave up on (or whose connection failed), and the answers the server computed that no
client received (its own count of 200s, read from `/metrics`, less the clients'): work spent on
clients that had gone. Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from benchmarks.scripts.http_replay import serving
from benchmarks.scripts.statement_replay import (
    Version,
    _cluster_urls,
    _say,
    add_tree_arguments,
    distinct_versions,
    kept_scenario,
)

WARM_UP_SECONDS = 5
# A connection idle longer than this is not used again (the server's keep-alive time is 5 s).
KEPT_ALIVE_SECONDS = 4.0


@dataclass
class Outcome:
    """What the clients of one version's run got."""

    seconds: float = 0.0
    answered: list[float] = field(default_factory=list)
    refused: dict[str, list[float]] = field(default_factory=dict)
    given_up: Counter[str] = field(default_factory=Counter)
    server_answers: int = 0

    def percentile(self, share: float) -> float:
        ordered = sorted(self.answered)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def answered_by_server(exposition: str, route: str) -> int:
    """The server's own count of 200 answers on `route` (`mneme_http_requests_total`)."""
    total = 0.0
    for line in exposition.splitlines():
        if (
            line.startswith("mneme_http_requests_total{")
            and f'route="{route}"' in line
            and 'status="200"' in line
        ):
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


class _Connections:
    """Kept-alive HTTP/1.1 connections to one server, at most `most` open: each request takes an
    idle one or opens one, and waits for one to come back only past `most`. Written on asyncio's
    streams rather than an HTTP client library: on a machine the server and Postgres keep busy,
    a generator that spends a millisecond of CPU a request falls behind its own schedule and
    times its own delay, not the server's."""

    def __init__(self, host: str, port: int, most: int) -> None:
        self.host, self.port = host, port
        # Each with the time it was given back: the server closes a connection idle for its
        # keep-alive time (uvicorn's 5 s), and a request sent on one as it closes is lost.
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter, float]] = []
        self.slots = asyncio.Semaphore(most)

    async def send(self, request: bytes) -> tuple[int, bytes]:
        """The status and body of the answer to `request` (cancelled: the connection closes)."""
        async with self.slots:
            while self.idle and time.monotonic() - self.idle[-1][2] > KEPT_ALIVE_SECONDS:
                self.idle.pop()[1].close()
            if self.idle:
                reader, writer, _ = self.idle.pop()
            else:
                reader, writer = await asyncio.open_connection(self.host, self.port)
            try:
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                status = int(head.split(b" ", 2)[1])
                length = 0
                closes = False
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                    elif name.strip().lower() == b"connection" and b"close" in value.lower():
                        closes = True
                body = await reader.readexactly(length)
            except BaseException:
                writer.close()
                raise
            if closes:
                writer.close()
            else:
                self.idle.append((reader, writer, time.monotonic()))
            return status, body


def _request(host: str, path: str, body: dict[str, Any], token: str) -> bytes:
    payload = json.dumps(body).encode()
    return (
        f"POST {path} HTTP/1.1\r\nhost: {host}\r\nauthorization: Bearer {token}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(payload)}\r\n\r\n"
    ).encode() + payload


async def overload(
    base_url: str,
    questions: Sequence[dict[str, Any]],
    what: str,
    rate: float,
    seconds: float,
    client_timeout: float,
    connections: int,
) -> Outcome:
    """`rate` requests a second for `seconds` (after the warm-up), each on its own schedule."""
    import httpx

    from service.auth.dev_tokens import mint_dev_token
    from service.config import Settings

    settings = Settings()
    route = "/v1/users/{user_id}/" + ("memories/search" if what == "search" else "context")
    address = urlsplit(base_url)
    assert address.hostname is not None
    assert address.port is not None
    requests = [
        _request(
            address.netloc,
            f"/v1/users/{question['user_id']}/"
            + ("memories/search" if what == "search" else "context"),
            {"query": question["text"]},
            mint_dev_token(settings, tenant_id=question["tenant_id"], user_id=question["user_id"]),
        )
        for question in questions
    ]
    outcome = Outcome()
    pool = _Connections(address.hostname, address.port, connections)
    # The scrape waits as long as it takes: a server may answer its metrics late under the load.
    async with httpx.AsyncClient(base_url=base_url, timeout=300.0) as scraper:
        for turn in range(WARM_UP_SECONDS):
            await pool.send(requests[turn % len(requests)])
            await asyncio.sleep(1)
        before = answered_by_server((await scraper.get("/metrics")).text, route)

        async def send(turn: int) -> None:
            started = time.perf_counter()
            try:
                status, body = await asyncio.wait_for(
                    pool.send(requests[turn % len(requests)]), client_timeout
                )
            except TimeoutError:
                outcome.given_up["client timeout"] += 1
                return
            except (OSError, asyncio.IncompleteReadError) as error:
                outcome.given_up[type(error).__name__] += 1
                return
            elapsed = time.perf_counter() - started
            if status == 200:
                outcome.answered.append(elapsed)
            else:
                code = f"{status} {json.loads(body).get('code', '')}".strip()
                outcome.refused.setdefault(code, []).append(elapsed)

        start = time.perf_counter()
        sent: list[asyncio.Task[None]] = []
        for turn in range(int(rate * seconds)):
            delay = start + turn / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            sent.append(asyncio.create_task(send(turn)))
        await asyncio.gather(*sent)
        outcome.seconds = time.perf_counter() - start
        # The server may still finish requests whose clients gave up: let them end first.
        await asyncio.sleep(2)
        after = answered_by_server((await scraper.get("/metrics")).text, route)
        outcome.server_answers = after - before
    return outcome


def report(
    versions: Sequence[Version], outcomes: dict[str, Outcome], rate: float, seconds: float
) -> str:
    offered = int(rate * seconds)
    lines = [
        f"{offered} requests at {rate:g}/s for {seconds:g} s\n",
        "| version | answered (200)/s | 200 p50 / p90 / p99 s | refused (503) | refused p50 s "
        "| given up | answers no client got |",
        "| --- | ---: | --- | --- | ---: | --- | ---: |",
    ]
    for version in versions:
        outcome = outcomes[version.name]
        refused = ", ".join(f"{len(times)} {code}" for code, times in outcome.refused.items())
        refused_times = [time for times in outcome.refused.values() for time in times]
        given_up = ", ".join(f"{count} {why}" for why, count in outcome.given_up.items())
        lines.append(
            f"| {version.name} | {len(outcome.answered) / outcome.seconds:.1f} | "
            f"{outcome.percentile(0.5):.3f} / {outcome.percentile(0.9):.3f} / "
            f"{outcome.percentile(0.99):.3f} | {refused or '0'} | "
            f"{statistics.median(refused_times) if refused_times else float('nan'):.3f} | "
            f"{given_up or '0'} | {outcome.server_answers - len(outcome.answered)} |"
        )
    return "\n".join(lines) + "\n"


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_tree_arguments(parser)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--size", default="100k")
    parser.add_argument("--what", choices=("search", "context"), default="context")
    parser.add_argument("--rate", type=float, default=150.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--client-timeout", type=float, default=30.0)
    parser.add_argument("--connections", type=int, default=500)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _arguments(argv)
    versions = distinct_versions(arguments, "overload")
    if versions is None:
        return 2
    scenario = kept_scenario(arguments.data, "overload")
    if scenario is None:
        return 2
    questions = scenario["questions"].get(arguments.size)
    if not questions:
        _say(f"overload: no owner of size {arguments.size} in {arguments.data}")
        return 2

    async def run(runtime_url: str, owner_url: str) -> dict[str, Outcome]:
        outcomes: dict[str, Outcome] = {}
        for version in versions:
            async with serving([version], runtime_url, owner_url) as (server,):
                _say(f"overload: {version.name} at {server.base_url}")
                outcomes[version.name] = await overload(
                    server.base_url,
                    questions,
                    arguments.what,
                    arguments.rate,
                    arguments.seconds,
                    arguments.client_timeout,
                    arguments.connections,
                )
        return outcomes

    cluster, runtime_url, owner_url = _cluster_urls(arguments.data)
    try:
        outcomes = asyncio.run(run(runtime_url, owner_url))
    finally:
        cluster.stop()
    sys.stdout.write(report(versions, outcomes, arguments.rate, arguments.seconds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
