"""LoCoMo through the LangGraph store: recall of `MnemeStore.search` next to the REST search it
wraps (same server, same memories, same questions), and the latency the adapter adds per call.

    python integrations/langgraph/bench/locomo_store.py [--conversations 3] [--dataset PATH]

Starts a throwaway embedded Postgres and `create_app` under uvicorn on loopback, stores every
turn of the first conversations with `store.put((user, "episodic"), dia_id, {"text": …})`, then
asks every question twice — `POST /v1/users/{user}/memories/search` with httpx and
`store.search((user,), query=…)` — alternating which goes first. Gold = the question's evidence
turns (keys = dialogue ids). Prints recall@1/@10, how many rankings agree id for id, and the
per-call latency of each path. The dataset is read where it lies, never copied.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import sys
import time
import uuid
from pathlib import Path

import httpx
from langgraph.store.base import PutOp
from mneme_langgraph import MnemeStore
from pydantic import SecretStr

from benchmarks.database import throwaway_database
from benchmarks.datasets import Conversation, load_dataset
from benchmarks.metrics import recall_at
from benchmarks.server import loopback_server
from service.auth.tokens import mint_dev_token
from service.config import Settings

LIMIT = 10
PUT_BATCH = 50


def say(line: str) -> None:
    sys.stdout.write(line + "\n")


def rest_search(
    rest: httpx.Client, user: str, query: str, times: list[float]
) -> list[frozenset[str]]:
    began = time.perf_counter()
    response = rest.post(
        f"/v1/users/{user}/memories/search",
        json={"query": query, "limit": LIMIT, "scopes": ["user"]},
    )
    times.append((time.perf_counter() - began) * 1000)
    response.raise_for_status()
    return [frozenset({hit["memory"]["store_key"]}) for hit in response.json()["hits"]]


def store_search(
    store: MnemeStore, user: str, query: str, times: list[float]
) -> list[frozenset[str]]:
    began = time.perf_counter()
    items = store.search((user,), query=query, limit=LIMIT)
    times.append((time.perf_counter() - began) * 1000)
    return [frozenset({item.key}) for item in items]


def measure(base_url: str, settings: Settings, conversations: list[Conversation]) -> None:
    rest_rankings: list[list[frozenset[str]]] = []
    store_rankings: list[list[frozenset[str]]] = []
    golds: list[frozenset[str]] = []
    rest_ms: list[float] = []
    store_ms: list[float] = []
    put_ms: list[float] = []
    for conversation in conversations:
        tenant = "t-" + uuid.uuid4().hex[:12]
        user = "locomo-" + conversation.conversation_id
        token = mint_dev_token(settings, tenant_id=tenant, user_id="bench", service=True)
        store = MnemeStore(base_url, token)
        for start in range(0, len(conversation.turns), PUT_BATCH):
            chunk = conversation.turns[start : start + PUT_BATCH]
            began = time.perf_counter()
            store.batch(
                [PutOp((user, "episodic"), turn.dia_id, {"text": turn.text}) for turn in chunk]
            )
            put_ms.append((time.perf_counter() - began) * 1000 / len(chunk))
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base_url, headers=headers, timeout=30) as rest:
            for index, question in enumerate(conversation.questions):
                # Alternate which path goes first, so neither always meets a warm cache.
                if index % 2:
                    store_rankings.append(store_search(store, user, question.text, store_ms))
                    rest_rankings.append(rest_search(rest, user, question.text, rest_ms))
                else:
                    rest_rankings.append(rest_search(rest, user, question.text, rest_ms))
                    store_rankings.append(store_search(store, user, question.text, store_ms))
                golds.append(question.gold)
        store.close()

    def mean_recall(rankings: list[list[frozenset[str]]], k: int) -> float:
        return statistics.fmean(recall_at(r, g, k) for r, g in zip(rankings, golds, strict=True))

    same = sum(r == s for r, s in zip(rest_rankings, store_rankings, strict=True))
    turns = sum(len(c.turns) for c in conversations)
    say(f"conversations {len(conversations)}, turns {turns}, questions {len(golds)}")
    say(f"put through the store: {statistics.median(put_ms):.1f} ms per item (median)")
    say("| path | R@1 | R@10 | p50 ms | p95 ms |")
    say("| --- | ---: | ---: | ---: | ---: |")
    for name, rankings, times in (
        ("REST POST …/memories/search", rest_rankings, rest_ms),
        ("MnemeStore.search", store_rankings, store_ms),
    ):
        p95 = statistics.quantiles(times, n=20)[-1]
        say(
            f"| {name} | {mean_recall(rankings, 1):.3f} | {mean_recall(rankings, LIMIT):.3f} "
            f"| {statistics.median(times):.1f} | {p95:.1f} |"
        )
    added = statistics.median(s - r for s, r in zip(store_ms, rest_ms, strict=True))
    say(
        f"identical rankings: {same}/{len(golds)}; added latency per call "
        f"(median of paired differences): {added:.2f} ms"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=Path("/work/shared/bench/locomo10.json"))
    parser.add_argument("--conversations", type=int, default=3)
    args = parser.parse_args()
    dataset = load_dataset(args.dataset, "locomo").selected(
        conversations=args.conversations, questions=None
    )
    settings = Settings(
        rate_limit_enabled=False,
        jwt_hs256_secret=SecretStr(secrets.token_urlsafe(32)),
        database_url=None,
        migration_database_url=None,
        jobs_enabled=False,
    )
    async with throwaway_database(settings) as database, loopback_server(database) as server:
        await asyncio.to_thread(measure, server.base_url, database, list(dataset.conversations))


if __name__ == "__main__":
    asyncio.run(main())
