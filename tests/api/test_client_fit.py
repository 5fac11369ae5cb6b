"""What SDK generators and their users rely on: the document's shape and the behaviour behind it."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from service.kit.media_type import is_json_media_type
from service.openapi import PUBLIC_PATHS, SHARED_ENUMS
from tests.conftest import as_tenant, assert_problem, bearer

PROBLEM_CONTENT = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}


def operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method, path, operation)
        for path, item in spec["paths"].items()
        for method, operation in item.items()
    ]


def inline_enums(node: Any) -> list[list[Any]]:
    if isinstance(node, list):
        return [found for item in node for found in inline_enums(item)]
    if not isinstance(node, dict):
        return []
    own = [node["enum"]] if "enum" in node else []
    return own + [found for child in node.values() for found in inline_enums(child)]


def test_every_error_is_a_problem_and_every_operation_declares_500_and_default(
    app: FastAPI,
) -> None:
    for method, path, operation in operations(app.openapi()):
        responses = operation["responses"]
        assert {"500", "default"} <= responses.keys(), (method, path)
        for status, response in responses.items():
            if status == "default" or int(status) >= 400:
                assert response["content"] == PROBLEM_CONTENT, (method, path, status)


def test_each_operation_declares_one_request_media_type(app: FastAPI) -> None:
    for method, path, operation in operations(app.openapi()):
        if "requestBody" in operation:
            assert len(operation["requestBody"]["content"]) == 1, (method, path)


def test_domain_enums_and_metadata_are_shared_components(app: FastAPI) -> None:
    spec = app.openapi()
    schemas = spec["components"]["schemas"]
    shared = {name: schemas[name]["enum"] for name in SHARED_ENUMS}
    for name, schema in schemas.items():
        if name not in shared:
            assert not [e for e in inline_enums(schema) if e in shared.values()], name
    assert schemas["MemoryCreate"]["properties"]["kind"]["$ref"].endswith("/MemoryKind")
    assert schemas["MemoryCreate"]["properties"]["metadata"]["$ref"].endswith("/Metadata")
    assert {"$ref": "#/components/schemas/Metadata"} in schemas["MemoryUpdate"]["properties"][
        "metadata"
    ]["anyOf"]


def test_public_endpoints_need_no_token_and_the_rest_need_a_bearer(app: FastAPI) -> None:
    spec = app.openapi()
    assert spec["security"] == [{"HTTPBearer": []}]
    for _, path, operation in operations(spec):
        if path in PUBLIC_PATHS:
            assert operation["security"] == []
        else:
            assert operation.get("security", spec["security"]) == [{"HTTPBearer": []}], path


def test_tags_are_described_and_a_server_is_named(app: FastAPI) -> None:
    spec = app.openapi()
    described = {tag["name"] for tag in spec["tags"] if tag["description"]}
    used = {tag for _, _, operation in operations(spec) for tag in operation["tags"]}
    assert used <= described
    assert spec["servers"][0]["url"].startswith("http")


def test_every_json_request_body_has_an_example(app: FastAPI) -> None:
    spec = app.openapi()
    schemas = spec["components"]["schemas"]
    for method, path, operation in operations(spec):
        for media_type, content in operation.get("requestBody", {}).get("content", {}).items():
            if not is_json_media_type(media_type):
                continue
            schema = content["schema"]
            refs = [schema, *schema.get("anyOf", ())]
            named = [schemas[s["$ref"].rsplit("/", 1)[1]] for s in refs if "$ref" in s]
            assert "examples" in schema or any("examples" in s for s in named), (method, path)


async def test_a_json_body_sent_as_another_media_type_is_a_415_naming_the_one_to_send(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    for content_type in ("text/plain", None):
        sent = {**headers, "content-type": content_type} if content_type else headers
        response = await client.post(
            "/v1/users/me/memories", content=b'{"text": "Likes tea."}', headers=sent
        )
        problem = assert_problem(response, 415, "UNSUPPORTED_MEDIA_TYPE")
        assert "Content-Type: application/json" in problem["detail"]
        assert response.headers["accept-post"] == "application/json"
    listed = await client.get("/v1/users/me/memories", headers=headers)
    assert listed.json()["items"] == []


async def test_a_refused_single_create_locates_the_field_in_the_body_itself(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    past = {"text": "Renew the passport.", "expires_at": "2000-01-01T00:00:00Z"}
    single = await client.post("/v1/users/me/memories", json=past, headers=headers)
    assert assert_problem(single, 422, "VALIDATION_FAILED")["errors"][0]["loc"] == [
        "body",
        "expires_at",
    ]
    batch = await client.post(
        "/v1/users/me/memories/batch", json={"items": [past]}, headers=headers
    )
    assert assert_problem(batch, 422, "VALIDATION_FAILED")["errors"][0]["loc"] == [
        "body",
        "items",
        0,
        "expires_at",
    ]


async def test_a_retried_api_key_creation_mints_no_second_key_and_stores_no_secret(
    client: AsyncClient, settings: Settings, tenant: str, owner_engine: AsyncEngine
) -> None:
    admin = {**bearer(settings, tenant, "root", admin=True), "Idempotency-Key": "key-create-1"}
    first = await client.post("/v1/admin/api-keys", json={"name": "bot"}, headers=admin)
    assert first.status_code == 201, first.text
    retry = await client.post("/v1/admin/api-keys", json={"name": "bot"}, headers=admin)
    assert assert_problem(retry, 409, "API_KEY_ALREADY_CREATED")["key_id"] == first.json()["id"]
    listed = await client.get("/v1/admin/api-keys", headers=admin)
    assert [key["id"] for key in listed.json()["items"]] == [first.json()["id"]]
    async with owner_engine.begin() as connection:
        await as_tenant(connection, tenant)
        stored = (
            await connection.execute(
                text("SELECT response_body::text FROM idempotency_record WHERE tenant_id = :t"),
                {"t": tenant},
            )
        ).scalar_one()
    assert first.json()["key"] not in stored


async def test_a_turn_appends_and_returns_the_next_context_block_in_one_call(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    await client.post(
        "/v1/users/me/memories",
        json={"text": "Prefers window seats on long flights."},
        headers=headers,
    )
    thread = (await client.post("/v1/users/me/threads", json={}, headers=headers)).json()
    turn = await client.post(
        f"/v1/users/me/threads/{thread['id']}/turns",
        json={
            "messages": [{"role": "user", "content": "Book a seat to Lisbon, window please."}],
            "context": {"budget_tokens": 500, "format": "json"},
        },
        headers=headers,
    )
    assert turn.status_code == 201, turn.text
    body = turn.json()
    assert body["items"][0]["content"] == "Book a seat to Lisbon, window please."
    sections = {section["name"]: section for section in body["context"]["sections"]}
    # The block is built after the append: the new turn is already among the recent ones,
    # and the default query (the user's message) found the seat preference.
    assert any("Lisbon" in item["text"] for item in sections["recent"]["items"])
    assert any("window seats" in item["text"] for item in sections["facts"]["items"])
    stored = await client.get(f"/v1/users/me/threads/{thread['id']}/messages", headers=headers)
    assert [m["content"] for m in stored.json()["items"]] == [
        "Book a seat to Lisbon, window please."
    ]


async def test_a_turn_whose_default_context_query_is_empty_is_refused_and_not_stored(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    thread = (await client.post("/v1/users/me/threads", json={}, headers=headers)).json()
    refused = await client.post(
        f"/v1/users/me/threads/{thread['id']}/turns",
        json={"messages": [{"role": "assistant", "content": "   "}]},
        headers=headers,
    )
    problem = assert_problem(refused, 422, "VALIDATION_FAILED")
    assert problem["errors"][0]["loc"] == ["body", "context", "query"]
    stored = await client.get(f"/v1/users/me/threads/{thread['id']}/messages", headers=headers)
    assert stored.json()["items"] == []


async def test_a_retried_turn_is_replayed_not_appended_twice(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    thread = (await client.post("/v1/users/me/threads", json={}, headers=headers)).json()
    url = f"/v1/users/me/threads/{thread['id']}/turns"
    body = {"messages": [{"role": "user", "content": "Hello there"}]}
    keyed = {**headers, "Idempotency-Key": "turn-1"}
    first = await client.post(url, json=body, headers=keyed)
    retry = await client.post(url, json=body, headers=keyed)
    assert retry.status_code == 201 and retry.headers["idempotent-replayed"] == "true"
    assert retry.json() == first.json()
    assert retry.content == first.content  # the same keys in the same order, byte for byte
    stored = await client.get(f"/v1/users/me/threads/{thread['id']}/messages", headers=headers)
    assert len(stored.json()["items"]) == 1


async def test_a_replayed_create_is_the_first_answer_byte_for_byte(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    keyed = {**bearer(settings, tenant, "ada"), "Idempotency-Key": "create-1"}
    body = {"text": "Ada prefers aisle seats", "metadata": {"source": "chat", "a": 1}}
    first = await client.post("/v1/users/me/memories", json=body, headers=keyed)
    assert first.status_code == 201, first.text
    retry = await client.post("/v1/users/me/memories", json=body, headers=keyed)
    assert retry.status_code == 201 and retry.headers["idempotent-replayed"] == "true"
    assert retry.content == first.content
    assert list(retry.json()) == list(first.json())


MAIN_RESPONSES = {
    "create_memory": "201",
    "get_memory": "200",
    "search_memories": "200",
    "delete_memories": "200",
    "build_context": "200",
    "get_profile": "200",
    "create_thread": "201",
    "append_messages": "201",
}


def test_the_main_responses_carry_an_example(app: FastAPI) -> None:
    spec = app.openapi()
    schemas = spec["components"]["schemas"]
    found = {}
    for _, _, operation in operations(spec):
        status = MAIN_RESPONSES.get(operation["operationId"])
        if status is None:
            continue
        schema = operation["responses"][status]["content"]["application/json"]["schema"]
        found[operation["operationId"]] = "examples" in schemas[schema["$ref"].rsplit("/", 1)[1]]
    assert found == dict.fromkeys(MAIN_RESPONSES, True)
