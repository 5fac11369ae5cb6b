"""Inputs a hostile or careless client sends get a 4xx problem and change nothing; none is a 500.

Each case once reached Postgres or a comparison it could not survive: NUL characters (Postgres
text and jsonb cannot hold them), lone surrogates (not encodable as UTF-8), NaN and Infinity
(not JSON, and not storable in jsonb), very deep nesting, integers beyond int64, timestamps
whose UTC value falls outside the calendar, naive datetimes compared with aware ones.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from httpx import AsyncClient
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from service.kit.pagination import encode_cursor
from tests.admin.conftest import tenant_rows
from tests.conftest import assert_problem, bearer
from tests.fixtures.apps import api_routes


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


def _raw_json(
    client: AsyncClient, url: str, body: str, headers: dict[str, str], method: str = "POST"
) -> Any:
    return client.request(
        method,
        url,
        content=body.encode("utf-8", "surrogatepass"),
        headers={**headers, "content-type": "application/json"},
    )


async def _memory_count(client: AsyncClient, headers: dict[str, str]) -> int:
    listing = await client.get("/v1/users/me/memories", headers=headers)
    assert listing.status_code == 200
    return len(listing.json()["items"])


@pytest.mark.parametrize(
    "body",
    [
        '{"text": "a\\u0000b"}',
        '{"text": "ok", "metadata": {"k": "a\\u0000b"}}',
        '{"text": "ok", "metadata": {"a\\u0000b": 1}}',
        '{"text": "ok", "evidence": "\\u0000"}',
        '{"text": "ok", "metadata": {"x": NaN}}',
        '{"text": "ok", "metadata": {"x": Infinity}}',
        '{"text": "ok", "metadata": {"x": -Infinity}}',
        '{"text": "ok", "metadata": {"x": "\\ud800"}}',
        '{"text": "lone \\udfff surrogate"}',
        '{"text": "ok", "metadata": {"\\ud83d": 1}}',
    ],
)
async def test_unstorable_characters_and_numbers_are_refused(
    client: AsyncClient, settings: Settings, tenant: str, body: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    response = await _raw_json(client, "/v1/users/me/memories", body, headers)
    problem = assert_problem(response, 422, "VALIDATION_FAILED")
    assert problem["errors"][0]["loc"][0] == "body"
    assert await _memory_count(client, headers) == 0


@pytest.mark.parametrize("depth", [65, 500, 990, 1200, 5000])
async def test_deeply_nested_json_is_refused(
    client: AsyncClient, settings: Settings, tenant: str, depth: int
) -> None:
    headers = bearer(settings, tenant, "ada")
    # Built as text: the client's own encoder cannot nest this deep.
    body = '{"text": "deep", "metadata": ' + '{"k": ' * (depth - 1) + "{}" + "}" * depth
    response = await _raw_json(client, "/v1/users/me/memories", body, headers)
    problem = assert_problem(response, 422, "VALIDATION_FAILED")
    assert problem["errors"][0]["type"] == "json_too_deep"
    assert await _memory_count(client, headers) == 0


async def test_moderately_nested_metadata_is_accepted(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    response = await client.post(
        "/v1/users/me/memories",
        json={"text": "nested but fine", "metadata": _nested(20)},
        headers=headers,
    )
    assert response.status_code == 201, response.text


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [
        ("POST", "/v1/users/me/threads", {"title": "a\u0000b"}),
        ("POST", "/v1/users/me/memories/search", {"query": "x\u0000y"}),
        ("POST", "/v1/users/me/context", {"query": "x\u0000y"}),
        ("PUT", "/v1/users/me/procedures", {"style": "\u0000"}),
    ],
)
async def test_nul_in_any_json_body_is_refused(
    client: AsyncClient,
    settings: Settings,
    tenant: str,
    method: str,
    url: str,
    body: dict[str, Any],
) -> None:
    headers = bearer(settings, tenant, "ada")
    response = await client.request(method, url, json=body, headers=headers)
    assert_problem(response, 422, "VALIDATION_FAILED")


async def test_nul_in_a_message_is_refused_and_nothing_is_appended(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    thread = (await client.post("/v1/users/me/threads", json={}, headers=headers)).json()
    url = f"/v1/users/me/threads/{thread['id']}/messages"
    response = await client.post(
        url, json={"messages": [{"role": "user", "content": "hi\u0000"}]}, headers=headers
    )
    assert_problem(response, 422, "VALIDATION_FAILED")
    assert (await client.get(url, headers=headers)).json()["items"] == []


@pytest.mark.parametrize(
    "url",
    [
        "/v1/users/me/memories?category=a%00b",
        "/v1/users/a%00b/memories",
        "/v1/users/me/memories?cursor=%00",
    ],
)
async def test_nul_in_the_url_is_refused(
    client: AsyncClient, settings: Settings, tenant: str, url: str
) -> None:
    response = await client.get(url, headers=bearer(settings, tenant, "svc", service=True))
    assert_problem(response, 422, "VALIDATION_FAILED")


async def test_invalid_utf8_body_is_a_422_problem(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    response = await client.post(
        "/v1/users/me/memories",
        content=b'{"text": "\xff\xfe"}',
        headers={**bearer(settings, tenant, "ada"), "content-type": "application/json"},
    )
    assert_problem(response, 422, "VALIDATION_FAILED")


async def test_label_beyond_int64_is_refused(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    thread = (await client.post("/v1/users/me/threads", json={}, headers=headers)).json()
    response = await client.get(
        f"/v1/users/me/threads/{thread['id']}/messages",
        params={"label": str(2**63)},
        headers=headers,
    )
    assert_problem(response, 422, "VALIDATION_FAILED")


@pytest.mark.parametrize(
    "value",
    [
        "0001-01-01T00:00:00+05:00",
        "9999-12-31T23:59:59-05:00",
        "2024-01-01T00:00:00",
        # Numbers are no times: each was read as seconds since the Unix epoch.
        "2026",
        "20260101",
        "1700000000",
    ],
)
async def test_timestamps_outside_the_calendar_or_without_zone_are_refused(
    client: AsyncClient, settings: Settings, tenant: str, value: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    listing = await client.get(
        "/v1/users/me/memories", params={"created_after": value}, headers=headers
    )
    assert_problem(listing, 422, "VALIDATION_FAILED")
    written = await client.post(
        "/v1/users/me/memories", json={"text": "when?", "event_at": value}, headers=headers
    )
    assert_problem(written, 422, "VALIDATION_FAILED")
    assert await _memory_count(client, headers) == 0


async def test_a_member_named_twice_is_refused_and_nothing_is_stored(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = {**bearer(settings, tenant, "ada"), "Content-Type": "application/json"}
    written = await client.post(
        "/v1/users/me/memories",
        content=b'{"text": "Ada likes tea.", "text": "Ada likes coffee."}',
        headers=headers,
    )
    problem = assert_problem(written, 422, "VALIDATION_FAILED")
    assert "'text' appears twice" in problem["detail"]
    assert await _memory_count(client, bearer(settings, tenant, "ada")) == 0


@pytest.mark.parametrize("value", [1, "yes", "true"])
async def test_a_boolean_written_as_anything_else_is_refused_and_nothing_is_stored(
    client: AsyncClient, settings: Settings, tenant: str, value: object
) -> None:
    headers = bearer(settings, tenant, "ada")
    written = await client.post(
        "/v1/users/me/memories",
        json={"text": "Ada sings in a choir.", "needs_review": value},
        headers=headers,
    )
    problem = assert_problem(written, 422, "VALIDATION_FAILED")
    assert problem["errors"][0]["loc"] == ["body", "needs_review"]
    assert await _memory_count(client, headers) == 0


@pytest.mark.parametrize("value", [2026, 1700000000, 1.7e9, True])
async def test_a_json_number_is_not_a_time(
    client: AsyncClient, settings: Settings, tenant: str, value: object
) -> None:
    headers = bearer(settings, tenant, "ada")
    for body in (
        {"text": "when?", "event_at": value},
        {"text": "until when?", "expires_at": value},
    ):
        written = await client.post("/v1/users/me/memories", json=body, headers=headers)
        assert_problem(written, 422, "VALIDATION_FAILED")
    searched = await client.post(
        "/v1/users/me/memories/search",
        json={"query": "when", "event_after": value},
        headers=headers,
    )
    assert_problem(searched, 422, "VALIDATION_FAILED")
    assert await _memory_count(client, headers) == 0


def _query_parameters(dependant: Dependant) -> set[str]:
    """The names of the query parameters a route reads, through its dependencies."""
    names = {param.alias for param in dependant.query_params}
    for child in dependant.dependencies:
        names |= _query_parameters(child)
    return names


def cursor_listings(app: FastAPI) -> list[str]:
    """The path of every route that reads a `cursor`: each one pages a listing."""
    return sorted(
        route.path
        for route in api_routes(app.routes)
        if "GET" in (route.methods or ()) and "cursor" in _query_parameters(route.dependant)
    )


_TIME = "2026-12-07T23:10:29.096785+00:00"
_ID = "b694d553-9a8d-4fe0-a35e-6d94d2125dd0"


@pytest.mark.parametrize(
    "cursor",
    [
        encode_cursor(["0001-01-01T00:00:00+05:00", "00000000-0000-0000-0000-000000000000"]),
        encode_cursor(["2024-01-01T00:00:00", "00000000-0000-0000-0000-000000000000"]),
        encode_cursor([{"not": "a time"}, 3]),
        # A time, and an id of another type than a string: each was a 500.
        encode_cursor(["2026-01-01T00:00:00Z", 123]),
        encode_cursor(["2026-01-01T00:00:00Z", []]),
        # Text Postgres cannot hold, in an id or a time: a 500 (the driver or the database
        # refused the query argument), or a time read as the text before its NUL.
        encode_cursor(["ada\x00"]),
        encode_cursor(["\ud800"]),
        encode_cursor([_TIME + "\x00", _ID]),
        encode_cursor(["\ud800", _ID]),
        encode_cursor([_TIME, _ID + "\x00"]),
        encode_cursor([_TIME, "\ud800"]),
        # Not what a cursor holds: a time that is none, an id no user or tenant can have.
        encode_cursor(["2026-13-01T00:00:00Z", _ID]),
        encode_cursor(["last week", _ID]),
        encode_cursor(["a/b"]),
        encode_cursor([""]),
        # Positions beyond bigint, before the first, or of another type.
        encode_cursor([2**63]),
        encode_cursor([-1]),
        encode_cursor(["the seventh"]),
        encode_cursor([None]),
        # Nested past the JSON parser's recursion limit.
        base64.urlsafe_b64encode(b"[" * 1500 + b"]" * 1500).decode().rstrip("="),
    ],
)
async def test_forged_cursors_are_refused_on_every_listing_and_change_nothing(
    app: FastAPI,
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    cursor: str,
) -> None:
    headers = bearer(settings, tenant, "root", admin=True)
    thread = await client.post("/v1/users/me/threads", json={}, headers=headers)
    assert thread.status_code == 201, thread.text
    listings = cursor_listings(app)
    # The walk finds the listings it is known to have (and any added since).
    assert {
        "/v1/admin/api-keys",
        "/v1/admin/audit",
        "/v1/admin/users",
        "/v1/org/memories",
        "/v1/users/{user_id}/memories",
        "/v1/users/{user_id}/threads",
        "/v1/users/{user_id}/threads/{thread_id}/messages",
    } <= set(listings)
    before = await tenant_rows(owner_engine, tenant)
    for path in listings:
        url = path.format(user_id="me", thread_id=thread.json()["id"])
        response = await client.get(url, params={"cursor": cursor}, headers=headers)
        problem = assert_problem(response, 422, "VALIDATION_FAILED")
        assert [error["loc"] for error in problem["errors"]] == [["query", "cursor"]], url
    assert await tenant_rows(owner_engine, tenant) == before


async def test_api_key_with_nul_in_its_tenant_is_a_401(client: AsyncClient) -> None:
    tenant_part = base64.urlsafe_b64encode(b"acme\x00evil").decode().rstrip("=")
    token = f"mneme.{tenant_part}.{'0' * 32}.secret"
    response = await client.get("/v1/users/me", headers={"Authorization": f"Bearer {token}"})
    assert_problem(response, 401, "UNAUTHENTICATED")


async def test_api_key_expiry_needs_a_time_zone(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "root", admin=True)
    response = await client.post(
        "/v1/admin/api-keys",
        json={"name": "naive", "expires_at": "2030-01-01T00:00:00"},
        headers=headers,
    )
    assert_problem(response, 422, "VALIDATION_FAILED")
    assert (await client.get("/v1/admin/api-keys", headers=headers)).json()["items"] == []


@pytest.mark.parametrize("query", [" ", "\t\n  ", "\u000b"])
@pytest.mark.parametrize("path", ["/v1/users/me/memories/search", "/v1/users/me/context"])
async def test_whitespace_only_query_is_refused(
    client: AsyncClient, settings: Settings, tenant: str, query: str, path: str
) -> None:
    response = await client.post(path, json={"query": query}, headers=bearer(settings, tenant, "a"))
    assert_problem(response, 422, "VALIDATION_FAILED")


async def test_json_patch_bodies_are_held_to_the_same_rules(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = {**bearer(settings, tenant, "ada"), "content-type": "application/json-patch+json"}
    response = await client.patch(
        "/v1/users/me/profile",
        content=b'[{"op": "add", "path": "/x", "value": NaN}]',
        headers=headers,
    )
    assert_problem(response, 422, "VALIDATION_FAILED")
