"""A hosted model's round trip holds no database connection and no place in the admission
gate: a request that waits on an embedding model (a search's, a context's or a turn's
question, a write's text) waits before its transaction begins, and one that waits on the chat
model (a summary asked for now, a compaction) between transactions of its own, each with its
place given up meanwhile. With one connection and one place, every other request is served
meanwhile; were either held, they would wait for it and be refused `SERVICE_BUSY` once the
wait ran out, and a slow provider would leave the process nothing for any request.

Each write's text is embedded once: the vectors made ahead are the ones stored."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from benchmarks.server import RunningServer, loopback_server
from service.config import Settings
from service.embedded_postgres import EmbeddedCluster
from tests.conftest import bearer, database_of_its_own
from tests.fixtures.openai_server import (
    API_KEY,
    CHAT_PATH,
    EMBEDDINGS_PATH,
    MODEL,
    FakeOpenAIServer,
    RecordedRequest,
    Reply,
    completion,
)

POOL_TIMEOUT_SECONDS = 1.0


@pytest.fixture(scope="module")
def embeddings() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


RERANK_PATH = "/rerank"


class HeldReranker:
    """A Cohere-shaped `/rerank` on 127.0.0.1 that answers each document by its length, and
    keeps its answers back while held (`hold_back`, `release`), as `FakeOpenAIServer` does."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self._released = threading.Event()
        self._released.set()
        reranker = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                reranker.requests.append(RecordedRequest(self.path, {}, body))
                reranker._released.wait(timeout=30)
                results = [
                    {"index": index, "relevance_score": float(len(document))}
                    for index, document in enumerate(body["documents"])
                ]
                payload = json.dumps({"results": results}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}{RERANK_PATH}"

    def hold_back(self) -> None:
        self._released.clear()

    def release(self) -> None:
        self._released.set()

    def stop(self) -> None:
        self._released.set()
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture(scope="module")
def reranker() -> Iterator[HeldReranker]:
    held = HeldReranker()
    yield held
    held.stop()


@pytest.fixture(scope="module")
async def one_connection_server(
    cluster: EmbeddedCluster, embeddings: FakeOpenAIServer, reranker: HeldReranker
) -> AsyncIterator[RunningServer]:
    """A live server on a hosted embedding model, a hosted chat model and a hosted reranker,
    with one database connection and one place in its admission gate, which a request waits
    for at most `POOL_TIMEOUT_SECONDS`."""
    settings = await database_of_its_own(
        cluster,
        migrate_on_start=False,
        embedding_provider="openai",
        embedding_openai_base_url=embeddings.base_url,
        embedding_openai_api_key=API_KEY,
        embedding_openai_send_dimensions=True,
        embedding_openai_max_retries=0,
        embedding_openai_timeout_seconds=20,
        db_pool_size=1,
        db_max_overflow=0,
        db_pool_timeout_seconds=POOL_TIMEOUT_SECONDS,
        max_requests_in_progress=1,
        request_queue_timeout_seconds=POOL_TIMEOUT_SECONDS,
        llm_base_url=embeddings.base_url,
        llm_api_key=API_KEY,
        llm_model=MODEL,
        llm_max_retries=0,
        llm_timeout_seconds=20,
        rerank_url=reranker.url,
        rerank_timeout_seconds=20,
    )
    async with loopback_server(settings) as server:
        yield server


HostedModel = FakeOpenAIServer | HeldReranker


def requests_to(model: HostedModel, path: str = EMBEDDINGS_PATH) -> int:
    return sum(request.path == path for request in model.requests)


@dataclass
class Caller:
    """User `ada` of the test's tenant, on the one-connection server."""

    server: RunningServer
    model: FakeOpenAIServer
    headers: dict[str, str]
    client: httpx.AsyncClient

    async def served_meanwhile(
        self,
        call: Callable[[], Awaitable[Any]],
        path: str = EMBEDDINGS_PATH,
        model: HostedModel | None = None,
    ) -> Any:
        """`call`'s result, run while the model holds its answers back until another request
        (which needs the database) has been answered; that answer must be a 200. Returns
        once the model answered `call`, checking it asked the model (`path`: embeddings, or
        the chat model's completions; `model`: another than the OpenAI-compatible one) once."""
        held = self.model if model is None else model
        before = requests_to(held, path)
        held.hold_back()
        try:
            pending = asyncio.ensure_future(call())
            # The model's server records what it is asked in threads of its own: polled.
            async with asyncio.timeout(10):
                while requests_to(held, path) == before:  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
            async with httpx.AsyncClient(base_url=self.server.base_url) as other:
                meanwhile = await other.get(
                    "/v1/users/me", headers=self.headers, timeout=POOL_TIMEOUT_SECONDS * 5
                )
            assert meanwhile.status_code == 200, meanwhile.text
            assert not pending.done()
        except BaseException:
            pending.cancel()
            raise
        finally:
            held.release()
        result = await pending
        assert requests_to(held, path) == before + 1
        return result

    async def new_thread(self) -> str:
        """The path of a thread started for the user."""
        thread = await self.client.post("/v1/users/me/threads", json={"title": "Boats"})
        assert thread.status_code == 201, thread.text
        return f"/v1/users/me/threads/{thread.json()['id']}"


@pytest.fixture
async def ada(
    one_connection_server: RunningServer,
    embeddings: FakeOpenAIServer,
    settings: Settings,
    tenant: str,
) -> AsyncIterator[Caller]:
    headers = bearer(settings, tenant, "ada")
    async with httpx.AsyncClient(
        base_url=one_connection_server.base_url, headers=headers, timeout=30
    ) as client:
        yield Caller(one_connection_server, embeddings, headers, client)


def unique(words: str) -> str:
    return f"{words} {uuid.uuid4().hex[:8]}"


REQUESTS: dict[str, tuple[str, str, Callable[[], dict[str, Any]]]] = {
    "search": ("POST", "/v1/users/me/memories/search", lambda: {"query": unique("kayaks")}),
    "context": ("POST", "/v1/users/me/context", lambda: {"query": unique("kayaks")}),
    "remember": ("POST", "/v1/users/me/memories", lambda: {"text": unique("Rows a kayak")}),
    "remember a batch": (
        "POST",
        "/v1/users/me/memories/batch",
        lambda: {"items": [{"text": unique("Rows")}, {"text": unique("Sails")}]},
    ),
    "put a keyed memory": (
        "PUT",
        "/v1/users/me/keyed-memories?kind=semantic&key=boat",
        lambda: {"text": unique("Owns a sea kayak")},
    ),
    "set an instruction": ("PUT", "/v1/users/me/procedures", lambda: {"style": unique("Brief")}),
}


@pytest.mark.parametrize("what", REQUESTS)
async def test_a_request_waiting_on_the_model_holds_no_connection(ada: Caller, what: str) -> None:
    method, path, body = REQUESTS[what]
    # The user exists before the held request (its first write would make it).
    assert (await ada.client.get("/v1/users/me/memories")).status_code == 200
    response = await ada.served_meanwhile(lambda: ada.client.request(method, path, json=body()))
    assert response.status_code in (200, 201), response.text
    answer = response.json()
    if what == "search":
        assert answer["query_embedded"] is True
    for item in answer.get("items", [answer]) if what.startswith("remember") else []:
        assert item["embedding_model"] is not None


async def test_a_change_of_text_is_embedded_before_the_memory_is_locked(ada: Caller) -> None:
    created = await ada.client.post("/v1/users/me/memories", json={"text": unique("Paddles")})
    assert created.status_code == 201, created.text
    path = f"/v1/users/me/memories/{created.json()['id']}"
    # The text a change stores is stripped; it is that text which is embedded ahead.
    response = await ada.served_meanwhile(
        lambda: ada.client.patch(path, json={"text": f"  {unique('Paddles daily')}  "})
    )
    assert response.status_code == 200, response.text
    assert response.json()["embedding_model"] is not None


async def test_an_agent_turn_asks_the_model_before_it_locks_the_thread(ada: Caller) -> None:
    turns = f"{await ada.new_thread()}/turns"
    # The block's question is the turn's last user message.
    messages = [
        {"role": "assistant", "content": "Which boat?"},
        {"role": "user", "content": unique("The red kayak")},
    ]
    response = await ada.served_meanwhile(
        lambda: ada.client.post(turns, json={"messages": messages})
    )
    assert response.status_code == 201, response.text
    assert [item["content"] for item in response.json()["items"]] == [
        message["content"] for message in messages
    ]


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("remember", {"text": unique("Keeps a canoe at the lake")}),
        ("recall", {"query": unique("canoe")}),
        ("get_context", {"query": unique("canoe")}),
    ],
)
async def test_an_mcp_tool_waiting_on_the_model_holds_no_connection(
    ada: Caller, tool: str, arguments: dict[str, Any]
) -> None:
    http = httpx2.AsyncClient(headers=ada.headers, timeout=30.0)
    transport = streamable_http_client(f"{ada.server.base_url}/mcp", http_client=http)
    async with http, Client(transport) as mcp:
        await mcp.list_tools()
        result = await ada.served_meanwhile(lambda: mcp.call_tool(tool, arguments))
    assert not result.is_error, result.content


async def test_nothing_is_embedded_for_a_caller_the_route_refuses(ada: Caller) -> None:
    """The texts go to the model only once the caller may address the user (the model is a
    third party; a refused request leaves nothing with it)."""
    before = requests_to(ada.model)
    for path, body in (
        ("/v1/users/bob/memories", {"text": "Bob hides a kayak"}),
        (
            f"/v1/users/bob/threads/{uuid.uuid4()}/turns",
            {"messages": [{"role": "user", "content": "Bob's kayak"}]},
        ),
        ("/v1/org/memories", {"text": "Everyone rows"}),
    ):
        refused = await ada.client.post(path, json=body)
        assert refused.status_code in (403, 404), refused.text
    assert requests_to(ada.model) == before


async def test_a_summary_asked_for_now_holds_no_connection_while_the_model_writes_it(
    ada: Caller,
) -> None:
    path = await ada.new_thread()
    exchange = [
        {"role": "user", "content": "Can I learn to roll a kayak?"},
        {"role": "assistant", "content": "Yes, in a pool first."},
        {"role": "user", "content": "Where?"},
        {"role": "assistant", "content": "At the club's Tuesday sessions."},
    ]
    appended = await ada.client.post(f"{path}/messages", json={"messages": exchange})
    assert appended.status_code == 201, appended.text
    response = await ada.served_meanwhile(lambda: ada.client.post(f"{path}/summarize"), CHAT_PATH)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "written"


async def test_a_compaction_holds_no_connection_while_the_model_consolidates(
    ada: Caller,
) -> None:
    """The facts are read, the model asked, then the consolidation written (and embedded) in
    a transaction of its own."""

    def consolidated(_request: RecordedRequest) -> Reply:
        fact = {
            "text": "User rows and sails.",
            "category": "preference",
            "subject": "boats",
            "sources": ["m1", "m2"],
        }
        return completion(json.dumps({"facts": [fact]}))

    batch = {"items": [{"text": "User rows."}, {"text": "User sails."}]}
    written = await ada.client.post("/v1/users/me/memories/batch", json=batch)
    assert written.status_code == 201, written.text
    ada.model.reply = consolidated
    try:
        response = await ada.served_meanwhile(
            lambda: ada.client.post("/v1/users/me/memories/compact"), CHAT_PATH
        )
    finally:
        ada.model.reply = None
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["status"] == "compacted"
    [fact] = result["written"]
    assert fact["text"] == "User rows and sails." and fact["embedding_model"] is not None
    assert sorted(result["superseded"]) == sorted(item["id"] for item in written.json()["items"])


async def test_a_text_put_again_unchanged_is_not_sent_to_the_model_again(ada: Caller) -> None:
    """A write embeds its text before it knows whether the text changed: the process keeps the
    vectors of texts it embedded, and a key put again as it was costs no model call."""
    path = "/v1/users/me/keyed-memories?kind=semantic&key=paddle"
    body = {"text": unique("Uses a carbon paddle")}
    first = await ada.client.put(path, json=body)
    assert first.status_code == 201, first.text
    before = requests_to(ada.model)
    again = await ada.client.put(path, json={**body, "metadata": {"checked": True}})
    assert again.status_code == 200, again.text
    assert again.json()["metadata"] == {"checked": True}
    assert requests_to(ada.model) == before


@pytest.fixture
async def ada_with_memories(ada: Caller) -> Caller:
    batch = {"items": [{"text": "Rows a kayak on Sundays"}, {"text": "Sails a dinghy"}]}
    written = await ada.client.post("/v1/users/me/memories/batch", json=batch)
    assert written.status_code == 201, written.text
    return ada


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/users/me/memories/search", {"query": "kayak"}),
        ("/v1/users/me/context", {"query": "kayak"}),
    ],
)
async def test_a_reranker_is_waited_for_after_the_transaction_ended(
    ada_with_memories: Caller, reranker: HeldReranker, path: str, body: dict[str, Any]
) -> None:
    """A search or a block reads nothing after its fusion statement: its transaction ends
    before the reranker is called, and its scores still order the hits."""
    ada = ada_with_memories
    response = await ada.served_meanwhile(
        lambda: ada.client.post(path, json=body), RERANK_PATH, reranker
    )
    assert response.status_code == 200, response.text
    if "hits" in response.json():
        [first, *_] = response.json()["hits"]
        assert first["memory"]["text"] == "Rows a kayak on Sundays"
        assert first["scores"]["rerank_score"] == len("Rows a kayak on Sundays")


async def test_an_mcp_recall_waits_for_the_reranker_after_its_transaction(
    ada_with_memories: Caller, reranker: HeldReranker
) -> None:
    ada = ada_with_memories
    http = httpx2.AsyncClient(headers=ada.headers, timeout=30.0)
    transport = streamable_http_client(f"{ada.server.base_url}/mcp", http_client=http)
    async with http, Client(transport) as mcp:
        await mcp.list_tools()
        result = await ada.served_meanwhile(
            lambda: mcp.call_tool("recall", {"query": "kayak"}), RERANK_PATH, reranker
        )
    assert not result.is_error, result.content


async def test_an_agent_turn_keeps_its_transaction_through_the_reranker(
    ada_with_memories: Caller, reranker: HeldReranker
) -> None:
    """The one wait on a model inside a transaction: a turn writes its idempotency record
    after its block, so the reranker is called with its transaction open (bounded by the
    reranker's timeout). The block is reranked, and the record written: a retry replays it."""
    ada = ada_with_memories
    turns = f"{await ada.new_thread()}/turns"
    turn = {"messages": [{"role": "user", "content": "Where do I keep the kayak?"}]}
    before = requests_to(reranker, RERANK_PATH)
    key = {"Idempotency-Key": str(uuid.uuid4())}
    response = await ada.client.post(turns, json=turn, headers=key)
    assert response.status_code == 201, response.text
    assert requests_to(reranker, RERANK_PATH) == before + 1
    replayed = await ada.client.post(turns, json=turn, headers=key)
    assert replayed.status_code == 201 and replayed.json() == response.json()
    assert requests_to(reranker, RERANK_PATH) == before + 1
