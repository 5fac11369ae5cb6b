"""The LangGraph store adapter (integrations/langgraph) against a live server, through
langgraph's own `BaseStore` API: put/get/search/delete, namespaces, batches, a graph."""

from __future__ import annotations

import asyncio
import gc
import time
import uuid
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict

import httpx
import pytest
from langgraph.graph import START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import GetOp, InvalidNamespaceError, Item, PutOp, SearchOp
from mneme_langgraph import MnemeStore, MnemeStoreError, MnemeStoreUnreachable

from benchmarks.server import RunningServer
from service.auth.tokens import mint_dev_token
from service.config import Settings


def token(settings: Settings, tenant: str, user: str, *, service: bool = False) -> str:
    return mint_dev_token(settings, tenant_id=tenant, user_id=user, service=service)


@pytest.fixture
def store(live_server: RunningServer, settings: Settings, tenant: str) -> Iterator[MnemeStore]:
    with_user = MnemeStore(live_server.base_url, token(settings, tenant, "ada"))
    yield with_user
    with_user.close()


def rest_texts(server: RunningServer, bearer_token: str) -> list[str]:
    response = httpx.get(
        f"{server.base_url}/v1/users/me/memories",
        headers={"Authorization": f"Bearer {bearer_token}"},
    )
    assert response.status_code == 200, response.text
    return [m["text"] for m in response.json()["items"]]


def test_put_then_get_returns_the_value_and_a_second_put_updates_it(
    store: MnemeStore, live_server: RunningServer
) -> None:
    namespace = ("ada", "semantic", "pets")
    store.put(namespace, "tortoise", {"text": "Ada has a tortoise named Sheldon.", "age": 3})
    first = store.get(namespace, "tortoise")
    assert first is not None
    assert first.namespace == namespace and first.key == "tortoise"
    assert first.value == {"text": "Ada has a tortoise named Sheldon.", "age": 3}

    time.sleep(0.01)
    store.put(namespace, "tortoise", {"text": "Ada has a tortoise named Sheldon.", "age": 4})
    second = store.get(namespace, "tortoise")
    assert second is not None and second.value["age"] == 4
    assert second.created_at == first.created_at and second.updated_at > first.updated_at
    # One memory, not two: the key found the first one again.
    assert len(rest_texts(live_server, store.token)) == 1

    assert store.get(namespace, "missing") is None
    assert store.get(("ada", "semantic"), "tortoise") is None  # another namespace


def test_search_ranks_by_query_filters_by_value_and_respects_the_prefix(
    store: MnemeStore,
) -> None:
    store.put(("ada", "semantic", "food"), "tea", {"text": "Ada drinks green tea.", "n": 1})
    store.put(("ada", "semantic", "food"), "cake", {"text": "Ada bakes lemon cake.", "n": 2})
    store.put(("ada", "episodic"), "trip", {"text": "Ada went to Kyoto for tea.", "n": 3})

    hits = store.search(("ada",), query="green tea")
    assert [h.key for h in hits][:1] == ["tea"]
    assert all(h.score is not None and h.score > 0 for h in hits)
    assert {h.key for h in store.search(("ada", "episodic"), query="tea")} == {"trip"}
    assert [h.key for h in store.search(("ada",), query="tea", filter={"n": 3})] == ["trip"]
    assert {h.key for h in store.search(("ada",), filter={"n": {"$gte": 2}})} == {"cake", "trip"}

    listed = store.search(("ada", "semantic"))
    assert [h.key for h in listed] == ["cake", "tea"]  # newest first
    assert [h.key for h in store.search(("ada", "semantic"), limit=1, offset=1)] == ["tea"]


def test_delete_forgets_the_item_everywhere(store: MnemeStore, live_server: RunningServer) -> None:
    store.put(("ada", "semantic"), "k", {"text": "Ada's locker code is private."})
    store.delete(("ada", "semantic"), "k")
    assert store.get(("ada", "semantic"), "k") is None
    assert store.search(("ada",), query="locker") == []
    assert rest_texts(live_server, store.token) == []
    store.delete(("ada", "semantic"), "k")  # deleting what is gone is not an error


def test_list_namespaces_by_prefix_suffix_and_depth(store: MnemeStore) -> None:
    store.put(("ada", "semantic", "food"), "a", {"text": "Likes figs."})
    store.put(("ada", "semantic", "work"), "b", {"text": "Works nights."})
    store.put(("ada", "procedural"), "c", {"text": "Answer tersely."})
    assert store.list_namespaces(prefix=("ada",)) == [
        ("ada", "procedural"),
        ("ada", "semantic", "food"),
        ("ada", "semantic", "work"),
    ]
    assert store.list_namespaces(prefix=("ada", "semantic")) == [
        ("ada", "semantic", "food"),
        ("ada", "semantic", "work"),
    ]
    assert store.list_namespaces(prefix=("ada",), suffix=("work",)) == [("ada", "semantic", "work")]
    assert store.list_namespaces(prefix=("ada",), max_depth=2) == [
        ("ada", "procedural"),
        ("ada", "semantic"),
    ]
    with pytest.raises(InvalidNamespaceError):
        store.list_namespaces()


def test_batch_runs_mixed_operations_in_order(store: MnemeStore) -> None:
    results = store.batch(
        [
            PutOp(("ada", "semantic"), "x", {"text": "Ada speaks Welsh."}),
            GetOp(("ada", "semantic"), "x"),
            SearchOp(("ada",), query="Welsh"),
            PutOp(("ada", "semantic"), "x", None),
            GetOp(("ada", "semantic"), "x"),
        ]
    )
    got, found = results[1], results[2]
    assert results[0] is None
    assert isinstance(got, Item) and got.value == {"text": "Ada speaks Welsh."}
    assert isinstance(found, list) and [getattr(item, "key", None) for item in found] == ["x"]
    assert results[3] is None and results[4] is None


async def test_the_async_api_sees_what_the_sync_api_wrote(store: MnemeStore) -> None:
    store.put(("ada", "semantic"), "s", {"text": "Ada plays the oboe."})
    item = await store.aget(("ada", "semantic"), "s")
    assert item is not None and item.value["text"] == "Ada plays the oboe."
    await store.aput(("ada", "semantic"), "s", {"text": "Ada plays the bassoon."})
    hits = await store.asearch(("ada",), query="bassoon")
    assert [h.key for h in hits] == ["s"]
    [put_result, got] = await store.abatch(
        [PutOp(("ada", "episodic"), "e", {"text": "Ada moved."}), GetOp(("ada", "episodic"), "e")]
    )
    assert put_result is None and isinstance(got, Item) and got.key == "e"
    await store.adelete(("ada", "semantic"), "s")
    assert await store.aget(("ada", "semantic"), "s") is None
    await store.aclose()


def test_one_store_serves_one_event_loop_after_another(
    store: MnemeStore, live_server: RunningServer
) -> None:
    store.put(("ada", "semantic"), "tea", {"text": "Ada drinks green tea."})

    async def search() -> list[str]:
        return [item.key for item in await store.asearch(("ada",), query="green tea")]

    async def refused() -> None:
        await store.aput(("ada", "semantic"), "k", {"text": "My SSN is 123-45-6789."})

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        # Each `asyncio.run` is a new event loop, which the first one's client cannot serve.
        first = asyncio.run(search())
        second = asyncio.run(search())
        with pytest.raises(MnemeStoreError) as refusal:
            asyncio.run(refused())
        gc.collect()

    assert first == second == ["tea"]
    assert refusal.value.code == "SECRET_REFUSED"
    # Each loop's client was closed with its loop, not left to the garbage collector.
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
    item = store.get(("ada", "semantic"), "tea")
    assert item is not None and item.value == {"text": "Ada drinks green tea."}
    assert rest_texts(live_server, store.token) == ['{"text": "Ada drinks green tea."}']


def test_access_follows_the_token(
    store: MnemeStore, live_server: RunningServer, settings: Settings, tenant: str
) -> None:
    store.put(("ada", "semantic"), "k", {"text": "Ada's private note."})
    bob = MnemeStore(live_server.base_url, token(settings, tenant, "bob"))
    # Another user's item reads as missing (the service answers 404 either way: no leak).
    assert bob.get(("ada", "semantic"), "k") is None
    with pytest.raises(MnemeStoreError) as refused:
        bob.put(("ada", "semantic"), "k", {"text": "overwritten"})
    assert refused.value.status == 404 and refused.value.code == "NOT_FOUND"
    with pytest.raises(MnemeStoreError):
        bob.search(("ada",), query="note")
    # A service key may act for any user of its tenant, never another tenant's.
    service = MnemeStore(live_server.base_url, token(settings, tenant, "backend", service=True))
    item = service.get(("ada", "semantic"), "k")
    assert item is not None and item.value == {"text": "Ada's private note."}
    other_tenant = "t-" + uuid.uuid4().hex[:12]
    stranger = MnemeStore(live_server.base_url, token(settings, other_tenant, "x", service=True))
    assert stranger.get(("ada", "semantic"), "k") is None


def test_invalid_namespaces_and_refused_values_write_nothing(
    store: MnemeStore, live_server: RunningServer
) -> None:
    for namespace in [("ada",), ("ada", "dreams"), ("ada", "semantic", "Bad Label!")]:
        with pytest.raises(InvalidNamespaceError):
            store.put(namespace, "k", {"text": "x"})
    with pytest.raises(MnemeStoreError) as refused:
        store.put(("ada", "semantic"), "k", {"text": "My SSN is 123-45-6789."})
    assert refused.value.code == "SECRET_REFUSED"
    assert rest_texts(live_server, store.token) == []


class Chat(TypedDict):
    message: str
    reply: str


def build_graph(store: MnemeStore) -> Any:
    """A one-node agent: recall what is known about the user, remember what it is told."""

    def respond(state: Chat, runtime: Runtime[None]) -> dict[str, str]:
        assert runtime.store is not None
        namespace = ("ada", "semantic", "facts")
        known = runtime.store.search(namespace, query=state["message"], limit=3)
        if state["message"].startswith("remember:"):
            fact = state["message"].removeprefix("remember:").strip()
            runtime.store.put(namespace, "fact-" + str(len(fact)), {"text": fact})
            return {"reply": "noted"}
        return {"reply": "; ".join(item.value["text"] for item in known) or "nothing"}

    builder = StateGraph(Chat)
    builder.add_node("respond", respond)
    builder.add_edge(START, "respond")
    return builder.compile(store=store)


def test_a_graph_remembers_across_runs(
    live_server: RunningServer, settings: Settings, tenant: str
) -> None:
    bearer_token = token(settings, tenant, "ada")
    first = build_graph(MnemeStore(live_server.base_url, bearer_token))
    assert first.invoke({"message": "remember: Ada's favourite colour is teal."})["reply"] == (
        "noted"
    )
    # A new process would build a new store and graph: only Mneme connects the two runs.
    second = build_graph(MnemeStore(live_server.base_url, bearer_token))
    reply = second.invoke({"message": "What is Ada's favourite colour?"})["reply"]
    assert "teal" in reply


def rest_memory(server: RunningServer, bearer_token: str, key: str) -> dict[str, Any]:
    response = httpx.get(
        f"{server.base_url}/v1/users/me/memories",
        headers={"Authorization": f"Bearer {bearer_token}"},
    )
    assert response.status_code == 200, response.text
    (memory,) = [m for m in response.json()["items"] if m["store_key"] == key]
    return dict(memory)


def expiry(memory: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(memory["expires_at"])


def test_a_ttl_is_the_memory_expiry_and_a_read_with_refresh_moves_it(
    store: MnemeStore, live_server: RunningServer
) -> None:
    namespace = ("ada", "episodic")
    before = datetime.now(UTC)
    store.put(namespace, "visit", {"text": "Ada visits the dentist on Friday."}, ttl=5)
    first = expiry(rest_memory(live_server, store.token, "visit"))
    assert before + timedelta(minutes=5) <= first <= datetime.now(UTC) + timedelta(minutes=5)

    time.sleep(0.05)
    assert store.get(namespace, "visit", refresh_ttl=False) is not None
    assert expiry(rest_memory(live_server, store.token, "visit")) == first
    assert store.get(namespace, "visit", refresh_ttl=True) is not None
    refreshed = expiry(rest_memory(live_server, store.token, "visit"))
    assert refreshed > first

    time.sleep(0.05)
    assert [h.key for h in store.search(namespace, query="dentist", refresh_ttl=True)] == ["visit"]
    assert expiry(rest_memory(live_server, store.token, "visit")) > refreshed

    # A put without a TTL (and no default) keeps the memory for good.
    store.put(namespace, "visit", {"text": "Ada visits the dentist on Friday."})
    assert rest_memory(live_server, store.token, "visit")["expires_at"] is None


def test_an_item_past_its_ttl_is_gone_from_every_read(store: MnemeStore) -> None:
    namespace = ("ada", "semantic")
    store.put(namespace, "mood", {"text": "Ada is tired today."}, ttl=0.01)
    assert store.get(namespace, "mood") is not None
    time.sleep(1.0)
    assert store.get(namespace, "mood") is None
    assert store.search(namespace, query="tired") == []
    assert store.search(namespace) == []


def test_the_default_ttl_applies_to_puts_that_name_none(
    live_server: RunningServer, settings: Settings, tenant: str
) -> None:
    bearer_token = token(settings, tenant, "ada")
    with MnemeStore(live_server.base_url, bearer_token, ttl_config={"default_ttl": 60}) as store:
        store.put(("ada", "semantic"), "city", {"text": "Ada lives in Lisbon."})
    remaining = expiry(rest_memory(live_server, bearer_token, "city")) - datetime.now(UTC)
    assert timedelta(minutes=59) < remaining <= timedelta(minutes=60)


class Refusing(httpx.BaseTransport):
    """Answers the first `refusals` requests with `status` (and `Retry-After: 0`), then passes
    them to the live server."""

    def __init__(self, refusals: int, status: int) -> None:
        self.refusals = refusals
        self.status = status
        self.sent = 0
        self._inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        if self.refusals:
            self.refusals -= 1
            return httpx.Response(self.status, headers={"Retry-After": "0"})
        return self._inner.handle_request(request)


@pytest.mark.parametrize("status", [429, 503])
def test_a_refused_request_is_sent_again_after_retry_after(
    live_server: RunningServer, settings: Settings, tenant: str, status: int
) -> None:
    transport = Refusing(2, status)
    bearer_token = token(settings, tenant, "ada")
    with MnemeStore(
        live_server.base_url, bearer_token, text_fields=["text"], transport=transport
    ) as store:
        store.put(("ada", "semantic"), "tea", {"text": "Ada drinks green tea."})
    assert transport.sent == 3
    assert rest_texts(live_server, bearer_token) == ["Ada drinks green tea."]

    exhausted = Refusing(10, status)
    with (
        MnemeStore(live_server.base_url, bearer_token, transport=exhausted, retries=2) as store,
        pytest.raises(MnemeStoreError) as refused,
    ):
        store.get(("ada", "semantic"), "tea")
    assert refused.value.status == status
    assert exhausted.sent == 3


class AsyncRefusing(httpx.AsyncBaseTransport):
    """`Refusing` for the store's asynchronous API."""

    def __init__(self, refusals: int, status: int) -> None:
        self.refusals = refusals
        self.status = status
        self.sent = 0
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        if self.refusals:
            self.refusals -= 1
            return httpx.Response(self.status, headers={"Retry-After": "0"})
        return await self._inner.handle_async_request(request)


@pytest.mark.parametrize("status", [429, 503])
async def test_the_async_api_sends_a_refused_request_again_too(
    live_server: RunningServer, settings: Settings, tenant: str, status: int
) -> None:
    transport = AsyncRefusing(2, status)
    bearer_token = token(settings, tenant, "ada")
    store = MnemeStore(
        live_server.base_url, bearer_token, text_fields=["text"], async_transport=transport
    )
    await store.aput(("ada", "semantic"), "coffee", {"text": "Ada drinks no coffee."}, ttl=30)
    item = await store.aget(("ada", "semantic"), "coffee")
    await store.aclose()
    assert item is not None and item.value == {"text": "Ada drinks no coffee."}
    # Two refusals, then the put, the get and the get's TTL refresh.
    assert transport.sent == 5
    assert rest_texts(live_server, bearer_token) == ["Ada drinks no coffee."]


class Unanswering(httpx.BaseTransport):
    """Fails the first `failures` requests as a refused connection does, then passes them to
    the live server."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.sent = 0
        self._inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        if self.failures:
            self.failures -= 1
            raise httpx.ConnectError("connection refused", request=request)
        return self._inner.handle_request(request)


class AsyncUnanswering(httpx.AsyncBaseTransport):
    """`Unanswering` for the store's asynchronous API."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.sent = 0
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        if self.failures:
            self.failures -= 1
            raise httpx.ReadTimeout("no answer in time", request=request)
        return await self._inner.handle_async_request(request)


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's back-off between unanswered attempts, without the wait."""
    monkeypatch.setattr("mneme_langgraph.store.RETRY_WAIT_FIRST_SECONDS", 0.0)


@pytest.mark.usefixtures("no_backoff")
def test_a_request_that_got_no_answer_is_sent_again_then_raises_the_stores_error(
    live_server: RunningServer, settings: Settings, tenant: str
) -> None:
    transport = Unanswering(2)
    bearer_token = token(settings, tenant, "ada")
    with MnemeStore(
        live_server.base_url, bearer_token, text_fields=["text"], transport=transport
    ) as store:
        store.put(("ada", "semantic"), "jam", {"text": "Ada likes fig jam."})
    assert transport.sent == 3
    assert rest_texts(live_server, bearer_token) == ["Ada likes fig jam."]

    unreachable = Unanswering(10)
    with (
        MnemeStore(live_server.base_url, bearer_token, transport=unreachable, retries=2) as store,
        pytest.raises(MnemeStoreError) as failed,
    ):
        store.get(("ada", "semantic"), "jam")
    assert isinstance(failed.value, MnemeStoreUnreachable)
    assert (failed.value.status, failed.value.code) == (None, "SERVICE_UNREACHABLE")
    assert isinstance(failed.value.__cause__, httpx.ConnectError)
    assert unreachable.sent == 3


@pytest.mark.usefixtures("no_backoff")
async def test_the_async_api_sends_an_unanswered_request_again_too(
    live_server: RunningServer, settings: Settings, tenant: str
) -> None:
    bearer_token = token(settings, tenant, "ada")
    transport = AsyncUnanswering(1)
    store = MnemeStore(
        live_server.base_url, bearer_token, text_fields=["text"], async_transport=transport
    )
    await store.aput(("ada", "semantic"), "bread", {"text": "Ada bakes rye bread."})
    await store.aclose()
    assert transport.sent == 2
    assert rest_texts(live_server, bearer_token) == ["Ada bakes rye bread."]

    unreachable = AsyncUnanswering(10)
    store = MnemeStore(live_server.base_url, bearer_token, async_transport=unreachable, retries=1)
    with pytest.raises(MnemeStoreUnreachable) as failed:
        await store.aget(("ada", "semantic"), "bread")
    await store.aclose()
    assert isinstance(failed.value.__cause__, httpx.ReadTimeout)
    assert unreachable.sent == 2
