"""The retrieval benchmark: store each conversation through the API, ask every question in
every search mode, score each ranking against the question's gold turns.

Only the HTTP API is used, on an app built by `create_app` and run in-process (httpx over ASGI,
with the app's lifespan), so what is measured is what a client gets: token checks, validation,
embedding, the fusion statement and serialisation included. Every conversation gets a fresh
tenant, so conversations never see each other's memories.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from typing import Any

from asgi_lifespan import LifespanManager
from httpx import ASGITransport, AsyncClient, Response
from tqdm import tqdm

from benchmarks.datasets import (
    Conversation,
    Dataset,
    Observation,
    StoredMemories,
    Turn,
    turn_position,
)
from benchmarks.metrics import score_ranking
from benchmarks.modes import SearchMode
from service.auth.tokens import mint_dev_token
from service.config import Settings
from service.main import create_app
from service.memories.schemas import BATCH_MAX

BENCH_USER = "bench-user"
# The principal that loads and searches: a service may address any user of its tenant.
BENCH_SERVICE = "mneme-bench"
# Namespace of the stable thread ids the benchmark gives each conversation session.


class BenchmarkError(RuntimeError):
    """The service answered a benchmark request with something other than success."""


@dataclass(frozen=True)
class RetrievalOptions:
    modes: tuple[SearchMode, ...]
    with_decay: bool = True
    progress: bool = True
    memories: StoredMemories = "turns"


@dataclass(frozen=True)
class ModeOutcome:
    scores: dict[str, float]
    first_relevant: int | None
    latency_ms: float


@dataclass(frozen=True)
class QuestionOutcome:
    conversation_id: str
    question_id: str
    category: str
    gold: frozenset[str]
    by_mode: dict[str, ModeOutcome]


@dataclass
class LoadStats:
    """What the service made of the turns it was given."""

    stored: int = 0
    # Turns identical to one already stored: the service returned the existing memory.
    merged_duplicates: int = 0
    # Turns refused by the secret/PII rules, by rule name (never stored, never findable).
    refused: Counter[str] = field(default_factory=Counter)
    embedding_models: Counter[str] = field(default_factory=Counter)
    stored_without_embedding: int = 0


@dataclass
class RetrievalRun:
    questions: list[QuestionOutcome]
    load: LoadStats
    # Searches answered without a query embedding (the embedder failed: lexical only).
    not_embedded: Counter[str]
    load_seconds: float
    search_seconds: float


def _service_headers(settings: Settings, tenant_id: str) -> dict[str, str]:
    token = mint_dev_token(settings, tenant_id=tenant_id, user_id=BENCH_SERVICE, service=True)
    return {"Authorization": f"Bearer {token}"}


def _expect(response: Response, status: int) -> dict[str, Any]:
    if response.status_code != status:
        raise BenchmarkError(
            f"{response.request.method} {response.request.url.path} answered "
            f"{response.status_code}, expected {status}: {response.text[:500]}"
        )
    body: dict[str, Any] = response.json()
    return body


def _session_of(turn: Turn) -> str:
    return turn.dia_id.partition(":")[0]


def _memory_item(turn: Turn, thread_id: str) -> dict[str, Any]:
    """A turn as a client that keeps one thread per conversation session stores it: the
    session's thread is the memory's source thread and the turn's author its speaker, as for
    memories the thread write path derives from messages that carry their author's name."""
    number = turn.dia_id.partition(":")[2]
    # The dataset dates sessions, not turns; a chat client knows each message's time. Turns
    # are spaced one second apart from the session's time, so their order is kept.
    said_at = turn.event_at + timedelta(seconds=int(number) if number.isdigit() else 0)
    return {
        "kind": "episodic",
        "text": turn.text,
        "event_at": said_at.isoformat(),
        "source_thread_id": thread_id,
        "metadata": {"dia_id": turn.dia_id},
        **({"speaker": turn.speaker} if turn.speaker else {}),
    }


def _fact_item(observation: Observation, after: timedelta, thread_id: str) -> dict[str, Any]:
    """An observation as the write path stores a fact it drew from a conversation: a semantic
    memory whose source thread is the session's, dated `after` the session's time (the order
    the facts were drawn in), pointing at the turns it rests on."""
    return {
        "kind": "semantic",
        "text": observation.text,
        "event_at": (observation.event_at + after).isoformat(),
        "source_thread_id": thread_id,
        "metadata": {"dia_ids": sorted(observation.evidence)},
    }


@dataclass(frozen=True)
class _Stored:
    """One memory the benchmark sends: its API item and the turns finding it counts for."""

    session: str
    turns: frozenset[str]
    item: Callable[[str], dict[str, Any]]


def _memories(conversation: Conversation, memories: StoredMemories) -> list[_Stored]:
    turns = [
        _Stored(_session_of(turn), frozenset({turn.dia_id}), partial(_memory_item, turn))
        for turn in conversation.turns
    ]
    if memories == "turns":
        return turns
    # Alone, each fact a second after the one before it in its session, from the session's
    # time. Beside the turns (each a second after the session's time per its number), each fact
    # half a second after the last turn it rests on, a millisecond after the fact drawn before
    # it from the same turn: between that turn and the next, where a write path drawing facts
    # while the conversation goes on writes it.
    drawn: Counter[str] = Counter()
    facts: list[_Stored] = []
    for observation in conversation.observations:
        if memories == "observations":
            after = timedelta(seconds=drawn[observation.session])
            drawn[observation.session] += 1
        else:
            last = max(observation.evidence, key=turn_position)
            after = timedelta(seconds=turn_position(last)[1], milliseconds=500 + drawn[last])
            drawn[last] += 1
        facts.append(
            _Stored(
                observation.session, observation.evidence, partial(_fact_item, observation, after)
            )
        )
    return facts if memories == "observations" else turns + facts


def _refused_index(response: Response) -> tuple[int, str] | None:
    """Which batch item the secret/PII rules refused, and the rule; None for other errors."""
    if response.status_code != 422:
        return None
    problem: dict[str, Any] = response.json()
    if problem.get("code") != "SECRET_REFUSED":
        return None
    location = (problem.get("errors") or [{}])[0].get("loc") or []
    if len(location) < 3 or location[:2] != ["body", "items"] or not isinstance(location[2], int):
        return None
    return location[2], str(problem.get("rule", "unknown"))


async def load_conversation(
    client: AsyncClient,
    headers: dict[str, str],
    conversation: Conversation,
    stats: LoadStats,
    advance: Callable[[int], object],
    memories: StoredMemories = "turns",
) -> dict[str, set[str]]:
    """Store every turn as an episodic memory (or every observation as a fact), `BATCH_MAX`
    per request. Returns, by memory id, the turns of what the service merged into an existing
    identical memory (their metadata is lost)."""
    merged: dict[str, set[str]] = {}
    url = f"/v1/users/{BENCH_USER}/memories/batch"
    stored = _memories(conversation, memories)
    # A memory names a thread of its user as its source: one thread per session.
    threads: dict[str, str] = {}
    for session in dict.fromkeys(memory.session for memory in stored):
        created = await client.post(
            f"/v1/users/{BENCH_USER}/threads", headers=headers, json={"title": session}
        )
        threads[session] = str(_expect(created, 201)["id"])
    for start in range(0, len(stored), BATCH_MAX):
        batch = stored[start : start + BATCH_MAX]
        while batch:
            payload = [memory.item(threads[memory.session]) for memory in batch]
            response = await client.post(url, headers=headers, json={"items": payload})
            refused = _refused_index(response)
            if refused is not None:
                # All or nothing per batch: leave the refused item out and send the rest again.
                index, rule = refused
                if not 0 <= index < len(batch):
                    raise BenchmarkError(f"a refusal names item {index} of {len(batch)}")
                stats.refused[rule] += 1
                del batch[index]
                advance(1)
                continue
            items = _expect(response, 201)["items"]
            for memory, item in zip(batch, items, strict=True):
                if item["duplicate"]:
                    stats.merged_duplicates += 1
                    merged.setdefault(item["id"], set()).update(memory.turns)
                else:
                    stats.stored += 1
                model = item["embedding_model"]
                if model is None:
                    stats.stored_without_embedding += 1
                else:
                    stats.embedding_models[model] += 1
            advance(len(batch))
            break
    return merged


def _memory_count(dataset: Dataset, memories: StoredMemories) -> int:
    """How many memories a run of `dataset` sends."""
    turns = dataset.turn_count if memories != "observations" else 0
    return turns + (dataset.observation_count if memories != "turns" else 0)


def _hit_turns(hit: dict[str, Any], merged: dict[str, set[str]]) -> frozenset[str]:
    """The turn ids a hit stands for: its own (metadata: a turn's id, or the turns a fact rests
    on) and those of any memory merged into it."""
    metadata = hit["memory"]["metadata"]
    turns = set(merged.get(hit["memory"]["id"], ()))
    own = metadata.get("dia_id")
    if isinstance(own, str):
        turns.add(own)
    turns.update(turn for turn in metadata.get("dia_ids") or () if isinstance(turn, str))
    return frozenset(turns)


def _first_relevant(ranking: list[frozenset[str]], gold: frozenset[str]) -> int | None:
    return next((rank for rank, hit in enumerate(ranking, start=1) if hit & gold), None)


async def run_retrieval(
    client: AsyncClient, settings: Settings, dataset: Dataset, options: RetrievalOptions
) -> RetrievalRun:
    """Load every conversation of `dataset`, then search each question in every mode."""
    run_tag = uuid.uuid4().hex[:10]
    tenants = [f"bench-{run_tag}-{n}" for n in range(len(dataset.conversations))]
    stats = LoadStats()
    merged_by_conversation: list[dict[str, set[str]]] = []

    started = time.perf_counter()
    with tqdm(
        total=_memory_count(dataset, options.memories),
        desc=f"storing {options.memories}",
        unit="memory",
        file=sys.stderr,
        disable=not options.progress,
    ) as bar:
        for tenant, conversation in zip(tenants, dataset.conversations, strict=True):
            headers = _service_headers(settings, tenant)
            merged_by_conversation.append(
                await load_conversation(
                    client, headers, conversation, stats, bar.update, options.memories
                )
            )
    load_seconds = time.perf_counter() - started

    outcomes: list[QuestionOutcome] = []
    not_embedded: Counter[str] = Counter()
    url = f"/v1/users/{BENCH_USER}/memories/search"
    started = time.perf_counter()
    with tqdm(
        total=dataset.question_count * len(options.modes),
        desc="searching",
        unit="search",
        file=sys.stderr,
        disable=not options.progress,
    ) as bar:
        for tenant, conversation, merged in zip(
            tenants, dataset.conversations, merged_by_conversation, strict=True
        ):
            # Minted per conversation: a long run must not outlive its tokens.
            headers = _service_headers(settings, tenant)
            for question in conversation.questions:
                by_mode: dict[str, ModeOutcome] = {}
                # Modes interleave per question so each sees the same state of the caches.
                for mode in options.modes:
                    body = mode.request(question.text, with_decay=options.with_decay)
                    sent = time.perf_counter()
                    response = await client.post(url, headers=headers, json=body)
                    latency_ms = (time.perf_counter() - sent) * 1000
                    result = _expect(response, 200)
                    if mode.mode != "lexical" and not result["query_embedded"]:
                        not_embedded[mode.name] += 1
                    ranking = [_hit_turns(hit, merged) for hit in result["hits"]]
                    by_mode[mode.name] = ModeOutcome(
                        scores=score_ranking(ranking, question.gold),
                        first_relevant=_first_relevant(ranking, question.gold),
                        latency_ms=latency_ms,
                    )
                    bar.update(1)
                outcomes.append(
                    QuestionOutcome(
                        conversation_id=conversation.conversation_id,
                        question_id=question.question_id,
                        category=question.category,
                        gold=question.gold,
                        by_mode=by_mode,
                    )
                )
    search_seconds = time.perf_counter() - started
    return RetrievalRun(outcomes, stats, not_embedded, load_seconds, search_seconds)


async def benchmark_app(
    settings: Settings, dataset: Dataset, options: RetrievalOptions
) -> RetrievalRun:
    """Run the benchmark against a fresh app built from `settings`, in-process."""
    app = create_app(settings)
    # Start-up loads the embedding model and may migrate: more than the default 5 s budget.
    async with (
        LifespanManager(app, startup_timeout=300, shutdown_timeout=60),
        AsyncClient(transport=ASGITransport(app=app), base_url="http://mneme.bench") as client,
    ):
        return await run_retrieval(client, settings, dataset, options)
