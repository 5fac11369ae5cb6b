"""The optional reranking stage: a hosted `/rerank` service orders a search's first fused
candidates; its score is a component of each hit, and a reranker that fails or is slow leaves
the fused order. A local server here speaks the Cohere/Jina, Voyage and TEI shapes."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from asgi_lifespan import LifespanManager
from httpx import ASGITransport, AsyncClient
from opentelemetry.trace import INVALID_SPAN_CONTEXT, NonRecordingSpan

from service.config import Settings
from service.embedded_postgres import EmbeddedCluster
from service.main import create_app
from service.memories.schemas import SearchHit
from service.memories.telemetry import record_search_hits
from service.observability import DOMAIN_METRICS
from tests.conftest import bearer, make_settings, new_tenant

CORPUS = [
    "Ada plays the piano every evening after work",
    "Ada's piano teacher moved to Lisbon",
    "Ada bought a cello and takes lessons on Tuesdays",
    "The piano tuner comes in spring",
    "Ada likes jazz piano records",
    "The cello case is in the hallway",
]
QUERY = "which instrument does Ada play"
SLOW_ANSWER_SECONDS = 4.0


def relevance(document: str) -> float:
    """The fake model's judgement: cellos matter, then Ada; distinct from the fused order."""
    return 2.0 * ("cello" in document) + 1.0 * ("Ada" in document)


@dataclass
class FakeReranker:
    """What the local server received, and how it answers (the path picks the behaviour)."""

    requests: list[tuple[str, dict[str, str], dict[str, Any]]] = field(default_factory=list)
    url: str = ""

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, object]:
        if path == "/slow/rerank":
            # Far past the search's timeout (0.3 s) and its bound below (1.5 s), so a loaded
            # machine cannot make the search that gave up look like one that waited.
            time.sleep(SLOW_ANSWER_SECONDS)
        if path == "/broken/rerank":
            return 503, {"message": "overloaded"}
        if path == "/tei/rerank":
            ranked = sorted(enumerate(body["texts"]), key=lambda pair: -relevance(pair[1]))
            return 200, [{"index": index, "score": relevance(text)} for index, text in ranked]
        ranked = sorted(enumerate(body["documents"]), key=lambda pair: -relevance(pair[1]))
        results = [
            {"index": index, "relevance_score": relevance(document)} for index, document in ranked
        ]
        if path == "/wrong/rerank":
            results[0]["index"] = len(results)
        if path == "/voyage/rerank":
            return 200, {"object": "list", "data": results, "model": body.get("model")}
        return 200, {"id": "r-1", "results": results, "meta": {}}


@pytest.fixture(scope="module")
def fake_reranker() -> Iterator[FakeReranker]:
    fake = FakeReranker()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            fake.requests.append((self.path, dict(self.headers), body))
            status, answer = fake.answer(self.path, body)
            payload = json.dumps(answer).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the slow answer's caller has given up

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True)
def _migrated(settings: Settings) -> None:
    """The test database exists and is migrated before these tests start apps of their own."""


@asynccontextmanager
async def client_with(cluster: EmbeddedCluster, **overrides: Any) -> AsyncIterator[AsyncClient]:
    application = create_app(make_settings(cluster, **overrides))
    async with (
        LifespanManager(application),
        AsyncClient(transport=ASGITransport(app=application), base_url="http://mneme.test") as c,
    ):
        c.headers.update(bearer(application.state.mneme.settings, new_tenant(), "ada"))
        yield c


async def seeded_search(client: AsyncClient, **body: Any) -> list[dict[str, Any]]:
    """Seeds CORPUS for the client's user (once) and searches it."""
    listed = await client.get("/v1/users/me/memories")
    if not listed.json()["items"]:
        stored = await client.post(
            "/v1/users/me/memories/batch", json={"items": [{"text": t} for t in CORPUS]}
        )
        assert stored.status_code == 201, stored.text
    response = await client.post("/v1/users/me/memories/search", json={"query": QUERY, **body})
    assert response.status_code == 200, response.text
    hits: list[dict[str, Any]] = response.json()["hits"]
    return hits


async def fused_order(cluster: EmbeddedCluster, **body: Any) -> list[str]:
    async with client_with(cluster) as plain:
        hits = await seeded_search(plain, **body)
    assert all(hit["scores"]["rerank_score"] is None for hit in hits)
    return [hit["memory"]["text"] for hit in hits]


def failures(reason: str) -> float:
    value = DOMAIN_METRICS.registry.get_sample_value(
        "mneme_rerank_failures_total", {"reason": reason}
    )
    return value or 0.0


@pytest.mark.parametrize("api", ["cohere", "voyage", "tei"])
async def test_the_reranker_orders_the_first_candidates_and_its_score_is_on_each_hit(
    cluster: EmbeddedCluster, fake_reranker: FakeReranker, api: str
) -> None:
    fused = await fused_order(cluster, limit=len(CORPUS))
    fake_reranker.requests.clear()
    async with client_with(
        cluster,
        rerank_url=f"{fake_reranker.url}/{api}/rerank",
        rerank_api=api,
        rerank_api_key="sk-rerank",
        rerank_model="rerank-test",
    ) as client:
        hits = await seeded_search(client, limit=len(CORPUS))

    # Ordered by the reranker's scores; equal scores keep the fused order.
    assert [hit["memory"]["text"] for hit in hits] == sorted(fused, key=lambda t: -relevance(t))
    assert [hit["scores"]["rerank_score"] for hit in hits] == [
        relevance(hit["memory"]["text"]) for hit in hits
    ]
    assert hits[0]["memory"]["text"] == "Ada bought a cello and takes lessons on Tuesdays"
    # One call with the question and the fused candidates, in the API's own shape.
    [(path, headers, body)] = fake_reranker.requests
    assert path == f"/{api}/rerank"
    assert headers["Authorization"] == "Bearer sk-rerank"
    assert body["query"] == QUERY
    if api == "tei":
        assert sorted(body["texts"]) == sorted(CORPUS)
        assert "model" not in body
    else:
        assert body["documents"] == fused
        assert body["model"] == "rerank-test"
        assert body["top_k" if api == "voyage" else "top_n"] == len(CORPUS)


async def test_the_reranker_reaches_beyond_the_limit_to_its_top_n(
    cluster: EmbeddedCluster, fake_reranker: FakeReranker
) -> None:
    fused = await fused_order(cluster, limit=len(CORPUS))
    assert fused[0] != "Ada bought a cello and takes lessons on Tuesdays"
    async with client_with(cluster, rerank_url=f"{fake_reranker.url}/cohere/rerank") as client:
        [hit] = await seeded_search(client, limit=1)
    # The fused first is not returned: the reranker's first among the top 30 is.
    assert hit["memory"]["text"] == "Ada bought a cello and takes lessons on Tuesdays"
    assert hit["scores"]["rerank_score"] == 3.0


async def test_candidates_beyond_top_n_follow_in_fused_order_without_a_score(
    cluster: EmbeddedCluster, fake_reranker: FakeReranker
) -> None:
    fused = await fused_order(cluster, limit=len(CORPUS))
    async with client_with(
        cluster, rerank_url=f"{fake_reranker.url}/cohere/rerank", rerank_top_n=2
    ) as client:
        hits = await seeded_search(client, limit=len(CORPUS))
    texts = [hit["memory"]["text"] for hit in hits]
    assert texts[:2] == sorted(fused[:2], key=lambda t: -relevance(t))
    assert texts[2:] == fused[2:]
    assert [hit["scores"]["rerank_score"] is None for hit in hits] == [False] * 2 + [True] * 4


@pytest.mark.parametrize(
    ("path", "reason"),
    [("slow", "timeout"), ("broken", "error_status"), ("wrong", "bad_answer")],
)
async def test_a_reranker_that_fails_or_is_slow_leaves_the_fused_order_and_is_counted(
    cluster: EmbeddedCluster, fake_reranker: FakeReranker, path: str, reason: str
) -> None:
    fused = await fused_order(cluster, limit=len(CORPUS))
    before = failures(reason)
    async with client_with(
        cluster, rerank_url=f"{fake_reranker.url}/{path}/rerank", rerank_timeout_seconds=0.3
    ) as client:
        started = time.monotonic()
        hits = await seeded_search(client, limit=len(CORPUS))
        elapsed = time.monotonic() - started
    assert [hit["memory"]["text"] for hit in hits] == fused
    assert all(hit["scores"]["rerank_score"] is None for hit in hits)
    assert failures(reason) == before + 1
    if reason == "timeout":
        assert elapsed < 1.5  # the search did not wait for the slow answer


async def test_an_unreachable_reranker_leaves_the_fused_order(cluster: EmbeddedCluster) -> None:
    fused = await fused_order(cluster, limit=len(CORPUS))
    before = failures("unreachable")
    # The discard port, where nothing listens on this machine.
    async with client_with(cluster, rerank_url="http://127.0.0.1:9/rerank") as client:
        hits = await seeded_search(client, limit=len(CORPUS))
    assert [hit["memory"]["text"] for hit in hits] == fused
    assert failures("unreachable") == before + 1


async def test_the_context_block_orders_its_memories_by_the_reranker(
    cluster: EmbeddedCluster, fake_reranker: FakeReranker
) -> None:
    async with client_with(cluster, rerank_url=f"{fake_reranker.url}/cohere/rerank") as client:
        await seeded_search(client)
        fake_reranker.requests.clear()
        response = await client.post(
            "/v1/users/me/context", json={"query": QUERY, "k_user": 1, "k_episodic": 0}
        )
    assert response.status_code == 200, response.text
    [facts] = [s for s in response.json()["sections"] if s["name"] == "facts"]
    [item] = facts["items"]
    assert item["text"] == "Ada bought a cello and takes lessons on Tuesdays"
    assert item["scores"]["rerank_score"] == 3.0
    # The context's searches share one call.
    assert len(fake_reranker.requests) == 1


class RecordingSpan(NonRecordingSpan):
    """A span that keeps the events added to it."""

    def __init__(self) -> None:
        super().__init__(INVALID_SPAN_CONTEXT)
        self.events: list[tuple[str, dict[str, Any]]] = []

    def is_recording(self) -> bool:
        return True

    def add_event(self, name: str, attributes: Any = None, timestamp: int | None = None) -> None:
        self.events.append((name, dict(attributes or {})))


async def test_the_rerank_score_is_on_each_hit_event_of_the_span(
    cluster: EmbeddedCluster, fake_reranker: FakeReranker
) -> None:
    async with client_with(
        cluster, rerank_url=f"{fake_reranker.url}/cohere/rerank", rerank_top_n=2
    ) as client:
        hits = await seeded_search(client, limit=3)
    span = RecordingSpan()
    record_search_hits(span, [SearchHit.model_validate(hit) for hit in hits], mode="hybrid")
    # Present where the reranker scored the hit, absent (not 0) where it did not.
    assert [attributes.get("mneme.score.rerank") for _, attributes in span.events] == [
        hit["scores"]["rerank_score"] for hit in hits
    ]
    assert [hit["scores"]["rerank_score"] is None for hit in hits] == [False, False, True]
