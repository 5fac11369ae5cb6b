"""The `mneme` layer over the generated Python client, against a live server: the agent's three
calls, dict bodies, problems raised as typed exceptions, pages followed, and a creation retried
after a lost answer stored once."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import httpx
import pytest
from mneme import Mneme, NotFound, RetryPolicy, ValidationFailed, connect, unwrap
from mneme.retry import AsyncRetryingTransport
from mneme_client import AuthenticatedClient
from mneme_client.api.memories import delete_memory, get_memory, update_memory
from mneme_client.api.profile import patch_profile

from tests.clients.conftest import LiveServer


def _mneme(live_server: LiveServer, live_user: tuple[str, str]) -> Mneme:
    tenant_id, user_id = live_user
    return Mneme(live_server.base_url, live_server.token_for(tenant_id, user_id))


async def test_the_three_line_agent_loop_remembers_and_returns_context(
    live_server: LiveServer, live_user: tuple[str, str]
) -> None:
    async with _mneme(live_server, live_user) as mneme:
        written = await mneme.remember(
            "Prefers window seats on long flights.",
            category="preference",
            metadata={"source": "onboarding", "tags": ["travel"]},
        )
        block = await mneme.context("Which seat should I book?")
        thread = await mneme.thread("Trip planning")
        turn = await mneme.turn(
            thread.id, user="Book me a seat to Lisbon.", assistant="Hello! Where to?"
        )

        assert "window seats" in (block.text or "")
        assert "window seats" in (turn.context.text or "")
        # The assistant's previous reply goes first, then the user's new message.
        assert [(item.role.value, item.content) for item in turn.items] == [
            ("assistant", "Hello! Where to?"),
            ("user", "Book me a seat to Lisbon."),
        ]
        stored = await mneme.call(get_memory.asyncio_detailed, "me", written.id)
        assert stored.metadata.to_dict() == {"source": "onboarding", "tags": ["travel"]}


async def test_a_dict_body_is_accepted_by_any_generated_operation(
    live_server: LiveServer, live_user: tuple[str, str]
) -> None:
    async with _mneme(live_server, live_user) as mneme:
        written = await mneme.remember("Works at Acme as a data engineer.")
        updated = await mneme.call(
            update_memory.asyncio_detailed,
            "me",
            written.id,
            body={"text": "Works at Acme as a staff engineer.", "metadata": {"team": "data"}},
        )
        assert updated.text == "Works at Acme as a staff engineer."
        assert updated.metadata.to_dict() == {"team": "data"}


async def test_a_json_patch_list_body_is_accepted_through_call(
    live_server: LiveServer, live_user: tuple[str, str]
) -> None:
    async with _mneme(live_server, live_user) as mneme:
        patched = await mneme.call(
            patch_profile.asyncio_detailed,
            "me",
            body=[
                {"op": "add", "path": "/city", "value": "Lisbon"},
                {"op": "add", "path": "/employer", "value": "Acme"},
            ],
        )
        assert (patched.changed, patched.after.to_dict()) == (
            True,
            {"city": "Lisbon", "employer": "Acme"},
        )


async def test_input_the_api_refuses_is_its_validation_failure_not_a_local_value_error(
    live_server: LiveServer, live_user: tuple[str, str]
) -> None:
    refused: list[tuple[int, str, list[str]]] = []
    async with _mneme(live_server, live_user) as mneme:
        for attempt in (
            mneme.remember("Prefers tea.", kind="bogus"),
            mneme.turn("not-a-uuid", user="Hello?"),
            mneme.call(update_memory.asyncio_detailed, "me", uuid.uuid4(), body={"text": 7}),
        ):
            with pytest.raises(ValidationFailed) as caught:
                await attempt
            error = caught.value
            refused.append(
                (error.status, error.code, [e["loc"][-1] for e in error.problem["errors"]])
            )
        with pytest.raises(ValidationFailed) as listing:
            _ = [memory async for memory in mneme.memories(kind=["bogus"])]
        with pytest.raises(ValidationFailed) as messages:
            _ = [message async for message in mneme.messages("not-a-uuid")]

    assert refused == [
        (422, "VALIDATION_FAILED", ["kind"]),
        (422, "VALIDATION_FAILED", ["thread_id"]),
        (422, "VALIDATION_FAILED", ["text"]),
    ]
    assert (listing.value.status, messages.value.status) == (422, 422)


async def test_problems_are_raised_as_typed_exceptions_with_their_code(
    live_server: LiveServer, live_user: tuple[str, str]
) -> None:
    async with _mneme(live_server, live_user) as mneme:
        with pytest.raises(ValidationFailed) as refused:
            await mneme.remember("Renew the passport.", expires_at=datetime(2000, 1, 1, tzinfo=UTC))
        with pytest.raises(NotFound) as missing:
            await mneme.call(get_memory.asyncio_detailed, "me", uuid.uuid4())
        assert not [memory async for memory in mneme.memories()]

    assert (refused.value.status, refused.value.code) == (422, "VALIDATION_FAILED")
    assert [error["loc"] for error in refused.value.problem["errors"]] == [["body", "expires_at"]]
    assert refused.value.detail
    assert (missing.value.status, missing.value.code) == (404, "NOT_FOUND")
    assert type(missing.value.status) is int
    assert missing.value.trace_id is None or isinstance(missing.value.trace_id, str)


async def test_a_304_not_modified_is_an_answer_not_an_error(
    live_server: LiveServer, live_user: tuple[str, str]
) -> None:
    async with _mneme(live_server, live_user) as mneme:
        written = await mneme.remember("Reads the news at breakfast.")
        read = await get_memory.asyncio_detailed("me", written.id, client=mneme.client)
        tag = read.headers["etag"]
        unchanged = await get_memory.asyncio_detailed(
            "me", written.id, client=mneme.client, if_none_match=tag
        )
        assert unchanged.status_code == 304
        assert (
            await mneme.call(get_memory.asyncio_detailed, "me", written.id, if_none_match=tag)
            is None
        )


def test_the_synchronous_generated_functions_raise_through_unwrap(
    live_server: LiveServer, live_user: tuple[str, str]
) -> None:
    tenant_id, user_id = live_user
    client = connect(live_server.base_url, live_server.token_for(tenant_id, user_id))
    with client, pytest.raises(NotFound) as missing:
        unwrap(get_memory.sync_detailed("me", uuid.uuid4(), client=client))
    assert missing.value.code == "NOT_FOUND"


async def test_the_pager_follows_next_cursor_to_the_last_page(
    live_server: LiveServer, live_user: tuple[str, str]
) -> None:
    async with _mneme(live_server, live_user) as mneme:
        texts = {f"Visited city number {n} in {2000 + n}." for n in range(5)}
        for text in sorted(texts):
            await mneme.remember(text, kind="episodic")
        await mneme.remember("Prefers tea to coffee.")  # semantic: filtered out below
        listed = [memory.text async for memory in mneme.memories(page_size=2, kind=["episodic"])]
        thread = await mneme.thread()
        for n in range(3):
            await mneme.turn(thread.id, user=f"Question {n}?")
        messages = [message.content async for message in mneme.messages(thread.id, page_size=2)]
        threads = [listed_thread.id async for listed_thread in mneme.threads(page_size=1)]

    assert sorted(listed) == sorted(texts)
    assert messages == ["Question 0?", "Question 1?", "Question 2?"]
    assert threads == [thread.id]


class _AnswerLostOnce(httpx.AsyncBaseTransport):
    """Delivers the first request to the server, then drops its answer as a broken connection."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.deliveries = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        self.deliveries += 1
        if self.deliveries == 1:
            await response.aclose()
            raise httpx.ReadError("connection reset", request=request)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


async def test_a_creation_sent_again_with_the_callers_idempotency_key_is_written_once(
    live_server: LiveServer, live_user: tuple[str, str]
) -> None:
    async with _mneme(live_server, live_user) as mneme:
        memories = [await mneme.remember("Owns a red bike.", idempotency_key="m-1") for _ in "ab"]
        threads = [await mneme.thread("Bikes", idempotency_key="t-1") for _ in "ab"]
        turns = [
            await mneme.turn(threads[0].id, user="Which bike?", idempotency_key="turn-1")
            for _ in "ab"
        ]
        messages = [message.content async for message in mneme.messages(threads[0].id)]
        listed = [thread.id async for thread in mneme.threads()]

    assert memories[0].id == memories[1].id
    assert threads[0].id == threads[1].id and listed == [threads[0].id]
    assert [item.id for item in turns[0].items] == [item.id for item in turns[1].items]
    assert messages == ["Which bike?"]


def _losing_the_first_answer(
    base_url: str, token: str
) -> tuple[AuthenticatedClient, _AnswerLostOnce, list[float]]:
    """A client whose first request reaches the server but whose answer is lost, with the
    layer's retries over it (recording their waits instead of waiting)."""
    flaky = _AnswerLostOnce()
    waits: list[float] = []

    async def record_wait(seconds: float) -> None:
        waits.append(seconds)

    client = AuthenticatedClient(base_url=base_url, token=token)
    client.set_async_httpx_client(
        httpx.AsyncClient(
            base_url=base_url,
            headers={"Authorization": f"Bearer {token}"},
            transport=AsyncRetryingTransport(RetryPolicy(), flaky, sleep=record_wait),
        )
    )
    return client, flaky, waits


async def test_a_creation_retried_after_a_lost_answer_is_stored_once(
    live_server: LiveServer, live_user: tuple[str, str]
) -> None:
    tenant_id, user_id = live_user
    token = live_server.token_for(tenant_id, user_id)
    client, flaky, waits = _losing_the_first_answer(live_server.base_url, token)
    async with Mneme(live_server.base_url, token, client=client) as mneme:
        written = await mneme.remember("Allergic to peanuts.", kind="semantic")
        listed = [memory.id async for memory in mneme.memories()]

    assert flaky.deliveries == 3  # the lost answer, its retry, the listing
    assert len(waits) == 1
    assert listed == [written.id]


async def test_a_delete_retried_after_a_lost_answer_succeeds(
    live_server: LiveServer, live_user: tuple[str, str]
) -> None:
    tenant_id, user_id = live_user
    token = live_server.token_for(tenant_id, user_id)
    client, flaky, waits = _losing_the_first_answer(live_server.base_url, token)
    async with _mneme(live_server, live_user) as mneme:
        written = await mneme.remember("Has a dog named Biscuit.")
        async with Mneme(live_server.base_url, token, client=client) as lossy:
            # The first attempt deletes it and its answer is lost; the retry finds nothing.
            assert await lossy.call(delete_memory.asyncio_detailed, "me", written.id) is None
        with pytest.raises(NotFound):
            await mneme.call(get_memory.asyncio_detailed, "me", written.id)
        # A delete whose own answer is the 404 is still refused: nothing was there.
        with pytest.raises(NotFound):
            await mneme.call(delete_memory.asyncio_detailed, "me", uuid.uuid4())

    assert (flaky.deliveries, len(waits)) == (2, 1)
