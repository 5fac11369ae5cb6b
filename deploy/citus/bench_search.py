"""Search latency on the Citus cluster against single-node Postgres, for the same corpus.

    python deploy/citus/bench_search.py [--tenants 4] [--users 5] [--memories 100]
                                        [--queries 200]

Needs the cluster of `deploy/citus/cluster.sh start` and its URLs in the environment
(`export $(deploy/citus/cluster.sh urls)`). The single node is a throwaway embedded Postgres.

Both sides run the real service in this process (ASGI, no network hop), load the same
synthetic memories through `POST …/memories/batch`, then answer the same questions through
`POST …/memories/search`, one at a time and taking turns: hybrid (query embedding + fusion
statement) and lexical (the statement alone, no embedding). Prints p50/p95 per side and
mode; the query embedding's own cost is measured apart, since it is the same on both sides.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path

from asgi_lifespan import LifespanManager
from httpx import ASGITransport, AsyncClient
from pydantic import SecretStr

from service import db_migrations
from service.auth.tokens import mint_dev_token
from service.config import Settings
from service.db import create_engine
from service.embedded_postgres import OWNER_ROLE, bootstrap, start_cluster
from service.main import create_app
from service.providers.embedder import build_embedder, embedder_config_from_settings

# A throwaway dev secret: both services run in this process and only it mints tokens.
SECRET = "bench-secret-that-is-long-enough-for-hs256-0123456789"  # noqa: S105
SUBJECTS = ["my sister", "the landlord", "our team", "the dentist", "my neighbour", "the bank"]
VERBS = ["called about", "asked me to renew", "reminded me of", "cancelled", "moved", "paid for"]
OBJECTS = [
    "the lease",
    "a hiking trip",
    "the quarterly report",
    "the car insurance",
    "a birthday dinner",
    "the flight to Lisbon",
    "piano lessons",
    "the gym membership",
]
WHEN = ["on Monday", "last week", "in March", "every Friday", "before the holidays", "tomorrow"]


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(part) for part in (SUBJECTS, VERBS, OBJECTS, WHEN)).capitalize()


def say(text: str, flush: bool = False) -> None:
    sys.stdout.write(text + "\n")
    if flush:
        sys.stdout.flush()


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def settings_for(database_url: str, migration_url: str) -> Settings:
    return Settings(
        _env_file=None,
        database_url=SecretStr(database_url),
        migration_database_url=SecretStr(migration_url),
        jwt_hs256_secret=SecretStr(SECRET),
        rate_limit_enabled=False,
        jobs_enabled=False,
        extraction_enabled=False,
    )


def _headers(settings: Settings, owner: str) -> dict[str, str]:
    tenant, user = owner.split("/")
    token = mint_dev_token(settings, tenant_id=tenant, user_id=user)
    return {"Authorization": f"Bearer {token}"}


async def load(client: AsyncClient, settings: Settings, corpus: dict[str, list[str]]) -> None:
    for owner, texts in corpus.items():
        for start in range(0, len(texts), 100):
            items = [{"text": text} for text in texts[start : start + 100]]
            response = await client.post(
                "/v1/users/me/memories/batch",
                headers=_headers(settings, owner),
                json={"items": items},
            )
            response.raise_for_status()


async def search_ms(
    client: AsyncClient, headers: dict[str, str], question: str, mode: str
) -> float:
    began = time.perf_counter()
    response = await client.post(
        "/v1/users/me/memories/search", headers=headers, json={"query": question, "mode": mode}
    )
    elapsed = (time.perf_counter() - began) * 1000
    response.raise_for_status()
    return elapsed


async def measure(
    sides: dict[str, Settings], corpus: dict[str, list[str]], questions: list[tuple[str, str]]
) -> dict[tuple[str, str], list[float]]:
    """Search latency per (side, mode). The sides take turns request by request (and which
    goes first alternates), so both see the same machine load."""
    apps = {name: create_app(settings) for name, settings in sides.items()}
    timings: dict[tuple[str, str], list[float]] = {}
    async with AsyncExitStack() as stack:
        clients = {}
        for name, app in apps.items():
            await stack.enter_async_context(LifespanManager(app))
            clients[name] = await stack.enter_async_context(
                AsyncClient(transport=ASGITransport(app=app), base_url="http://bench")
            )
            await load(clients[name], sides[name], corpus)
            say(f"{name}: {sum(map(len, corpus.values()))} memories loaded", flush=True)
        order = list(sides)
        for mode in ("hybrid", "lexical"):
            for i, (owner, question) in enumerate(questions):
                for name in order if i % 2 == 0 else reversed(order):
                    headers = _headers(sides[name], owner)
                    elapsed = await search_ms(clients[name], headers, question, mode)
                    timings.setdefault((name, mode), []).append(elapsed)
    return timings


async def main(arguments: argparse.Namespace) -> None:
    citus_app_url = os.environ["MNEME_CITUS_APP_URL"]
    citus_owner_url = os.environ["MNEME_CITUS_OWNER_URL"]
    rng = random.Random(7)  # noqa: S311 - a reproducible corpus, not a secret
    run = f"{rng.getrandbits(32):08x}-{int(time.time())}"
    corpus = {
        f"bench-{run}-t{t}/u{u}": [sentence(rng) for _ in range(arguments.memories)]
        for t in range(arguments.tenants)
        for u in range(arguments.users)
    }
    owners = list(corpus)
    questions = [(rng.choice(owners), sentence(rng)) for _ in range(arguments.queries)]

    with tempfile.TemporaryDirectory() as directory:
        cluster = await asyncio.to_thread(start_cluster, Path(directory))
        try:
            await bootstrap(cluster)
            single = settings_for(cluster.url("mneme_app"), cluster.url(OWNER_ROLE))
            owner_engine = create_engine(cluster.url(OWNER_ROLE), single, pool_size=1)
            await db_migrations.upgrade(owner_engine, single)
            await owner_engine.dispose()
            sides = {
                "single node": single,
                "citus 1+2": settings_for(citus_app_url, citus_owner_url),
            }
            timings = await measure(sides, corpus, questions)
        finally:
            cluster.stop()

    embedder = build_embedder(embedder_config_from_settings(Settings(_env_file=None)))
    load_model = getattr(embedder, "load", None)
    if load_model is not None:
        await load_model()
    embedding: list[float] = []
    for _, question in questions[:100]:
        began = time.perf_counter()
        await embedder.embed_query(question)
        embedding.append((time.perf_counter() - began) * 1000)
    await embedder.aclose()

    total = arguments.tenants * arguments.users * arguments.memories
    say(
        f"\n{total} memories ({arguments.tenants} tenants x {arguments.users} users x "
        f"{arguments.memories}), {arguments.queries} searches per side and mode, one at a time\n"
    )
    say("| side | mode | p50 ms | p95 ms |\n| --- | --- | --- | --- |")
    for (side, mode), values in sorted(timings.items()):
        say(
            f"| {side} | {mode} | {statistics.median(values):.1f} | "
            f"{percentile(values, 0.95):.1f} |"
        )
    say(
        f"| (query embedding alone) | | {statistics.median(embedding):.1f} | "
        f"{percentile(embedding, 0.95):.1f} |"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tenants", type=int, default=4)
    parser.add_argument("--users", type=int, default=5)
    parser.add_argument("--memories", type=int, default=100)
    parser.add_argument("--queries", type=int, default=200)
    asyncio.run(main(parser.parse_args()))
