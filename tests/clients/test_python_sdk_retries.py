"""Which requests the `mneme` layer retries, and how long it waits, against scripted answers
(a live server cannot be made to answer 429 or 503 on cue)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from mneme import RateLimited, RetryPolicy, ServiceUnavailable
from mneme.errors import error_from_response
from mneme.retry import (
    READS_ONLY_POSTS,
    AsyncRetryingTransport,
    RetryingTransport,
    retry_after_seconds,
)

REPOSITORY = Path(__file__).resolve().parents[2]

PROBLEM = json.dumps(
    {"status": 429, "code": "RATE_LIMITED", "title": "Too Many", "detail": "", "trace_id": "abc"}
).encode()


def _scripted(answers: list[httpx.Response | Exception]) -> tuple[httpx.MockTransport, list[str]]:
    remaining: Iterator[httpx.Response | Exception] = iter(answers)
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.method)
        outcome = next(remaining)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return httpx.MockTransport(answer), seen


def _client(
    answers: list[httpx.Response | Exception], **policy: Any
) -> tuple[httpx.Client, list[str], list[float]]:
    transport, seen = _scripted(answers)
    waits: list[float] = []
    retrying = RetryingTransport(RetryPolicy(**policy), transport, sleep=waits.append)
    return httpx.Client(base_url="http://mneme", transport=retrying), seen, waits


def test_an_idempotent_call_waits_as_long_as_retry_after_and_ratelimit_say() -> None:
    client, seen, waits = _client(
        [
            httpx.Response(429, headers={"Retry-After": "2"}, content=PROBLEM),
            httpx.Response(503, headers={"RateLimit": '"default";r=0;t=3, "burst";r=4;t=1'}),
            httpx.Response(200, json={"ok": True}),
        ]
    )
    assert client.get("/v1/users/me/memories").json() == {"ok": True}
    assert (seen, waits) == (["GET"] * 3, [2.0, 3.0])


def test_a_post_is_retried_only_with_an_idempotency_key() -> None:
    client, seen, waits = _client([httpx.Response(503), httpx.Response(201)])
    assert client.post("/v1/users/me/memories", json={}).status_code == 503
    assert (seen, waits) == (["POST"], [])

    client, seen, waits = _client([httpx.Response(503), httpx.Response(201)], backoff=0.5)
    keyed = client.post("/v1/users/me/memories", json={}, headers={"Idempotency-Key": "k-1"})
    assert keyed.status_code == 201
    assert seen == ["POST", "POST"]
    assert len(waits) == 1 and 0 <= waits[0] <= 0.5  # jittered back-off without Retry-After


def test_a_wait_longer_than_max_delay_is_left_to_the_caller() -> None:
    client, seen, waits = _client(
        [httpx.Response(429, headers={"Retry-After": "120"}, content=PROBLEM)], max_delay=30
    )
    answer = client.get("/v1/users/me/memories")
    error = error_from_response(answer.status_code, answer.headers, answer.read())
    assert (seen, waits) == (["GET"], [])
    assert isinstance(error, RateLimited)
    assert (error.code, error.retry_after, error.trace_id) == ("RATE_LIMITED", 120.0, "abc")


def test_attempts_are_bounded_and_the_last_answer_is_returned() -> None:
    client, seen, waits = _client([httpx.Response(503)] * 3, attempts=3, backoff=0.1)
    answer = client.get("/readyz")
    assert answer.status_code == 503 and len(seen) == 3 and len(waits) == 2
    assert isinstance(error_from_response(503, answer.headers, b""), ServiceUnavailable)


def test_other_failures_are_not_retried() -> None:
    client, seen, _ = _client([httpx.Response(409), httpx.Response(200)])
    assert client.delete("/v1/users/me/memories/x").status_code == 409
    assert seen == ["DELETE"]


async def test_connection_failures_are_retried_only_for_idempotent_calls() -> None:
    waits: list[float] = []

    async def wait(seconds: float) -> None:
        waits.append(seconds)

    def client(answers: list[httpx.Response | Exception]) -> tuple[httpx.AsyncClient, list[str]]:
        transport, seen = _scripted(answers)
        retrying = AsyncRetryingTransport(RetryPolicy(), transport, sleep=wait)
        return httpx.AsyncClient(base_url="http://mneme", transport=retrying), seen

    put, put_seen = client([httpx.ConnectError("refused"), httpx.Response(200)])
    post, post_seen = client([httpx.ConnectError("refused"), httpx.Response(201)])
    async with put, post:
        assert (await put.put("/v1/users/me/procedures", json={})).status_code == 200
        with pytest.raises(httpx.ConnectError):
            await post.post("/v1/users/me/memories", json={})
    assert (put_seen, post_seen, len(waits)) == (["PUT", "PUT"], ["POST"], 1)


@pytest.mark.parametrize(
    ("first", "answered"),
    [
        (httpx.ReadError("connection reset"), 204),
        (httpx.Response(504), 204),
        (httpx.Response(502), 204),
        (httpx.Response(503), 404),
        (httpx.Response(429), 404),
    ],
)
def test_a_delete_answered_404_after_an_attempt_that_may_have_applied_it_is_done(
    first: httpx.Response | Exception, answered: int
) -> None:
    client, seen, _ = _client([first, httpx.Response(404, content=PROBLEM)])
    assert client.delete("/v1/users/me/memories/x").status_code == answered
    assert seen == ["DELETE", "DELETE"]


@pytest.mark.parametrize(("method", "answered"), [("DELETE", 204), ("GET", 404)])
async def test_the_asynchronous_transport_finishes_such_a_delete_too(
    method: str, answered: int
) -> None:
    async def no_wait(seconds: float) -> None:
        pass

    transport, seen = _scripted([httpx.ReadError("connection reset"), httpx.Response(404)])
    retrying = AsyncRetryingTransport(RetryPolicy(), transport, sleep=no_wait)
    async with httpx.AsyncClient(base_url="http://mneme", transport=retrying) as client:
        answer = await client.request(method, "/v1/users/me/memories/x")
    # Only a DELETE: a read's 404 after a lost answer is a 404.
    assert (answer.status_code, seen) == (answered, [method, method])


def test_retry_after_as_an_http_date_is_seconds_from_now() -> None:
    later = datetime.now(UTC) + timedelta(seconds=90)
    seconds = retry_after_seconds({"Retry-After": format_datetime(later, usegmt=True)})
    assert seconds is not None and 85 <= seconds <= 90
    assert retry_after_seconds({"RateLimit": '"default";r=3;t=10'}) is None


@pytest.mark.parametrize("path", ["/v1/users/me/memories/search", "/prefix/v1/users/ada/context"])
def test_a_search_and_a_context_block_are_retried_like_a_get(path: str) -> None:
    busy = json.dumps({"status": 503, "code": "SERVICE_BUSY", "title": "Busy", "detail": ""})
    client, seen, waits = _client(
        [
            httpx.Response(503, headers={"Retry-After": "2"}, content=busy.encode()),
            httpx.Response(200, json={"hits": []}),
        ]
    )
    assert client.post(path, json={"query": "x"}).json() == {"hits": []}
    assert (seen, waits) == (["POST", "POST"], [2.0])


def test_the_posts_retried_without_a_key_are_the_ones_the_service_marks_reads_only() -> None:
    document = json.loads((REPOSITORY / "docs" / "openapi.json").read_text())
    for path, operations in document["paths"].items():
        if "post" not in operations:
            continue
        concrete = re.sub(r"\{[^}]+\}", "x", path)
        marked = operations["post"].get("x-mneme-reads-only") is True
        assert (READS_ONLY_POSTS.search(concrete) is not None) == marked, path
