"""A number in a JSON body is the JSON number it is written as: `true`, `"5"` and (for an
integer) `5.0` are refused with a 422 that changes nothing, in every body that takes a number
and in MCP tool arguments; a plain number is accepted, and a query string's number is still
read from its text."""

from __future__ import annotations

import types
from typing import Annotated, Any, Union, get_args, get_origin

import pytest
from fastapi import FastAPI
from httpx import AsyncClient
from pydantic import BaseModel, TypeAdapter, ValidationError

from service.config import Settings
from service.mcp.server import build_mcp_server
from tests.conftest import assert_problem, bearer
from tests.fixtures.apps import api_routes
from tests.integrations.test_mcp_input_edges import call_tool

# What a lax reading would turn into a number: a boolean (1), a numeric text, and for an
# integer field an integral float.
NOT_AN_INTEGER: list[Any] = [True, False, "5", 5.0]
NOT_A_NUMBER: list[Any] = [True, "0.5", "1"]

# (field, the wrong values) per body; each body otherwise valid.
SEARCH_FIELDS = [
    ("limit", NOT_AN_INTEGER),
    ("rrf_k", NOT_AN_INTEGER),
    ("recency_weight", NOT_A_NUMBER),
    ("confidence_weight", NOT_A_NUMBER),
    ("linear_lexical_weight", NOT_A_NUMBER),
    ("mmr_lambda", NOT_A_NUMBER),
]
CONTEXT_FIELDS = [
    ("budget_tokens", [True, "500", 500.0]),
    ("k_user", NOT_AN_INTEGER),
    ("k_episodic", NOT_AN_INTEGER),
    ("k_org", NOT_AN_INTEGER),
    ("mmr_lambda", NOT_A_NUMBER),
]
RETENTION_FIELDS = [
    (field, [True, "30", 30.0]) for field in ("episodic_days", "messages_days", "summaries_days")
]


def _cases(fields: list[tuple[str, list[Any]]]) -> list[tuple[str, Any]]:
    return [(field, value) for field, values in fields for value in values]


def _refused_at(response: Any, *loc: str | int) -> None:
    problem = assert_problem(response, 422, "VALIDATION_FAILED")
    assert [error["loc"] for error in problem["errors"]] == [["body", *loc]], problem


@pytest.mark.parametrize(("field", "value"), _cases(RETENTION_FIELDS))
async def test_a_retention_period_that_is_not_a_json_integer_is_refused_and_kept(
    client: AsyncClient, settings: Settings, tenant: str, field: str, value: Any
) -> None:
    admin = bearer(settings, tenant, "root", admin=True)
    kept = {"episodic_days": 365, "messages_days": 90, "summaries_days": 30}
    assert (await client.put("/v1/admin/retention", headers=admin, json=kept)).status_code == 200

    refused = await client.put("/v1/admin/retention", headers=admin, json={field: value})

    _refused_at(refused, field)
    assert (await client.get("/v1/admin/retention", headers=admin)).json() == kept


@pytest.mark.parametrize(("field", "value"), _cases(SEARCH_FIELDS))
async def test_a_search_number_that_is_not_a_json_number_is_refused(
    client: AsyncClient, settings: Settings, tenant: str, field: str, value: Any
) -> None:
    response = await client.post(
        "/v1/users/me/memories/search",
        json={"query": "seat", field: value},
        headers=bearer(settings, tenant, "ada"),
    )
    _refused_at(response, field)


@pytest.mark.parametrize(("field", "value"), _cases(CONTEXT_FIELDS))
async def test_a_context_number_that_is_not_a_json_number_is_refused(
    client: AsyncClient, settings: Settings, tenant: str, field: str, value: Any
) -> None:
    response = await client.post(
        "/v1/users/me/context",
        json={"query": "seat", field: value},
        headers=bearer(settings, tenant, "ada"),
    )
    _refused_at(response, field)


@pytest.mark.parametrize(("field", "value"), _cases(CONTEXT_FIELDS))
async def test_a_turns_context_number_that_is_not_a_json_number_appends_nothing(
    client: AsyncClient, settings: Settings, tenant: str, field: str, value: Any
) -> None:
    headers = bearer(settings, tenant, "ada")
    thread = (await client.post("/v1/users/me/threads", json={}, headers=headers)).json()
    turn = {"messages": [{"role": "user", "content": "hello"}], "context": {field: value}}

    response = await client.post(
        f"/v1/users/me/threads/{thread['id']}/turns", json=turn, headers=headers
    )

    _refused_at(response, "context", field)
    messages = await client.get(f"/v1/users/me/threads/{thread['id']}/messages", headers=headers)
    assert messages.json()["items"] == []


@pytest.mark.parametrize("value", NOT_A_NUMBER)
async def test_a_confidence_that_is_not_a_json_number_stores_and_changes_nothing(
    client: AsyncClient, settings: Settings, tenant: str, value: Any
) -> None:
    headers = bearer(settings, tenant, "ada")
    kept = await client.post(
        "/v1/users/me/memories", json={"text": "aisle seat", "confidence": 0.25}, headers=headers
    )
    memory = kept.json()

    created = await client.post(
        "/v1/users/me/memories", json={"text": "window seat", "confidence": value}, headers=headers
    )
    patched = await client.patch(
        f"/v1/users/me/memories/{memory['id']}", json={"confidence": value}, headers=headers
    )
    keyed = await client.put(
        "/v1/users/me/keyed-memories?kind=semantic&key=seat",
        json={"text": "middle seat", "confidence": value},
        headers=headers,
    )

    for response in (created, patched, keyed):
        _refused_at(response, "confidence")
    listed = (await client.get("/v1/users/me/memories", headers=headers)).json()["items"]
    assert [(m["text"], m["confidence"]) for m in listed] == [("aisle seat", 0.25)]


async def test_plain_json_numbers_are_accepted_and_an_integer_where_a_number_is_asked(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    admin = bearer(settings, tenant, "root", admin=True)
    policy = {"episodic_days": 30, "messages_days": 90, "summaries_days": None}
    assert (await client.put("/v1/admin/retention", headers=admin, json=policy)).json() == policy
    created = await client.post(
        "/v1/users/me/memories", json={"text": "aisle seat", "confidence": 1}, headers=headers
    )
    assert created.status_code == 201 and created.json()["confidence"] == 1.0
    search = {
        "query": "seat",
        "limit": 5,
        "fusion": "rrf",
        "rrf_k": 60,
        "recency_weight": 0,
        "mmr_lambda": 1,
    }
    found = await client.post("/v1/users/me/memories/search", json=search, headers=headers)
    assert [hit["memory"]["text"] for hit in found.json()["hits"]] == ["aisle seat"]
    context = {"query": "seat", "budget_tokens": 500, "k_user": 2, "mmr_lambda": 0.5}
    block = await client.post("/v1/users/me/context", json=context, headers=headers)
    assert block.status_code == 200 and block.json()["budget_tokens"] == 500


async def test_a_query_strings_number_is_still_read_from_its_text(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    for text in ("one", "two"):
        await client.post("/v1/users/me/memories", json={"text": text}, headers=headers)
    page = await client.get("/v1/users/me/memories", params={"limit": "1"}, headers=headers)
    assert page.status_code == 200 and len(page.json()["items"]) == 1


SEAT = {"query": "seat"}


@pytest.mark.parametrize(
    ("tool", "arguments", "argument", "value"),
    [
        *[("recall", SEAT, "limit", value) for value in NOT_AN_INTEGER],
        *[("list_memories", {}, "limit", value) for value in NOT_AN_INTEGER],
        *[("get_context", SEAT, "budget_tokens", value) for value in (True, "500", 500.0)],
    ],
)
async def test_an_mcp_number_argument_that_is_not_a_json_number_is_a_tool_error(
    client: AsyncClient,
    settings: Settings,
    tenant: str,
    tool: str,
    arguments: dict[str, Any],
    argument: str,
    value: Any,
) -> None:
    headers = bearer(settings, tenant, "ada")
    result = await call_tool(client, headers, tool, {**arguments, argument: value})
    assert result["isError"]
    assert result["structuredContent"]["code"] == "VALIDATION_FAILED"
    accepted = 500 if argument == "budget_tokens" else 5
    assert not (await call_tool(client, headers, tool, {**arguments, argument: accepted}))[
        "isError"
    ]


def _fields_of_type(model: type[BaseModel], path: str, *kinds: str) -> list[tuple[str, Any]]:
    """Each field under `model` (nested models included) whose JSON schema is of one of
    `kinds` (`integer`, `number`, `boolean`), with its type and constraints as one annotation."""
    found: list[tuple[str, Any]] = []
    for name, info in model.model_fields.items():
        annotation = info.annotation
        rule: Any = Annotated[(annotation, *info.metadata)] if info.metadata else annotation
        nested = _models_in(annotation)
        if nested:
            for inner in nested:
                found += _fields_of_type(inner, f"{path}.{name}", *kinds)
            continue
        schema = TypeAdapter(rule).json_schema()
        types_ = {schema.get("type"), *(option.get("type") for option in schema.get("anyOf", []))}
        if types_ & set(kinds):
            found.append((f"{path}.{name}", rule))
    return found


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if get_origin(annotation) in (list, Union, types.UnionType):
        return [model for arg in get_args(annotation) for model in _models_in(arg)]
    return []


def _request_models(app: FastAPI) -> list[Any]:
    """Every request body's model and every MCP tool's argument model."""
    bodies = {
        route.body_field.field_info.annotation
        for route in api_routes(app.routes)
        if route.body_field is not None
    }
    server = build_mcp_server(lambda _ctx: None)  # type: ignore[arg-type,return-value]
    tools = [tool.fn_metadata.arg_model for tool in server._tool_manager.list_tools()]
    return [*bodies, *tools]


def test_every_number_a_body_or_tool_takes_is_a_json_number(app: FastAPI) -> None:
    """A body or tool argument added later is held to the same rule: no number field of any
    request body or MCP tool reads `true` or `"1"` as 1."""
    fields = [
        field
        for model in _request_models(app)
        for inner in _models_in(model)
        for field in _fields_of_type(inner, inner.__name__, "integer", "number")
    ]
    assert len(fields) > 10
    coerced = []
    for where, rule in fields:
        for value in (True, "1"):
            try:
                TypeAdapter(rule).validate_python(value)
            except ValidationError:
                continue
            coerced.append((where, value))
    assert coerced == []


def test_every_boolean_a_body_or_tool_takes_is_a_json_boolean(app: FastAPI) -> None:
    """No boolean field of a request body or MCP tool reads `1`, `"yes"` or `"true"` as true
    (`needs_review: "yes"` was stored as true)."""
    fields = [
        field
        for model in _request_models(app)
        for inner in _models_in(model)
        for field in _fields_of_type(inner, inner.__name__, "boolean")
    ]
    assert len(fields) >= 3
    coerced = []
    for where, rule in fields:
        for value in (1, "yes", "true"):
            try:
                TypeAdapter(rule).validate_python(value)
            except ValidationError:
                continue
            coerced.append((where, value))
    assert coerced == []
