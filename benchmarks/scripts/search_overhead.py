"""What the service adds to a never-seen search, interleaved across code versions: each server
is `mneme`'s app under uvicorn on loopback, imported from a source tree of its own, all against
one embedded Postgres, with the query-vector cache off so every search embeds its question.

Run from the repository root:

    python -m benchmarks.scripts.search_overhead --tree before=/path/to/checkout --tree after=.
        [--rounds 20] [--n 25] [--clients 8] [--seconds 4] [--endpoint search|context]
        [--env after-nopp=.:MNEME_DB_POOL_PRE_PING=false]

`--tree NAME=DIR` serves the code in DIR (put first on PYTHONPATH; the dependencies are this
virtualenv's); `--env NAME=DIR:VAR=VALUE[,VAR=VALUE]` the same with environment overrides. One
client sends `--n` searches to each server in turn, in shuffled order, for `--rounds` rounds,
and the same searches go through the bare fusion statement (BEGIN, SET LOCAL, statement,
COMMIT on asyncpg) and through the embedder in this process, so for every round there is a
service time, a statement time and an embedding time measured within seconds of each other.
Each server's own CPU time (utime + stime from /proc) is read around its block. After each
server's one-client block, `--clients` concurrent clients send it never-seen questions for
`--seconds` (throughput: searches answered per second, median over the rounds). With
`--endpoint context` the servers are asked for context blocks instead (the default block for the
question); the raw statement and embedding columns stay the search's, for reference. Prints numbers;
asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from pydantic import SecretStr

from benchmarks.corpus import Corpus, CorpusShape, build_pool, sample_queries
from benchmarks.database import throwaway_database
from benchmarks.rawsql import FusionStatement, asyncpg_connection, service_search_params
from benchmarks.server import RunningServer, loopback_server, server_cpu_seconds
from service.auth.tokens import mint_dev_token
from service.config import Settings
from service.db import create_engine
from service.memories.schemas import SearchRequest
from service.providers import build_embedder, embedder_config_from_settings

ENDPOINTS = {"search": "memories/search", "context": "context"}

MEMORIES = 300
QUESTIONS = 400


@dataclass
class Figures:
    latency_ms: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)
    # Searches per second with `--clients` concurrent clients, one figure per round.
    throughput: list[float] = field(default_factory=list)
    concurrent_cpu_ms: list[float] = field(default_factory=list)
    errors: int = 0


def _body(endpoint: str, question: str) -> dict[str, object]:
    """A search asks for the top 10; a context call for the default block."""
    if endpoint == "context":
        return {"query": question}
    return {"query": question, "limit": 10}


async def _concurrent_block(
    client: httpx.AsyncClient,
    url: str,
    endpoint: str,
    headers: dict[str, str],
    questions: list[str],
    clients: int,
    seconds: float,
    figures: Figures,
    pid: int,
) -> None:
    """`clients` concurrent clients send never-seen searches to `url` for `seconds`."""
    deadline = time.perf_counter() + seconds
    answered = 0

    async def one_client(offset: int) -> None:
        nonlocal answered
        asked = offset
        while time.perf_counter() < deadline:
            # A fresh suffix per request: every question is new to the server's caches.
            question = f"{questions[asked % len(questions)]} {offset}-{asked}"
            asked += clients
            response = await client.post(url, json=_body(endpoint, question), headers=headers)
            if response.status_code == 200:
                answered += 1
            else:
                figures.errors += 1

    started, cpu_before = time.perf_counter(), server_cpu_seconds(pid)
    await asyncio.gather(*(one_client(offset) for offset in range(clients)))
    figures.throughput.append(answered / (time.perf_counter() - started))
    cpu_ms = (server_cpu_seconds(pid) - cpu_before) * 1000
    figures.concurrent_cpu_ms.append(cpu_ms / max(answered, 1))


def _parse(spec: str) -> tuple[str, Path, dict[str, str]]:
    name, _, rest = spec.partition("=")
    directory, _, overrides = rest.partition(":")
    env = dict(item.split("=", 1) for item in overrides.split(",") if item)
    return name, Path(directory).resolve(), env


@asynccontextmanager
async def _server(
    settings: Settings, source: Path, env: dict[str, str]
) -> AsyncIterator[RunningServer]:
    saved = dict(os.environ)
    os.environ["PYTHONPATH"] = str(source)
    # MNEME_ overrides go through the settings, which the child's environment is made from.
    overrides = {key.removeprefix("MNEME_").lower(): value for key, value in env.items()}
    settings = Settings.model_validate({**settings.model_dump(), **overrides})
    try:
        # The child's environment is built from os.environ when it starts.
        context = loopback_server(settings)
        server = await context.__aenter__()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    try:
        yield server
    finally:
        await context.__aexit__(None, None, None)


async def main(args: argparse.Namespace) -> None:
    base = Settings(
        _env_file=None,
        jwt_hs256_secret=SecretStr("search-overhead-" + "x" * 32),
        rate_limit_default="1000000/minute",
        auth_failure_limit="1000000/minute",
        jobs_enabled=False,
        query_embedding_cache_size=0,
    )
    servers = [_parse(spec) for spec in args.tree + args.env]
    async with throwaway_database(base) as settings:
        pool = build_pool(1024, 5)
        corpus = Corpus(CorpusShape(MEMORIES, 1, 0, 5), pool)
        tenant, user = corpus.shape.tenant_id(0), corpus.shape.user_id(0)
        token = mint_dev_token(settings, tenant_id=tenant, user_id="bench", service=True)
        headers = {"Authorization": f"Bearer {token}"}
        questions = [q for _, _, q, _ in sample_queries(corpus, 1, QUESTIONS, 5)]
        embedder = build_embedder(embedder_config_from_settings(settings))
        engine = create_engine(
            settings.database_url.get_secret_value() if settings.database_url else "",
            settings,
            pool_size=1,
            max_overflow=0,
        )
        statement = FusionStatement(engine.dialect)
        figures = {name: Figures() for name, _, _ in servers}
        raw = Figures()
        embed = Figures()
        async with AsyncExitStack() as stack:
            running = {
                name: await stack.enter_async_context(_server(settings, source, env))
                for name, source, env in servers
            }
            client = await stack.enter_async_context(
                httpx.AsyncClient(
                    timeout=60, limits=httpx.Limits(max_connections=max(args.clients, 1) + 1)
                )
            )
            first = next(iter(running.values())).base_url
            rows = corpus.user_rows(0)
            for start in range(0, len(rows), 100):
                items = [{"text": row.text, "kind": row.kind} for row in rows[start : start + 100]]
                response = await client.post(
                    f"{first}/v1/users/{user}/memories/batch",
                    json={"items": items},
                    headers=headers,
                )
                response.raise_for_status()
            connection = await stack.enter_async_context(engine.connect())
            driver = await asyncpg_connection(connection)
            rng = random.Random(5)  # noqa: S311 - reproducible questions, not secrets
            asked = 0
            for round_number in range(args.rounds):
                order = list(running.items())
                rng.shuffle(order)
                for name, server in order:
                    before = server_cpu_seconds(server.pid)
                    url = f"{server.base_url}/v1/users/{user}/{ENDPOINTS[args.endpoint]}"
                    for _ in range(args.n):
                        question = questions[asked % len(questions)]
                        asked += 1
                        sent = time.perf_counter()
                        response = await client.post(
                            url,
                            json=_body(args.endpoint, question),
                            headers=headers,
                        )
                        figures[name].latency_ms.append((time.perf_counter() - sent) * 1000)
                        response.raise_for_status()
                    cpu_ms = (server_cpu_seconds(server.pid) - before) * 1000
                    figures[name].cpu_ms.append(cpu_ms / args.n)
                    if args.clients:
                        await _concurrent_block(
                            client,
                            url,
                            args.endpoint,
                            headers,
                            questions,
                            args.clients,
                            args.seconds,
                            figures[name],
                            server.pid,
                        )
                for _ in range(args.n):
                    question = questions[asked % len(questions)]
                    asked += 1
                    started = time.perf_counter()
                    vector = await embedder.embed_query(question)
                    embed.latency_ms.append((time.perf_counter() - started) * 1000)
                    params = await service_search_params(
                        settings, tenant, user, SearchRequest(query=question, limit=10), vector
                    )
                    arguments = statement.arguments(tenant, params)
                    started = time.perf_counter()
                    await statement.ids(driver, tenant, arguments)
                    raw.latency_ms.append((time.perf_counter() - started) * 1000)
                sys.stderr.write(
                    f"round {round_number + 1}/{args.rounds}, load {os.getloadavg()}\n"
                )
        await embedder.aclose()
        await engine.dispose()
    raw_p50 = statistics.median(raw.latency_ms)
    embed_p50 = statistics.median(embed.latency_ms)
    sys.stdout.write(
        f"\nraw statement p50 {raw_p50:.2f} ms; query embedding p50 {embed_p50:.2f} ms\n"
    )
    sys.stdout.write(
        "| server | search p50 ms | p95 ms | p50 - raw - embedding ms | server CPU ms / search "
        f"| {args.clients} clients, searches/s (median of rounds) | CPU ms / search there "
        "| errors |\n"
    )
    sys.stdout.write("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
    for name, found in figures.items():
        latencies = sorted(found.latency_ms)
        p50 = statistics.median(latencies)
        p95 = latencies[int(len(latencies) * 0.95)]
        cpu = statistics.median(found.cpu_ms)
        throughput = statistics.median(found.throughput) if found.throughput else 0.0
        concurrent_cpu = (
            statistics.median(found.concurrent_cpu_ms) if found.concurrent_cpu_ms else 0.0
        )
        sys.stdout.write(
            f"| {name} | {p50:.1f} | {p95:.1f} | {p50 - raw_p50 - embed_p50:.1f} | {cpu:.1f} "
            f"| {throughput:.1f} | {concurrent_cpu:.1f} | {found.errors} |\n"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=DIR")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=DIR:VAR=VALUE")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--n", type=int, default=25)
    parser.add_argument(
        "--clients",
        type=int,
        default=8,
        help="concurrent clients of the throughput block (0: none)",
    )
    parser.add_argument("--seconds", type=float, default=4.0, help="length of a throughput block")
    parser.add_argument(
        "--endpoint",
        choices=sorted(ENDPOINTS),
        default="search",
        help="what the servers are asked: a search, or a context block (the raw statement stays "
        "the search's)",
    )
    asyncio.run(main(parser.parse_args()))
