"""How `/mcp` answers what it refuses, at each level: an HTTP problem before any JSON-RPC
message is read, a JSON-RPC error with the problem as `data` for a message it cannot act on,
and a tool error for a tool call whose arguments it refuses (in process, over JSON-RPC); and
what a call that met a database outage or conflict answers: the REST API's 503 problem."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable
from typing import Any

import asyncpg
import pytest
from httpx import AsyncClient, Response
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.admin.repository import AdminRepository
from service.config import Settings
from service.db import create_sessionmaker, tenant_transaction
from service.db_outage import CONFLICT_RETRY_AFTER_SECONDS, RETRY_AFTER_SECONDS
from service.embedded_postgres import SUPERUSER, EmbeddedCluster
from service.memories.search import MemorySearch
from tests.conftest import TEST_DATABASE, bearer
from tests.fixtures.factories import memories, remember
from tests.fixtures.locks import waiting_locks

JSON_RPC_HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
}


async def post_mcp(
    client: AsyncClient, headers: dict[str, str], body: bytes, **extra: str
) -> Response:
    return await client.post("/mcp", content=body, headers={**headers, **JSON_RPC_HEADERS, **extra})


def problem(response: Response, status: int) -> dict[str, Any]:
    """The response's problem document, checked to be one with `status`."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["status"] == status and body["instance"] == "/mcp"
    return body


def tool_call(name: str, arguments: str) -> bytes:
    """A `tools/call` request, its arguments given as raw JSON text (to send what a Python
    string cannot hold, such as a lone surrogate escape)."""
    return (
        '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", '
        f'"params": {{"name": "{name}", "arguments": {arguments}}}}}'
    ).encode()


# --- HTTP level -----------------------------------------------------------------------------


async def test_a_body_sent_as_another_media_type_is_a_415_problem(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    response = await post_mcp(
        client,
        bearer(settings, tenant, "ada"),
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}',
        **{"content-type": "text/plain"},
    )
    body = problem(response, 415)
    assert body["code"] == "UNSUPPORTED_MEDIA_TYPE"
    assert "Content-Type: application/json" in body["detail"]
    assert response.headers["accept-post"] == "application/json"


async def test_a_client_that_does_not_accept_json_gets_a_406_problem(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    response = await post_mcp(
        client,
        bearer(settings, tenant, "ada"),
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}',
        accept="text/html",
    )
    body = problem(response, 406)
    assert body["code"] == "NOT_ACCEPTABLE"
    assert "application/json" in body["detail"]


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        (b"[]", {}),
        (b'[{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]', {}),
        (b'{"jsonrpc": "1.0", "id": 1, "method": "tools/list"}', {}),
        (b'{"id": 1}', {}),
        (b'"tools/list"', {}),
        # The SDK's own refusal (the newest protocol's transport takes no posted responses),
        # answered as the same problem rather than as the SDK's JSON-RPC error.
        (b'{"jsonrpc": "2.0", "id": 1, "result": {}}', {"mcp-protocol-version": "2026-07-28"}),
    ],
    ids=["empty-batch", "batch", "jsonrpc-1.0", "no-method", "a-string", "sdk-refusal"],
)
async def test_a_body_that_is_not_one_json_rpc_message_is_a_400_problem(
    client: AsyncClient, settings: Settings, tenant: str, body: bytes, headers: dict[str, str]
) -> None:
    response = await post_mcp(client, bearer(settings, tenant, "ada"), body, **headers)
    refused = problem(response, 400)
    assert refused["code"] == "BAD_REQUEST"
    assert "one JSON-RPC 2.0 message" in refused["detail"]
    # Nothing of the library that parsed it: no validation dump, no links, no versions.
    assert "pydantic" not in response.text and "http" not in refused["detail"]


@pytest.mark.parametrize("body", [b"{not json", b'{"jsonrpc": "2.0", "id": 1', b"\xff\xfe"])
async def test_a_body_that_is_not_json_is_the_rest_apis_422_problem(
    client: AsyncClient, settings: Settings, tenant: str, body: bytes
) -> None:
    response = await post_mcp(client, bearer(settings, tenant, "ada"), body)
    refused = problem(response, 422)
    assert refused["code"] == "VALIDATION_FAILED"
    assert refused["errors"][0]["type"] == "json_invalid"

    # The answer a REST route gives the same body.
    rest = await client.post(
        "/v1/users/me/memories",
        content=body,
        headers={**bearer(settings, tenant, "ada"), "content-type": "application/json"},
    )
    assert rest.status_code == 422
    assert rest.json()["errors"][0]["type"] == "json_invalid"


# --- tool arguments that break the input rules --------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments", "loc", "kind"),
    [
        ("remember", '{"text": "nul \\u0000 x"}', ["arguments", "text"], "nul_character"),
        ("remember", '{"text": "lone \\ud800"}', ["arguments", "text"], "lone_surrogate"),
        ("recall", '{"query": "lone \\udfff"}', ["arguments", "query"], "lone_surrogate"),
        ("get_context", '{"query": "nul \\u0000"}', ["arguments", "query"], "nul_character"),
        (
            "update_profile",
            '{"operations": [{"op": "add", "path": "/n", "value": "a\\u0000b"}]}',
            ["arguments", "operations", 0, "value"],
            "nul_character",
        ),
        (
            "remember",
            '{"text": "likes tea", "metadata": {"x": 1e400}}',
            ["arguments", "metadata", "x"],
            "finite_number",
        ),
    ],
    ids=["nul", "surrogate", "recall", "get_context", "profile-value", "overflow"],
)
async def test_arguments_that_break_the_input_rules_are_a_tool_error_and_store_nothing(
    client: AsyncClient,
    settings: Settings,
    tenant: str,
    name: str,
    arguments: str,
    loc: list[str | int],
    kind: str,
) -> None:
    headers = bearer(settings, tenant, "ada")
    response = await post_mcp(client, headers, tool_call(name, arguments))

    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["id"] == 7
    result = answer["result"]
    assert result["isError"] is True
    refused = result["structuredContent"]
    # The problem the REST API answers for the same value, located at the argument.
    assert refused["code"] == "VALIDATION_FAILED" and refused["status"] == 422
    assert refused["errors"] == [{"loc": loc, "msg": refused["detail"], "type": kind}]
    assert result["content"][0]["type"] == "text"
    assert '"VALIDATION_FAILED"' in result["content"][0]["text"]

    memories = await client.get("/v1/users/me/memories", headers=headers)
    assert memories.json()["items"] == []
    profile = await client.get("/v1/users/me/profile", headers=headers)
    assert profile.json()["version"] == 0


@pytest.mark.parametrize(
    "body",
    [
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", '
        b'"params": {"name": "remem\\u0000ber", "arguments": {"text": "x"}}}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "resources/read", '
        b'"params": {"uri": "mneme://users/me/pro\\ud800file"}}',
        b'{"jsonrpc": "2.0", "id": "\\u0000", "method": "tools/call", '
        b'"params": {"name": "remember", "arguments": {"text": "nul \\u0000"}}}',
    ],
    ids=["tool-name", "resource-uri", "request-id"],
)
async def test_a_refused_value_outside_a_tools_arguments_is_the_rest_apis_422_problem(
    client: AsyncClient, settings: Settings, tenant: str, body: bytes
) -> None:
    response = await post_mcp(client, bearer(settings, tenant, "ada"), body)
    refused = problem(response, 422)
    assert refused["code"] == "VALIDATION_FAILED"
    assert refused["errors"][0]["type"] in {"nul_character", "lone_surrogate"}


async def test_the_rest_api_still_refuses_the_same_values_with_a_422(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    response = await client.post(
        "/v1/users/me/memories",
        content=b'{"text": "nul \\u0000 x"}',
        headers={**bearer(settings, tenant, "ada"), "content-type": "application/json"},
    )
    assert response.status_code == 422
    assert response.json()["errors"] == [
        {"loc": ["body", "text"], "msg": response.json()["detail"], "type": "nul_character"}
    ]


# --- JSON-RPC level -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "loc"),
    [
        ('{"name": "remember", "arguments": "not an object"}', ["params", "arguments"]),
        ('{"name": 123, "arguments": {}}', ["params", "name"]),
        (None, ["params"]),
    ],
    ids=["arguments-not-an-object", "name-not-text", "no-params"],
)
async def test_a_malformed_tool_call_is_invalid_params_saying_what_is_wrong(
    client: AsyncClient, settings: Settings, tenant: str, params: str | None, loc: list[str]
) -> None:
    member = f', "params": {params}' if params is not None else ""
    body = f'{{"jsonrpc": "2.0", "id": 3, "method": "tools/call"{member}}}'.encode()
    response = await post_mcp(client, bearer(settings, tenant, "ada"), body)

    assert response.status_code == 200, response.text
    error = response.json()["error"]
    assert error["code"] == -32602
    assert error["message"].startswith("VALIDATION_FAILED: ")
    assert error["data"]["code"] == "VALIDATION_FAILED"
    assert loc in [e["loc"] for e in error["data"]["errors"]]


async def test_reading_another_users_resource_is_not_found_not_an_internal_error(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    body = (
        b'{"jsonrpc": "2.0", "id": 4, "method": "resources/read", '
        b'"params": {"uri": "mneme://users/bob/profile"}}'
    )
    response = await post_mcp(client, bearer(settings, tenant, "ada"), body)

    assert response.status_code == 200, response.text
    error = response.json()["error"]
    # Invalid params: the code the MCP SDK gives an unknown resource too.
    assert error["code"] == -32602
    assert error["message"] == "NOT_FOUND: No user 'bob' that this connection may address."
    assert error["data"]["code"] == "NOT_FOUND" and error["data"]["status"] == 404


async def test_calling_a_tool_there_is_not_is_invalid_params_with_the_not_found_problem(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    response = await post_mcp(
        client, bearer(settings, tenant, "ada"), tool_call("nosuchtool", '{"text": "x"}')
    )

    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["id"] == 7 and "result" not in answer
    error = answer["error"]
    assert error["code"] == -32602
    assert error["message"] == (
        "NOT_FOUND: No tool 'nosuchtool'; the tools are remember, recall, get_context, "
        "forget, update_profile, list_memories."
    )
    assert error["data"]["code"] == "NOT_FOUND" and error["data"]["status"] == 404
    assert error["data"]["detail"] == error["message"].removeprefix("NOT_FOUND: ")


async def test_reading_a_resource_there_is_not_is_invalid_params_with_the_not_found_problem(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    body = (
        b'{"jsonrpc": "2.0", "id": 4, "method": "resources/read", '
        b'"params": {"uri": "mneme://users/me/secrets"}}'
    )
    response = await post_mcp(client, bearer(settings, tenant, "ada"), body)

    assert response.status_code == 200, response.text
    error = response.json()["error"]
    assert error["code"] == -32602
    assert error["message"] == (
        "NOT_FOUND: No resource 'mneme://users/me/secrets'; the resources are "
        "mneme://users/{user_id}/profile, mneme://users/{user_id}/procedures."
    )
    assert error["data"]["code"] == "NOT_FOUND" and error["data"]["status"] == 404


@pytest.mark.parametrize(
    ("name", "arguments", "unknown"),
    [
        ("remember", '{"text": "Ada likes tea.", "categroy": "preference"}', "categroy"),
        ("remember", '{"text": "ok", "unknown": 1}', "unknown"),
        ("recall", '{"query": "tea", "user_id": "bob"}', "user_id"),
        ("list_memories", '{"limit": 5, "scope": "org"}', "scope"),
    ],
    ids=["misspelled", "unknown", "recall", "list_memories"],
)
async def test_an_argument_a_tool_does_not_take_is_refused_by_name_and_nothing_is_stored(
    client: AsyncClient,
    settings: Settings,
    tenant: str,
    name: str,
    arguments: str,
    unknown: str,
) -> None:
    headers = bearer(settings, tenant, "ada")
    response = await post_mcp(client, headers, tool_call(name, arguments))

    result = tool_result(response)
    assert result["isError"] is True
    refused = result["structuredContent"]
    # The REST API's answer to a body field it does not know, at the argument.
    assert refused["code"] == "VALIDATION_FAILED" and refused["status"] == 422
    assert refused["errors"] == [
        {
            "loc": ["arguments", unknown],
            "msg": "Extra inputs are not permitted",
            "type": "extra_forbidden",
        }
    ]
    assert await memories(client, headers) == []
    rest = await client.post(
        "/v1/users/me/memories", json={"text": "ok", "categroy": "x"}, headers=headers
    )
    assert rest.json()["errors"] == [
        {
            "loc": ["body", "categroy"],
            "msg": "Extra inputs are not permitted",
            "type": "extra_forbidden",
        }
    ]


async def test_every_tools_input_schema_says_it_takes_no_other_argument(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'
    response = await post_mcp(client, bearer(settings, tenant, "ada"), body)

    tools = tool_result(response)["tools"]
    assert len(tools) == 6
    assert all(tool["inputSchema"]["additionalProperties"] is False for tool in tools)


# --- database failures ----------------------------------------------------------------------

BLOCKED_ON_MEMORY_SQL = """
SELECT pid FROM pg_stat_activity
 WHERE usename = 'mneme_app' AND datname = $1 AND wait_event_type = 'Lock'
"""
"""The service's backends waiting for a lock (the test's lock on `memory`). Asked as the
superuser: other roles see neither another role's statement nor may end it."""


def tool_result(response: Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()["result"]
    return result


async def _terminated_while_blocked(
    call: Awaitable[Response], cluster: EmbeddedCluster, owner_engine: AsyncEngine
) -> Response:
    """`call`'s answer when the database drops its connection mid-statement: the statement
    waits for the test's lock on `memory`, and its backend is then terminated."""
    admin = await asyncpg.connect(
        host=str(cluster.socket_dir), user=SUPERUSER, database=TEST_DATABASE
    )
    try:
        async with owner_engine.connect() as owner:
            await owner.execute(text("LOCK TABLE memory IN ACCESS EXCLUSIVE MODE"))
            calling = asyncio.ensure_future(call)
            await waiting_locks(owner_engine)
            (blocked,) = [
                row["pid"] for row in await admin.fetch(BLOCKED_ON_MEMORY_SQL, TEST_DATABASE)
            ]
            assert await admin.fetchval("SELECT pg_terminate_backend($1)", blocked)
            response = await calling
            await owner.rollback()
    finally:
        await admin.close()
    return response


async def test_a_tool_call_the_database_outage_failed_is_the_rest_apis_503_problem(
    client: AsyncClient,
    cluster: EmbeddedCluster,
    settings: Settings,
    tenant: str,
    owner_engine: AsyncEngine,
) -> None:
    headers = bearer(settings, tenant, "ada")
    recall = tool_call("recall", '{"query": "where does ada live"}')
    assert tool_result(await post_mcp(client, headers, recall))["isError"] is False

    response = await _terminated_while_blocked(
        post_mcp(client, headers, recall), cluster, owner_engine
    )

    result = tool_result(response)
    assert result["isError"] is True
    outage = result["structuredContent"]
    assert outage["code"] == "DATABASE_UNAVAILABLE" and outage["status"] == 503
    assert outage["retry_after_seconds"] == RETRY_AFTER_SECONDS
    assert outage["detail"] == "The database cannot be reached right now; retry shortly."
    assert json.loads(result["content"][0]["text"]) == outage
    # Sent again, it runs.
    assert tool_result(await post_mcp(client, headers, recall))["isError"] is False


async def test_a_resource_read_the_database_outage_failed_carries_the_problem(
    client: AsyncClient,
    cluster: EmbeddedCluster,
    settings: Settings,
    tenant: str,
    owner_engine: AsyncEngine,
) -> None:
    body = (
        b'{"jsonrpc": "2.0", "id": 5, "method": "resources/read", '
        b'"params": {"uri": "mneme://users/me/procedures"}}'
    )
    response = await _terminated_while_blocked(
        post_mcp(client, bearer(settings, tenant, "ada"), body), cluster, owner_engine
    )

    assert response.status_code == 200, response.text
    error = response.json()["error"]
    assert error["code"] == -32603
    assert error["message"].startswith("DATABASE_UNAVAILABLE: ")
    assert error["data"]["code"] == "DATABASE_UNAVAILABLE"
    assert error["data"]["retry_after_seconds"] == RETRY_AFTER_SECONDS


async def test_a_tool_call_rolled_back_for_a_deadlock_is_a_conflict_and_applies_sent_again(
    client: AsyncClient,
    settings: Settings,
    runtime_engine: AsyncEngine,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    # The deadlock of tests/faults/test_database_conflict.py: the test holds the memory's row,
    # the call takes the user's write lock and waits for the row, the test asks for the lock.
    headers = bearer(settings, tenant, "ada")
    memory = await remember(client, headers, text="Ada likes tea.")
    forget = tool_call("forget", json.dumps({"memory_id": memory["id"]}))
    async with tenant_transaction(create_sessionmaker(runtime_engine), tenant) as session:
        await session.execute(
            text("SELECT 1 FROM memory WHERE tenant_id = :t AND id = :id FOR UPDATE"),
            {"t": tenant, "id": memory["id"]},
        )
        calling = asyncio.ensure_future(post_mcp(client, headers, forget))
        await waiting_locks(owner_engine)
        await AdminRepository(session, tenant).lock_user_writes("ada")
        response = await calling

    result = tool_result(response)
    assert result["isError"] is True
    conflict = result["structuredContent"]
    assert conflict["code"] == "DATABASE_CONFLICT" and conflict["status"] == 503
    assert conflict["retry_after_seconds"] == CONFLICT_RETRY_AFTER_SECONDS
    assert [m["id"] for m in await memories(client, headers)] == [memory["id"]]
    again = tool_result(await post_mcp(client, headers, forget))
    assert again["isError"] is False, again
    assert await memories(client, headers) == []


async def test_a_defect_in_a_tool_is_the_rest_apis_internal_error_with_its_trace_id(
    client: AsyncClient,
    settings: Settings,
    tenant: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A defect stands in for any: the search raising what no handler expects.
    async def broken(*_args: Any, **_kwargs: Any) -> None:
        raise RuntimeError("a defect, with a detail no caller must see")

    monkeypatch.setattr(MemorySearch, "search", broken)
    headers = bearer(settings, tenant, "ada")
    response = await post_mcp(client, headers, tool_call("recall", '{"query": "where"}'))

    result = tool_result(response)
    assert result["isError"] is True
    failure = result["structuredContent"]
    assert failure["code"] == "INTERNAL_ERROR" and failure["status"] == 500
    assert (
        failure["detail"] == "An unexpected error occurred; quote the trace id when reporting it."
    )
    assert "a defect" not in result["content"][0]["text"]
    assert re.fullmatch("[0-9a-f]{32}", failure["trace_id"]), failure
    # The operator sees the whole of it in the log.
    logged = [
        r for r in caplog.records if r.getMessage() == "unhandled error in MCP tools/call recall"
    ]
    assert logged and logged[0].exc_info is not None
