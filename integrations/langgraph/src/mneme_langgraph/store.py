"""`MnemeStore`: LangGraph's `BaseStore` over Mneme's HTTP API.

Namespaces map onto Mneme's own structure, so what a graph stores is ordinary memory to
Mneme's search, context block and Memory page, and what Mneme extracted is visible here:

    (user_id, kind)             e.g. ("alice", "semantic")
    (user_id, kind, category)   e.g. ("alice", "semantic", "preferences")

`user_id` is a user of the credential's tenant (`me` is the caller), addressed exactly as on
`/v1/users/{user_id}`: an end-user token reaches only itself, a service key any user of its
tenant. `kind` is `semantic`, `episodic` or `procedural`; `category` is a lowercase label.

An item is one memory. Its key is stored with it (unique per user, kind and category), so a
`put` with the same key updates that memory; its value is kept in the memory's metadata and
its text (what search ranks) comes from `text_fields` of the value, or the whole value as
JSON. Search with a `query` is Mneme's hybrid search (full text + vectors, one fused score);
without one it lists newest first. `filter` is matched against item values here, over the
candidates the service returns (at most 100 per search). Memories Mneme wrote itself appear in
search and listings with their memory id as key.

A `ttl` (minutes, as LangGraph counts it) becomes the memory's `expires_at`: the service stops
returning it then, in every read, and its retention sweep removes it. Reading an item with
`refresh_ttl` moves its expiry forward by its TTL again (one PATCH of `expires_at`).

Each operation is one HTTP request (one transaction on the service), plus one per refreshed TTL;
`batch` runs them in order. A 429 or 503 is retried after the `Retry-After` the service sends,
and a request that got no answer (the connection refused or dropped, the timeout passed) after
a back-off: every request the store makes can be repeated safely (reads, and writes that set a
whole value). A request still unanswered after its retries raises `MnemeStoreUnreachable`, a
`MnemeStoreError`, so a caller catches one exception for everything the store could not do.
Requests are described once (`_Call`) and sent by a sync or an async client, so both paths
share every rule.

The async client's connections belong to the event loop that opened them, so each event loop
gets a client of its own (two `asyncio.run` calls in a row, a sync graph and an async one in one
process): created on the loop's first request, closed by `aclose()` on that loop or, at the
latest, when the loop shuts down (`asyncio.run` and `asyncio.Runner` finish the loop's async
generators before closing it, and the client is held by one).
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import AsyncGenerator, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)

KINDS = ("semantic", "episodic", "procedural")
CATEGORY = re.compile(r"^[a-z][a-z0-9_.-]{0,63}$")
VALUE_KEY = "langgraph_value"
"""Where an item's value is kept in the memory's metadata."""
TTL_KEY = "langgraph_ttl_minutes"
"""Where an item's TTL is kept in the memory's metadata (to refresh it on reads)."""
RETRIED_STATUSES = frozenset({429, 503})
# The service's Retry-After is honoured up to this long; without one, back off from 0.5 s.
RETRY_WAIT_MAX_SECONDS = 30.0
RETRY_WAIT_FIRST_SECONDS = 0.5
PAGE_SIZE = 100
SEARCH_MAX = 100

T = TypeVar("T")


class MnemeStoreError(RuntimeError):
    """The service refused an operation, or could not be reached; carries the problem's `code`
    and the answer's `status` (None when no answer came)."""

    def __init__(self, status: int | None, code: str, detail: str) -> None:
        super().__init__(f"{status or 'no answer'} {code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail


class MnemeStoreUnreachable(MnemeStoreError):
    """No answer came from the service, after every retry: the connection was refused or
    dropped, or the timeout passed. The transport's own error is its `__cause__`."""

    CODE = "SERVICE_UNREACHABLE"

    def __init__(self, error: httpx.TransportError) -> None:
        super().__init__(None, self.CODE, f"{type(error).__name__}: {error}")


@dataclass(frozen=True)
class _Call:
    method: str
    path: str
    params: Mapping[str, Any] | None = None
    body: Any = None


_Plan = Generator[_Call, httpx.Response, T]
"""An operation as the requests it makes: yields calls, receives their responses."""


@dataclass(frozen=True)
class _LoopClient:
    """The async client of one event loop, and the async generator that closes it when the
    loop shuts down (`_closed_with_loop`)."""

    client: httpx.AsyncClient
    keeper: AsyncGenerator[None, None]


async def _closed_with_loop(client: httpx.AsyncClient) -> AsyncGenerator[None, None]:
    """Holds `client` open from its first step until it is closed: by `MnemeStore.aclose`, or
    by the loop's own shutdown (`loop.shutdown_asyncgens()`, which `asyncio.run` awaits before
    it closes the loop), so the client's connections are closed while their loop still runs."""
    try:
        yield
    finally:
        await client.aclose()


@dataclass(frozen=True)
class _Address:
    user: str
    kind: str
    category: str | None

    @classmethod
    def of(cls, namespace: tuple[str, ...]) -> _Address:
        if len(namespace) not in (2, 3):
            raise InvalidNamespaceError(
                f"Mneme namespaces are (user_id, kind) or (user_id, kind, category); "
                f"got {namespace!r}."
            )
        return cls.prefix(namespace)

    @classmethod
    def prefix(cls, namespace: tuple[str, ...]) -> _Address:
        """A namespace prefix: the user, then optionally kind and category."""
        if not namespace or len(namespace) > 3:
            raise InvalidNamespaceError(
                f"A Mneme namespace prefix names the user, then optionally kind and category; "
                f"got {namespace!r}."
            )
        kind = namespace[1] if len(namespace) > 1 else ""
        if len(namespace) > 1 and kind not in KINDS:
            raise InvalidNamespaceError(f"kind must be one of {KINDS}; got {kind!r}.")
        category = namespace[2] if len(namespace) > 2 else None
        if category is not None and not CATEGORY.match(category):
            raise InvalidNamespaceError(
                f"category must match {CATEGORY.pattern}; got {category!r}."
            )
        return cls(namespace[0], kind, category)

    @property
    def base(self) -> str:
        return f"/v1/users/{quote(self.user, safe='')}"

    def key_params(self, key: str) -> dict[str, str]:
        params = {"kind": self.kind, "key": key}
        if self.category is not None:
            params["category"] = self.category
        return params

    def filters(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        if self.kind:
            found["kind"] = [self.kind]
        if self.category is not None:
            found["category"] = [self.category]
        return found


@dataclass
class MnemeStore(BaseStore):
    """A LangGraph store whose items are Mneme memories.

    Args:
        base_url: The service, e.g. `http://localhost:8000`.
        token: A JWT or a Mneme API key (sent as `Authorization: Bearer …`).
        text_fields: Value fields whose text is searched (joined with newlines); by default,
            or when none is present, the whole value as JSON.
        timeout: Seconds per request.
        ttl_config: LangGraph's TTL settings: `default_ttl` (minutes) for puts that name none,
            `refresh_on_read` for reads that do not say.
        retries: How often a request answered 429 or 503, or not answered at all, is sent
            again.
        transport / async_transport: httpx transports (tests, proxies). The async one is
            shared by the clients of every event loop the store is used from, and each of
            them closes it when it closes.
    """

    supports_ttl = True

    base_url: str
    token: str
    text_fields: Sequence[str] | None = None
    timeout: float = 30.0
    ttl_config: TTLConfig | None = None
    retries: int = 3
    transport: httpx.BaseTransport | None = None
    async_transport: httpx.AsyncBaseTransport | None = None
    _client: httpx.Client | None = field(default=None, init=False, repr=False)
    # One async client per event loop; those of closed loops are dropped as the next loop's
    # client is opened (a weak mapping would not drop them: the loop's shutdown hook, which
    # each client's keeper holds, refers back to the loop).
    _aclients: dict[asyncio.AbstractEventLoop, _LoopClient] = field(
        default_factory=dict, init=False, repr=False
    )
    _aclients_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    # --- BaseStore --------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._send(self._plan(op)) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return [await self._asend(self._plan(op)) for op in ops]

    def close(self) -> None:
        """Close the sync client (a later call opens another)."""
        client, self._client = self._client, None
        if client is not None:
            client.close()

    def __enter__(self) -> MnemeStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def aclose(self) -> None:
        """Close the running event loop's async client (a later call opens another). The
        clients of other loops close when those loops shut down."""
        with self._aclients_lock:
            held = self._aclients.pop(asyncio.get_running_loop(), None)
        if held is not None:
            await held.keeper.aclose()

    # --- operations as requests ---------------------------------------------------------------

    def _plan(self, op: Op) -> _Plan[Result]:
        validate_op_namespace(op)
        if isinstance(op, GetOp):
            return self._get(op)
        if isinstance(op, PutOp):
            return self._put(op)
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise TypeError(f"Unknown store operation {op!r}")

    def _get(self, op: GetOp) -> _Plan[Item | None]:
        address = _Address.of(op.namespace)
        response = yield _Call("GET", f"{address.base}/keyed-memories", address.key_params(op.key))
        if response.status_code == 404:
            return None
        memory = _checked(response)
        if op.refresh_ttl:
            yield from self._refresh(address, memory)
        return self._item(memory, op.namespace[0])

    def _refresh(self, address: _Address, memory: dict[str, Any]) -> _Plan[None]:
        """Move the memory's expiry forward by its TTL (nothing for a memory without one)."""
        ttl = (memory.get("metadata") or {}).get(TTL_KEY)
        if not isinstance(ttl, int | float) or isinstance(ttl, bool):
            return None
        body = {"expires_at": _expiry(float(ttl))}
        response = yield _Call("PATCH", f"{address.base}/memories/{memory['id']}", None, body)
        # Deleted meanwhile: there is nothing left to keep alive.
        if response.status_code != 404:
            _checked(response)
        return None

    def _put(self, op: PutOp) -> _Plan[None]:
        address = _Address.of(op.namespace)
        path = f"{address.base}/keyed-memories"
        params = address.key_params(op.key)
        if op.value is None:
            response = yield _Call("DELETE", path, params)
            if response.status_code != 404:
                _checked(response)
            return None
        value = dict(op.value)
        metadata: dict[str, Any] = {VALUE_KEY: value}
        body: dict[str, Any] = {"text": self._text(value), "metadata": metadata}
        if op.ttl is not None:
            metadata[TTL_KEY] = op.ttl
            body["expires_at"] = _expiry(op.ttl)
        _checked((yield _Call("PUT", path, params, body)))
        return None

    def _search(self, op: SearchOp) -> _Plan[list[SearchItem]]:
        address = _Address.prefix(op.namespace_prefix)
        wanted = op.offset + op.limit
        found: list[SearchItem] = []
        if op.query:
            body: dict[str, Any] = {
                "query": op.query,
                "scopes": ["user"],
                # With a filter, fetch the most the service gives and filter those.
                "limit": SEARCH_MAX if op.filter else min(wanted, SEARCH_MAX),
            }
            if address.kind:
                body["kinds"] = [address.kind]
            if address.category is not None:
                body["categories"] = [address.category]
            response = yield _Call("POST", f"{address.base}/memories/search", None, body)
            returned: list[tuple[dict[str, Any], SearchItem]] = []
            for hit in _checked(response)["hits"]:
                item = self._item(hit["memory"], address.user, hit["scores"]["final_score"])
                if _matches(item.value, op.filter):
                    returned.append((hit["memory"], item))
            returned = returned[op.offset : wanted]
            if op.refresh_ttl:
                for memory, _ in returned:
                    yield from self._refresh(address, memory)
            return [item for _, item in returned]
        listed: list[tuple[dict[str, Any], SearchItem]] = []
        cursor: str | None = None
        while len(listed) < wanted:
            params: dict[str, Any] = {**address.filters(), "limit": PAGE_SIZE}
            if cursor:
                params["cursor"] = cursor
            page = _checked((yield _Call("GET", f"{address.base}/memories", params)))
            for memory in page["items"]:
                item = self._item(memory, address.user)
                if _matches(item.value, op.filter):
                    listed.append((memory, item))
            cursor = page.get("next_cursor")
            if not cursor:
                break
        listed = listed[op.offset : wanted]
        if op.refresh_ttl:
            for memory, _ in listed:
                yield from self._refresh(address, memory)
        found.extend(item for _, item in listed)
        return found

    def _list_namespaces(self, op: ListNamespacesOp) -> _Plan[list[tuple[str, ...]]]:
        user = _user_of(op)
        namespaces: set[tuple[str, ...]] = set()
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {"limit": PAGE_SIZE}
            if cursor:
                params["cursor"] = cursor
            call = _Call("GET", f"{_Address(user, '', None).base}/memories", params)
            page = _checked((yield call))
            namespaces.update(_namespace(memory, user) for memory in page["items"])
            cursor = page.get("next_cursor")
            if not cursor:
                break
        matching = [
            ns[: op.max_depth] if op.max_depth is not None else ns
            for ns in namespaces
            if all(_namespace_matches(c.match_type, c.path, ns) for c in op.match_conditions or ())
        ]
        return sorted(set(matching))[op.offset : op.offset + op.limit]

    # --- values and items -------------------------------------------------------------------

    def _text(self, value: dict[str, Any]) -> str:
        parts = [
            value[name] if isinstance(value[name], str) else json.dumps(value[name])
            for name in self.text_fields or ()
            if value.get(name) is not None
        ]
        return "\n".join(parts) if parts else json.dumps(value, ensure_ascii=False, sort_keys=True)

    def _item(
        self, memory: dict[str, Any], user_label: str, score: float | None = None
    ) -> SearchItem:
        stored = memory.get("metadata", {}).get(VALUE_KEY)
        value = stored if isinstance(stored, dict) else {"text": memory["text"]}
        return SearchItem(
            namespace=_namespace(memory, user_label),
            key=memory.get("store_key") or memory["id"],
            value=value,
            created_at=datetime.fromisoformat(memory["created_at"]),
            updated_at=datetime.fromisoformat(memory["updated_at"]),
            score=score,
        )

    # --- sending ----------------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}

    def _send(self, plan: _Plan[T]) -> T:
        if self._client is None:
            self._client = httpx.Client(
                base_url=self.base_url,
                headers=self._headers(),
                timeout=self.timeout,
                transport=self.transport,
            )
        client = self._client
        try:
            call = next(plan)
            while True:
                for attempt in range(self.retries + 1):
                    try:
                        response = client.request(
                            call.method, call.path, params=call.params, json=call.body
                        )
                    except httpx.TransportError as error:
                        time.sleep(self._unanswered_wait(error, attempt))
                        continue
                    if response.status_code not in RETRIED_STATUSES or attempt == self.retries:
                        break
                    time.sleep(_retry_wait(response, attempt))
                call = plan.send(response)
        except StopIteration as done:
            result: T = done.value
            return result

    def _unanswered_wait(self, error: httpx.TransportError, attempt: int) -> float:
        """Seconds to wait before sending again a request that got no answer, or
        `MnemeStoreUnreachable` when it was the last attempt."""
        if attempt == self.retries:
            raise MnemeStoreUnreachable(error) from error
        return _backoff(attempt)

    async def _async_client(self) -> httpx.AsyncClient:
        """The running event loop's client, opened on the loop's first request."""
        loop = asyncio.get_running_loop()
        with self._aclients_lock:
            held = self._aclients.get(loop)
            if held is not None:
                return held.client
            for closed in [other for other in self._aclients if other.is_closed()]:
                del self._aclients[closed]
            client = httpx.AsyncClient(
                base_url=self.base_url,
                headers=self._headers(),
                timeout=self.timeout,
                transport=self.async_transport,
            )
            held = self._aclients[loop] = _LoopClient(client, _closed_with_loop(client))
        # Its first step runs on the loop, which from then on closes it at shutdown.
        await anext(held.keeper)
        return client

    async def _asend(self, plan: _Plan[T]) -> T:
        client = await self._async_client()
        try:
            call = next(plan)
            while True:
                for attempt in range(self.retries + 1):
                    try:
                        response = await client.request(
                            call.method, call.path, params=call.params, json=call.body
                        )
                    except httpx.TransportError as error:
                        await asyncio.sleep(self._unanswered_wait(error, attempt))
                        continue
                    if response.status_code not in RETRIED_STATUSES or attempt == self.retries:
                        break
                    await asyncio.sleep(_retry_wait(response, attempt))
                call = plan.send(response)
        except StopIteration as done:
            result: T = done.value
            return result


def _expiry(ttl_minutes: float) -> str:
    """The time `ttl_minutes` from now, as the API takes it."""
    return (datetime.now(UTC) + timedelta(minutes=ttl_minutes)).isoformat()


def _retry_wait(response: httpx.Response, attempt: int) -> float:
    """Seconds to wait before sending a refused request again: the service's `Retry-After`
    (seconds), else an exponential back-off."""
    header = response.headers.get("retry-after", "")
    try:
        wait = float(header)
    except ValueError:
        return _backoff(attempt)
    return min(max(wait, 0.0), RETRY_WAIT_MAX_SECONDS)


def _backoff(attempt: int) -> float:
    """Seconds to wait before the next attempt when the service named no wait."""
    return min(RETRY_WAIT_FIRST_SECONDS * 2.0**attempt, RETRY_WAIT_MAX_SECONDS)


def _checked(response: httpx.Response) -> Any:
    """The JSON body of a success; a problem response raises `MnemeStoreError`."""
    if response.is_success:
        return response.json() if response.content else None
    try:
        problem = response.json()
    except ValueError:
        problem = {}
    raise MnemeStoreError(
        response.status_code,
        str(problem.get("code", f"HTTP_{response.status_code}")),
        str(problem.get("detail", response.reason_phrase)),
    )


def _namespace(memory: dict[str, Any], user_label: str) -> tuple[str, ...]:
    category = memory.get("category")
    return (user_label, memory["kind"], category) if category else (user_label, memory["kind"])


def _user_of(op: ListNamespacesOp) -> str:
    for condition in op.match_conditions or ():
        if condition.match_type == "prefix" and condition.path and condition.path[0] != "*":
            return condition.path[0]
    raise InvalidNamespaceError(
        "Mneme lists the namespaces of one user at a time: pass prefix=(user_id,) "
        "(`me` for the token's own user)."
    )


def _namespace_matches(match_type: str, path: tuple[str, ...], namespace: tuple[str, ...]) -> bool:
    if len(namespace) < len(path):
        return False
    if match_type == "suffix":
        namespace, path = namespace[-len(path) :] if path else (), path
    pairs = zip(namespace, path, strict=False)
    return all(wanted in ("*", label) for label, wanted in pairs)


def _matches(value: Any, wanted: Any) -> bool:
    """LangGraph's filter semantics: nested equality, `$eq/$ne/$gt/$gte/$lt/$lte` operators."""
    if wanted is None:
        return True
    if isinstance(wanted, dict):
        if any(key.startswith("$") for key in wanted):
            return all(_compare(value, op, operand) for op, operand in wanted.items())
        return isinstance(value, dict) and all(
            _matches(value.get(key), expected) for key, expected in wanted.items()
        )
    return bool(value == wanted)


def _compare(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(value == operand)
    if operator == "$ne":
        return bool(value != operand)
    if value is None:
        return False
    ordered = {
        "$gt": float(value) > float(operand),
        "$gte": float(value) >= float(operand),
        "$lt": float(value) < float(operand),
        "$lte": float(value) <= float(operand),
    }
    if operator not in ordered:
        raise ValueError(f"Unsupported filter operator {operator!r}")
    return ordered[operator]
