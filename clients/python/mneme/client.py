"""`Mneme`: the generated client behind a few typed calls an agent makes every turn."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx
from mneme_client import AuthenticatedClient
from mneme_client.api.context import append_turn, build_context
from mneme_client.api.memories import create_memory, list_memories, search_memories
from mneme_client.api.threads import create_thread, list_messages, list_threads
from mneme_client.models import (
    ContextResponse,
    MemoryRead,
    MemoryWritten,
    MessageRead,
    SearchResponse,
    ThreadRead,
    TurnAppended,
)
from mneme_client.models.problem import Problem
from mneme_client.types import Response

from mneme.calls import coerce_body, pages, unwrap, verbatim
from mneme.errors import error_from_response
from mneme.retry import AsyncRetryingTransport, RetryingTransport, RetryPolicy
from mneme.version import __version__

T = TypeVar("T")

# `list_memories`' filters whose values are enums: given as plain strings too, and sent as
# given, so that a value the API does not know is its 422, not a ValueError here.
_ENUM_FILTERS = ("scope", "kind", "lifecycle")

DEFAULT_TIMEOUT_SECONDS = 30.0


def connect(
    base_url: str,
    token: str,
    *,
    retry: RetryPolicy | None = None,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
) -> AuthenticatedClient:
    """A generated `AuthenticatedClient` whose HTTP sessions (sync and async) retry what is safe
    to retry and raise a failed answer as a `MnemeError`; use it with any generated operation
    and `unwrap` its detailed response."""
    headers = {"Authorization": f"Bearer {token}", "User-Agent": f"mneme-python/{__version__}"}
    client = AuthenticatedClient(base_url=base_url, token=token)
    client.set_httpx_client(
        httpx.Client(
            base_url=base_url,
            headers=headers,
            timeout=timeout,
            transport=RetryingTransport(retry),
            event_hooks={"response": [_raise_failure]},
        )
    )
    client.set_async_httpx_client(
        httpx.AsyncClient(
            base_url=base_url,
            headers=headers,
            timeout=timeout,
            transport=AsyncRetryingTransport(retry),
            event_hooks={"response": [_araise_failure]},
        )
    )
    return client


# A failed answer is raised from the raw response, before the generated code parses it: that
# code reads a problem into its `Problem` model, which fails on what it was not generated for (a
# code added to the API after this client, a gateway's HTML error page) with a ValueError or a
# JSONDecodeError instead of the error the caller handles.
def _raise_failure(response: httpx.Response) -> None:
    if response.status_code >= 400:
        response.read()
        raise error_from_response(response.status_code, response.headers, response.content)


async def _araise_failure(response: httpx.Response) -> None:
    if response.status_code >= 400:
        await response.aread()
        raise error_from_response(response.status_code, response.headers, response.content)


def _fields(**values: Any) -> dict[str, Any]:
    """The keyword arguments that were given (not None)."""
    return {name: value for name, value in values.items() if value is not None}


class Mneme:
    """Asynchronous Mneme client for one user (`me`, the token's own, by default).

    Every call raises a `MnemeError` subclass on a problem answer, retries what is safe to retry
    (creations carry a fresh `Idempotency-Key`, so they are safe too), and takes plain dicts
    wherever the API takes JSON objects. The creating calls (`remember`, `thread`, `turn`) take
    an `idempotency_key` of the caller's: an application that sends one again after the layer
    gave up (with the key it was first sent with) writes it once.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        user_id: str = "me",
        retry: RetryPolicy | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        client: AuthenticatedClient | None = None,
    ) -> None:
        self.client = client or connect(base_url, token, retry=retry, timeout=timeout)
        self.user_id = user_id
        self._base_url = base_url
        self._token = token

    def as_user(self, user_id: str) -> Mneme:
        """The same connection, acting on another user of the tenant (service principals)."""
        return Mneme(self._base_url, self._token, user_id=user_id, client=self.client)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.client.get_async_httpx_client().aclose()

    async def call(
        self, operation: Callable[..., Awaitable[Response[T | Problem]]], *args: Any, **kwargs: Any
    ) -> T:
        """Any generated `asyncio_detailed` operation, with this client, a dict `body` accepted
        and a problem raised: `await mneme.call(get_memory.asyncio_detailed, "me", memory_id)`."""
        return unwrap(await operation(*args, client=self.client, **coerce_body(operation, kwargs)))

    async def remember(
        self,
        text: str,
        *,
        kind: str | None = None,
        category: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> MemoryWritten:
        """Store one memory (`kind`: semantic, episodic or procedural; any other `MemoryCreate`
        field as a keyword, e.g. `event_at`, `expires_at`, `confidence`, `speaker`)."""
        body = _fields(text=text, kind=kind, category=category, metadata=metadata, **fields)
        return await self.call(
            create_memory.asyncio_detailed,
            self.user_id,
            body=body,
            idempotency_key=idempotency_key or str(uuid.uuid4()),
        )

    async def search(
        self, query: str, *, limit: int | None = None, **fields: Any
    ) -> SearchResponse:
        """Search the user's memories (any other `SearchRequest` field as a keyword)."""
        body = _fields(query=query, limit=limit, **fields)
        return await self.call(search_memories.asyncio_detailed, self.user_id, body=body)

    async def context(
        self,
        query: str,
        *,
        thread_id: uuid.UUID | str | None = None,
        budget_tokens: int | None = None,
        **fields: Any,
    ) -> ContextResponse:
        """The memory block for the next model call (`.text` goes into the prompt)."""
        body = _fields(query=query, thread_id=thread_id, budget_tokens=budget_tokens, **fields)
        return await self.call(build_context.asyncio_detailed, self.user_id, body=body)

    async def thread(
        self,
        title: str | None = None,
        *,
        metadata: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> ThreadRead:
        """Start a conversation thread."""
        return await self.call(
            create_thread.asyncio_detailed,
            self.user_id,
            body=_fields(title=title, metadata=metadata),
            idempotency_key=idempotency_key or str(uuid.uuid4()),
        )

    async def turn(
        self,
        thread_id: uuid.UUID | str,
        user: str | None = None,
        *,
        assistant: str | None = None,
        messages: Sequence[Mapping[str, Any]] = (),
        budget_tokens: int | None = None,
        idempotency_key: str | None = None,
        **context: Any,
    ) -> TurnAppended:
        """Record a turn and get the context for answering it, in one round trip: the assistant's
        previous reply (if any), then the user's new message (then any further `messages`); the
        answer's `context` is built for that user message (any `TurnContextOptions` field as a
        keyword). Sent again with the same `idempotency_key`, a turn is appended once: the
        service replays its first answer."""
        sent: list[Mapping[str, Any]] = []
        if assistant is not None:
            sent.append({"role": "assistant", "content": assistant})
        if user is not None:
            sent.append({"role": "user", "content": user})
        sent.extend(messages)
        body = {"messages": sent, "context": _fields(budget_tokens=budget_tokens, **context)}
        return await self.call(
            append_turn.asyncio_detailed,
            self.user_id,
            thread_id,
            body=body,
            idempotency_key=idempotency_key or str(uuid.uuid4()),
        )

    async def memories(self, *, page_size: int = 50, **filters: Any) -> AsyncIterator[MemoryRead]:
        """Every memory of the user matching `filters` (`list_memories`' query parameters, e.g.
        `kind=["episodic"]`, `category=["travel"]`, `created_after=...`), page after page."""
        for name in _ENUM_FILTERS:
            if filters.get(name) is not None:
                filters[name] = [verbatim(value) for value in filters[name]]
        async for page in pages(
            list_memories.asyncio_detailed,
            self.user_id,
            client=self.client,
            limit=page_size,
            **filters,
        ):
            for memory in page.items:
                yield memory

    async def threads(self, *, page_size: int = 50) -> AsyncIterator[ThreadRead]:
        """Every thread of the user, page after page."""
        async for page in pages(
            list_threads.asyncio_detailed, self.user_id, client=self.client, limit=page_size
        ):
            for thread in page.items:
                yield thread

    async def messages(
        self, thread_id: uuid.UUID | str, *, page_size: int = 50
    ) -> AsyncIterator[MessageRead]:
        """Every message of a thread, oldest first, page after page."""
        async for page in pages(
            list_messages.asyncio_detailed,
            self.user_id,
            thread_id,
            client=self.client,
            limit=page_size,
        ):
            for message in page.items:
                yield message
