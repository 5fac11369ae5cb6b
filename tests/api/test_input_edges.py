"""Values at the edge of what Postgres and Python can hold, sent through every API that takes
them: each is a 422 problem that stores nothing, or is accepted and reads back; none is a 500.

Numbers beyond a double (`1e400`) and integers too long to read back in free-form JSON;
weights and confidences so small that the ranking's products underflow; identifiers with a
trailing newline; admin time filters with out-of-range offsets or no zone; queries of
invisible characters; and dates at the calendar's edge named in a question.
"""

from __future__ import annotations

import time
from typing import Any

import jwt
import pytest
from httpx import AsyncClient

from service.config import Settings
from tests.conftest import TEST_SECRET, assert_problem, bearer

TOO_LARGE_NUMBERS = ["1e400", "-1e400", "9" * 5000]


def _with_number(template: str, number: str) -> bytes:
    return template.replace("NUMBER", number).encode()


async def _post_raw(
    client: AsyncClient, method: str, url: str, body: bytes, headers: dict[str, str]
) -> Any:
    return await client.request(
        method, url, content=body, headers={**headers, "content-type": "application/json"}
    )


async def _listed(client: AsyncClient, url: str, headers: dict[str, str]) -> list[Any]:
    response = await client.get(url, headers=headers)
    assert response.status_code == 200, response.text
    items: list[Any] = response.json()["items"]
    return items


@pytest.mark.parametrize("number", TOO_LARGE_NUMBERS)
async def test_a_number_no_double_holds_is_refused_in_every_free_form_field(
    client: AsyncClient, settings: Settings, tenant: str, number: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    thread = (await client.post("/v1/users/me/threads", json={}, headers=headers)).json()
    memory = (
        await client.post("/v1/users/me/memories", json={"text": "kept"}, headers=headers)
    ).json()
    messages = f"/v1/users/me/threads/{thread['id']}/messages"
    cases = [
        ("POST", "/v1/users/me/memories", '{"text": "t", "metadata": {"x": NUMBER}}'),
        ("PATCH", f"/v1/users/me/memories/{memory['id']}", '{"metadata": {"x": [NUMBER]}}'),
        ("POST", "/v1/users/me/threads", '{"metadata": {"x": NUMBER}}'),
        ("PATCH", f"/v1/users/me/threads/{thread['id']}", '{"metadata": {"x": NUMBER}}'),
        (
            "POST",
            messages,
            '{"messages": [{"role": "user", "content": "hi", "metadata": {"x": NUMBER}}]}',
        ),
        (
            "POST",
            messages,
            '{"messages": [{"role": "assistant", "content": "", '
            '"tool_calls": [{"arguments": {"n": NUMBER}}]}]}',
        ),
        (
            "PUT",
            "/v1/users/me/keyed-memories?kind=semantic&key=seat",
            '{"text": "aisle", "metadata": {"x": NUMBER}}',
        ),
        ("POST", "/v1/users/me/memories", '{"text": "t", "confidence": NUMBER}'),
    ]
    for method, url, template in cases:
        response = await _post_raw(client, method, url, _with_number(template, number), headers)
        problem = assert_problem(response, 422, "VALIDATION_FAILED")
        assert problem["errors"][0]["type"] in {"finite_number", "integer_too_long"}, url

    memories = await _listed(client, "/v1/users/me/memories", headers)
    assert [(m["text"], m["metadata"]) for m in memories] == [("kept", {})]
    assert [t["metadata"] for t in await _listed(client, "/v1/users/me/threads", headers)] == [{}]
    assert await _listed(client, messages, headers) == []


async def test_the_largest_finite_numbers_are_stored_and_read_back(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    metadata = {"max": 1.7976931348623157e308, "tiny": 5e-324, "long": int("9" * 4300)}
    response = await client.post(
        "/v1/users/me/memories", json={"text": "edges", "metadata": metadata}, headers=headers
    )
    assert response.status_code == 201, response.text
    [stored] = await _listed(client, "/v1/users/me/memories", headers)
    # jsonb keeps numbers as decimals: the largest double comes back as the same decimal,
    # written out as an integer.
    assert float(stored["metadata"]["max"]) == metadata["max"]
    assert (stored["metadata"]["tiny"], stored["metadata"]["long"]) == (5e-324, metadata["long"])


@pytest.mark.parametrize(
    ("field", "mode"),
    [
        ("recency_weight", "hybrid"),
        ("confidence_weight", "hybrid"),
        ("linear_lexical_weight", "lexical"),
        ("mmr_lambda", "hybrid"),
    ],
)
@pytest.mark.parametrize("weight", [1e-300, 5e-324])
async def test_a_weight_that_would_underflow_the_ranking_is_refused(
    client: AsyncClient, settings: Settings, tenant: str, field: str, mode: str, weight: float
) -> None:
    headers = bearer(settings, tenant, "ada")
    old = {"text": "green tea in Kyoto", "event_at": "1900-01-01T00:00:00Z"}
    assert (await client.post("/v1/users/me/memories", json=old, headers=headers)).is_success
    response = await client.post(
        "/v1/users/me/memories/search",
        json={"query": "green tea", "mode": mode, "fusion": "linear", field: weight},
        headers=headers,
    )
    problem = assert_problem(response, 422, "VALIDATION_FAILED")
    assert problem["errors"][0]["loc"] == ["body", field]
    assert "at least 1e-06" in problem["errors"][0]["msg"]


async def test_the_smallest_weights_and_confidence_allowed_rank_without_underflow(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    old = {
        "text": "green tea in Kyoto",
        "event_at": "0001-01-01T00:00:00.000001Z",
        "confidence": 1e-6,
    }
    assert (await client.post("/v1/users/me/memories", json=old, headers=headers)).is_success
    for mode in ("lexical", "hybrid"):
        response = await client.post(
            "/v1/users/me/memories/search",
            json={
                "query": "green tea",
                "mode": mode,
                "fusion": "linear",
                "linear_lexical_weight": 1e-6,
                "recency_weight": 1,
                "confidence_weight": 1,
            },
            headers=headers,
        )
        assert response.status_code == 200, response.text
        [hit] = response.json()["hits"]
        assert hit["memory"]["confidence"] == 1e-6


@pytest.mark.parametrize("confidence", [1e-300, 5e-324, 1e-7])
async def test_a_confidence_too_small_to_rank_is_refused_and_nothing_is_stored(
    client: AsyncClient, settings: Settings, tenant: str, confidence: float
) -> None:
    headers = bearer(settings, tenant, "ada")
    created = await client.post(
        "/v1/users/me/memories", json={"text": "t", "confidence": confidence}, headers=headers
    )
    assert_problem(created, 422, "VALIDATION_FAILED")
    keyed = await client.put(
        "/v1/users/me/keyed-memories",
        params={"kind": "semantic", "key": "k"},
        json={"text": "t", "confidence": confidence},
        headers=headers,
    )
    assert_problem(keyed, 422, "VALIDATION_FAILED")
    assert await _listed(client, "/v1/users/me/memories", headers) == []


def _signed(tenant: str, subject: str) -> dict[str, str]:
    """A dev token for any subject (the token helper itself refuses invalid ids)."""
    now = int(time.time())
    claims = {"sub": subject, "org_id": tenant, "iat": now, "exp": now + 300}
    return {"Authorization": f"Bearer {jwt.encode(claims, TEST_SECRET, algorithm='HS256')}"}


async def test_a_user_id_with_a_trailing_newline_is_no_user(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    service = bearer(settings, tenant, "agent", service=True)
    admin = bearer(settings, tenant, "root", admin=True)
    written = await client.post(
        "/v1/users/ada/memories", json={"text": "ada's fact"}, headers=service
    )
    assert written.status_code == 201, written.text

    for method, url in (
        ("POST", "/v1/users/ada%0A/memories"),
        ("GET", "/v1/users/ada%0A/memories"),
        ("GET", "/v1/admin/users/ada%0A"),
        ("DELETE", "/v1/admin/users/ada%0A"),
    ):
        headers = admin if "/admin/" in url else service
        body = {"text": "a second ada"} if method == "POST" else None
        response = await client.request(method, url, json=body, headers=headers)
        assert_problem(response, 404, "NOT_FOUND")

    assert (await client.get("/v1/users/me", headers=_signed(tenant, "ada"))).status_code == 200
    newline = await client.get("/v1/users/me", headers=_signed(tenant, "ada\n"))
    assert_problem(newline, 401, "UNAUTHENTICATED")
    users = await client.get("/v1/admin/users", headers=admin)
    assert {u["id"] for u in users.json()["items"]} == {"ada", "root"}
    ada = await _listed(client, "/v1/users/ada/memories", service)
    assert [m["text"] for m in ada] == ["ada's fact"]


async def test_no_credential_or_import_makes_a_user_called_me(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """`me` in a path is the caller: a user of that name could not be addressed by a service
    or exported by an admin, so no token names one and no import creates one."""
    admin = bearer(settings, tenant, "root", admin=True)
    assert (await client.get("/v1/admin/users", headers=admin)).status_code == 200
    named_me = await client.post(
        "/v1/users/me/memories", json={"text": "who am I"}, headers=_signed(tenant, "me")
    )
    assert_problem(named_me, 401, "UNAUTHENTICATED")
    header = '{"type": "header", "format": "mneme-user-export", "version": 1, "user_id": "me"}'
    imported = await client.post(
        "/v1/admin/users/me/import",
        content=header + "\n",
        headers={**admin, "content-type": "application/x-ndjson"},
    )
    assert_problem(imported, 404, "NOT_FOUND")
    users = await client.get("/v1/admin/users", headers=admin)
    assert [u["id"] for u in users.json()["items"]] == ["root"]


@pytest.mark.parametrize(
    "value",
    [
        "2026-01-01T00:00:00+15:00",
        "2026-01-01T00:00:00-23:59",
        "0001-01-01T00:00:00+14:00",
        "9999-12-31T23:59:59-01:00",
        "2026-01-01T00:00:00",
        "2026-01-01",
        "0001-01-01T00:00:00Z",
        "9999-12-31T23:59:59.999999Z",
    ],
)
@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/v1/admin/users", "active_after"),
        ("/v1/admin/users", "active_before"),
        ("/v1/admin/audit", "since"),
        ("/v1/admin/audit", "until"),
    ],
)
async def test_admin_time_filters_need_a_zone_and_a_time_in_range(
    client: AsyncClient, settings: Settings, tenant: str, path: str, name: str, value: str
) -> None:
    admin = bearer(settings, tenant, "root", admin=True)
    response = await client.get(path, params={name: value}, headers=admin)
    problem = assert_problem(response, 422, "VALIDATION_FAILED")
    assert problem["errors"][0]["loc"] == ["query", name]


@pytest.mark.parametrize(
    ("path", "name"),
    [("/v1/admin/users", "active_after"), ("/v1/admin/audit", "since")],
)
async def test_admin_time_filters_at_the_calendars_edges_are_answered(
    client: AsyncClient, settings: Settings, tenant: str, path: str, name: str
) -> None:
    admin = bearer(settings, tenant, "root", admin=True)
    for value in ("0001-01-01T00:00:01Z", "0001-01-01T14:00:01+14:00", "9999-12-31T23:59:59Z"):
        response = await client.get(path, params={name: value}, headers=admin)
        assert response.status_code == 200, response.text


@pytest.mark.parametrize("query", ["\u200b", "\u200b\u200c\u200d", "\ufeff ", "\u2060"])
async def test_a_query_of_invisible_characters_is_refused_like_a_blank_one(
    client: AsyncClient, settings: Settings, tenant: str, query: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    for path in ("/v1/users/me/memories/search", "/v1/users/me/context"):
        response = await client.post(path, json={"query": query}, headers=headers)
        problem = assert_problem(response, 422, "VALIDATION_FAILED")
        assert problem["errors"][0]["loc"] == ["body", "query"]
    thread = (await client.post("/v1/users/me/threads", json={}, headers=headers)).json()
    turn = await client.post(
        f"/v1/users/me/threads/{thread['id']}/turns",
        json={"messages": [{"role": "user", "content": query}]},
        headers=headers,
    )
    assert_problem(turn, 422, "VALIDATION_FAILED")
    messages = f"/v1/users/me/threads/{thread['id']}/messages"
    assert await _listed(client, messages, headers) == []


EDGE_QUESTIONS = [
    ("what happened on 9999-12-31", "9999-12-31T12:00:00Z"),
    ("The deed is dated 1 January 0001", "0001-01-01T05:00:00Z"),
    ("Anything from December 31st, 9999?", "9999-12-31T23:59:59Z"),
    ("the deed of 0001-01-01 at dawn", "0001-01-01T00:00:00.000001Z"),
]


@pytest.mark.parametrize(("question", "event_at"), EDGE_QUESTIONS)
async def test_a_date_at_the_calendars_edge_in_a_question_is_answered(
    client: AsyncClient, settings: Settings, tenant: str, question: str, event_at: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    memory = {"text": "the deed of the house", "event_at": event_at}
    assert (await client.post("/v1/users/me/memories", json=memory, headers=headers)).is_success

    search = await client.post(
        "/v1/users/me/memories/search", json={"query": question}, headers=headers
    )
    assert search.status_code == 200, search.text
    [hit] = search.json()["hits"]
    assert hit["scores"]["date_score"] > 0  # the day named is the memory's day
    context = await client.post("/v1/users/me/context", json={"query": question}, headers=headers)
    assert context.status_code == 200, context.text


@pytest.mark.parametrize(("question", "event_at"), EDGE_QUESTIONS)
async def test_a_turn_naming_a_date_at_the_calendars_edge_is_stored(
    client: AsyncClient, settings: Settings, tenant: str, question: str, event_at: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    thread = (await client.post("/v1/users/me/threads", json={}, headers=headers)).json()
    url = f"/v1/users/me/threads/{thread['id']}/turns"
    body = {"messages": [{"role": "user", "content": question}]}
    keyed = {**headers, "Idempotency-Key": f"edge-{event_at}"}

    first = await client.post(url, json=body, headers=keyed)
    retry = await client.post(url, json=body, headers=keyed)

    assert first.status_code == 201, first.text
    assert retry.status_code == 201 and retry.headers["idempotent-replayed"] == "true"
    stored = await _listed(client, f"/v1/users/me/threads/{thread['id']}/messages", headers)
    assert [m["content"] for m in stored] == [question]


@pytest.mark.parametrize(
    "value",
    ["0001-01-01T00:00:00Z", "0001-01-01T14:00:00+14:00", "9999-12-31T23:59:59.999999Z"],
)
async def test_the_calendars_first_and_last_microsecond_are_refused_as_times(
    client: AsyncClient, settings: Settings, tenant: str, value: str
) -> None:
    # The driver would store them as -infinity and infinity and read them back without a zone.
    admin = bearer(settings, tenant, "root", admin=True)
    memory = await client.post(
        "/v1/users/me/memories", json={"text": "when?", "event_at": value}, headers=admin
    )
    assert_problem(memory, 422, "VALIDATION_FAILED")
    key = await client.post(
        "/v1/admin/api-keys", json={"name": "forever", "expires_at": value}, headers=admin
    )
    assert_problem(key, 422, "VALIDATION_FAILED")
    assert await _listed(client, "/v1/users/me/memories", admin) == []
    assert await _listed(client, "/v1/admin/api-keys", admin) == []


async def test_patterned_names_with_a_trailing_newline_are_refused_everywhere(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    patch = {**headers, "content-type": "application/json-patch+json"}
    cases = [
        client.patch(
            "/v1/users/me/profile",
            json=[{"op": "add", "path": "/city\n", "value": "Paris"}],
            headers=patch,
        ),
        client.delete("/v1/users/me/profile/city%0A", headers=headers),
        client.post(
            "/v1/users/me/memories", json={"text": "t", "category": "work\n"}, headers=headers
        ),
        client.put(
            "/v1/users/me/keyed-memories",
            params={"kind": "semantic", "key": "seat", "category": "work\n"},
            json={"text": "aisle"},
            headers=headers,
        ),
    ]
    for pending in cases:
        assert_problem(await pending, 422, "VALIDATION_FAILED")
    profile = await client.get("/v1/users/me/profile", headers=headers)
    assert "city\n" not in profile.json()["profile"]
    assert await _listed(client, "/v1/users/me/memories", headers) == []
