"""The MCP server at /mcp, driven by the MCP SDK's own client against a live server."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextResourceContents

from benchmarks.server import RunningServer
from service.config import Settings
from tests.conftest import bearer
from tests.secret_samples import SAMPLES

TOOLS = {"remember", "recall", "get_context", "forget", "update_profile", "list_memories"}


@asynccontextmanager
async def mcp_client(server: RunningServer, headers: dict[str, str]) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers=headers, timeout=30.0)
    transport = streamable_http_client(f"{server.base_url}/mcp", http_client=http)
    async with http, Client(transport) as c:
        yield c


async def assert_refused(server: RunningServer, headers: dict[str, str], match: str) -> None:
    """The SDK client cannot even list the tools: the server answered with an HTTP error
    (the SDK reports a 404 as "Not Found", a 401 as an "error response")."""
    with pytest.raises(ExceptionGroup) as caught:
        async with mcp_client(server, headers) as client:
            await client.list_tools()
    assert caught.group_contains(MCPError, match=match, depth=None)


def structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    content: dict[str, Any] = result.structured_content
    return content


def tool_problem(result: CallToolResult) -> dict[str, Any]:
    """The tool error's problem document, the same in text and structure."""
    assert result.is_error
    assert result.structured_content is not None
    text = result.content[0]
    assert json.loads(getattr(text, "text", "")) == result.structured_content
    problem: dict[str, Any] = result.structured_content
    return problem


async def rest_memories(server: RunningServer, headers: dict[str, str]) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=server.base_url, headers=headers) as rest:
        response = await rest.get("/v1/users/me/memories")
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def test_every_tool_is_offered_with_a_description(
    live_server: RunningServer, settings: Settings, tenant: str
) -> None:
    async with mcp_client(live_server, bearer(settings, tenant, "u1")) as client:
        listed = (await client.list_tools()).tools
    assert {tool.name for tool in listed} == TOOLS
    for tool in listed:
        assert tool.description and len(tool.description) > 60, tool.name
        assert tool.input_schema["type"] == "object"


async def test_remember_recall_list_and_forget_round_trip(
    live_server: RunningServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    async with mcp_client(live_server, headers) as client:
        written = structured(
            await client.call_tool(
                "remember",
                {"text": "Ada keeps a tortoise named Sheldon.", "category": "pets"},
            )
        )
        assert written == {"id": written["id"], "duplicate": False}

        hits = structured(await client.call_tool("recall", {"query": "what pet does Ada have"}))
        [hit] = hits["hits"]
        assert hit["id"] == written["id"] and hit["score"] > 0
        assert hit["text"] == "Ada keeps a tortoise named Sheldon."
        assert (hit["kind"], hit["category"], hit["scope"]) == ("semantic", "pets", "user")

        page = structured(await client.call_tool("list_memories", {"limit": 5}))
        assert [m["id"] for m in page["items"]] == [written["id"]]

        gone = structured(await client.call_tool("forget", {"memory_id": written["id"]}))
        assert gone == {"deleted": written["id"]}
        page = structured(await client.call_tool("list_memories", {}))
        assert page["items"] == []
    # The REST API sees the same data: the MCP tools are not a second store.
    assert await rest_memories(live_server, headers) == []


async def test_get_context_returns_the_token_budgeted_block(
    live_server: RunningServer, settings: Settings, tenant: str
) -> None:
    async with mcp_client(live_server, bearer(settings, tenant, "ben")) as client:
        structured(await client.call_tool("remember", {"text": "Ben is learning the cello."}))
        structured(
            await client.call_tool(
                "update_profile",
                {"operations": [{"op": "add", "path": "/timezone", "value": "Europe/Paris"}]},
            )
        )
        result = await client.call_tool(
            "get_context", {"query": "which instrument does Ben play?", "budget_tokens": 400}
        )
    body = structured(result)
    block = getattr(result.content[0], "text", "")
    assert block == body["text"]
    assert "cello" in block and "Europe/Paris" in block
    assert body["budget_tokens"] == 400 and 0 < body["token_count"] <= 400


async def test_update_profile_patches_and_the_profile_resource_shows_it(
    live_server: RunningServer, settings: Settings, tenant: str
) -> None:
    async with mcp_client(live_server, bearer(settings, tenant, "cy")) as client:
        result = structured(
            await client.call_tool(
                "update_profile",
                {
                    "operations": [
                        {"op": "add", "path": "/language", "value": "fr"},
                        {"op": "add", "path": "/role", "value": "editor"},
                    ]
                },
            )
        )
        assert result["changed"] is True
        assert result["profile"]["language"] == "fr"
        read = await client.read_resource("mneme://users/me/profile")
        [contents] = read.contents
        assert isinstance(contents, TextResourceContents)
        profile = json.loads(contents.text)
        assert profile["profile"]["language"] == "fr" and profile["profile"]["role"] == "editor"


async def test_procedures_resource_shows_the_standing_instructions(
    live_server: RunningServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "dee")
    async with httpx.AsyncClient(base_url=live_server.base_url, headers=headers) as rest:
        response = await rest.put("/v1/users/me/procedures", json={"style": "Answer briefly."})
        assert response.status_code == 200, response.text
    async with mcp_client(live_server, headers) as client:
        read = await client.read_resource("mneme://users/me/procedures")
        [contents] = read.contents
        assert isinstance(contents, TextResourceContents)
        assert json.loads(contents.text)["style"]["text"] == "Answer briefly."
        templates = (await client.list_resource_templates()).resource_templates
        assert {t.uri_template for t in templates} == {
            "mneme://users/{user_id}/profile",
            "mneme://users/{user_id}/procedures",
        }


async def test_a_client_without_a_valid_token_is_refused(
    live_server: RunningServer, settings: Settings, tenant: str
) -> None:
    await assert_refused(live_server, {}, "error response")
    await assert_refused(live_server, {"Authorization": "Bearer not-a-token"}, "error response")
    # On the wire: the REST API's own 401 problem, nothing served.
    async with httpx.AsyncClient(base_url=live_server.base_url) as raw:
        response = await raw.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Accept": "application/json, text/event-stream"},
        )
    assert response.status_code == 401
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["code"] == "UNAUTHENTICATED"
    assert response.headers["www-authenticate"].startswith("Bearer")


async def test_a_user_cannot_reach_another_users_memories(
    live_server: RunningServer, settings: Settings, tenant: str
) -> None:
    alice = bearer(settings, tenant, "alice")
    async with mcp_client(live_server, alice) as client:
        secret = structured(await client.call_tool("remember", {"text": "Alice's locker is 42."}))

    bob = bearer(settings, tenant, "bob")
    async with mcp_client(live_server, bob) as client:
        problem = tool_problem(await client.call_tool("forget", {"memory_id": secret["id"]}))
        assert problem["code"] == "NOT_FOUND" and problem["status"] == 404
        hits = structured(await client.call_tool("recall", {"query": "locker 42"}))
        assert hits["hits"] == []
        with pytest.raises(MCPError, match="NOT_FOUND"):
            await client.read_resource("mneme://users/alice/profile")
    # Naming alice in the header does not help an end user: the connection is refused (404).
    await assert_refused(live_server, {**bob, "X-Mneme-User": "alice"}, "Not Found")
    # Nor does another tenant's token, even for a user with the same id.
    stranger = bearer(settings, "t-" + uuid.uuid4().hex[:12], "alice")
    async with mcp_client(live_server, stranger) as c:
        problem = tool_problem(await c.call_tool("forget", {"memory_id": secret["id"]}))
        assert problem["code"] == "NOT_FOUND"
    assert [m["id"] for m in await rest_memories(live_server, alice)] == [secret["id"]]


async def test_a_service_credential_acts_for_the_user_it_names(
    live_server: RunningServer, settings: Settings, tenant: str
) -> None:
    service = bearer(settings, tenant, "agent-backend", service=True)
    async with mcp_client(live_server, {**service, "X-Mneme-User": "erin"}) as client:
        written = structured(await client.call_tool("remember", {"text": "Erin runs marathons."}))
    erin = bearer(settings, tenant, "erin")
    assert [m["id"] for m in await rest_memories(live_server, erin)] == [written["id"]]
    # Without naming a user a service has no `me`: refused like the REST API's /users/me.
    async with httpx.AsyncClient(base_url=live_server.base_url, headers=service) as raw:
        response = await raw.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Accept": "application/json, text/event-stream"},
        )
    assert response.status_code == 404
    assert response.json()["code"] == "NOT_FOUND"


async def test_bad_arguments_are_tool_errors_with_the_problem_code_and_write_nothing(
    live_server: RunningServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "fay")
    async with mcp_client(live_server, headers) as client:
        wrong_kind = tool_problem(
            await client.call_tool("remember", {"text": "x", "kind": "dream"})
        )
        assert wrong_kind["code"] == "VALIDATION_FAILED"
        assert ["arguments", "kind"] in [e["loc"] for e in wrong_kind["errors"]]

        bad_category = tool_problem(
            await client.call_tool("remember", {"text": "Likes tea.", "category": "Not Valid!"})
        )
        assert bad_category["code"] == "VALIDATION_FAILED"

        for said in ("My SSN is 123-45-6789.", SAMPLES["aws_secret_access_key"].text):
            secret = tool_problem(await client.call_tool("remember", {"text": said}))
            assert secret["code"] == "SECRET_REFUSED"
            # Located at the tool's argument, not where a REST body would hold it.
            assert [e["loc"] for e in secret["errors"]] == [["arguments", "text"]]
        secret_metadata = tool_problem(
            await client.call_tool(
                "remember", {"text": "Has a key.", "metadata": {"key": SAMPLES["jwt"].text}}
            )
        )
        assert secret_metadata["code"] == "SECRET_REFUSED"
        assert [e["loc"] for e in secret_metadata["errors"]] == [["arguments", "metadata", "key"]]
        profile_secret = tool_problem(
            await client.call_tool(
                "update_profile",
                {
                    "operations": [
                        {"op": "add", "path": "/aws", "value": SAMPLES["jwt"].text},
                    ]
                },
            )
        )
        assert profile_secret["code"] == "SECRET_REFUSED"
        assert profile_secret["errors"][0]["type"] == "credential_refused"

        not_an_id = tool_problem(await client.call_tool("forget", {"memory_id": "nope"}))
        assert not_an_id["code"] == "VALIDATION_FAILED"

        # A cursor the service refuses names the tool's argument, not a REST query string.
        forged = tool_problem(await client.call_tool("list_memories", {"cursor": "WyJ4Il0"}))
        assert forged["code"] == "VALIDATION_FAILED"
        assert [e["loc"] for e in forged["errors"]] == [["arguments", "cursor"]]

        bad_patch = tool_problem(
            await client.call_tool(
                "update_profile",
                {
                    "operations": [
                        {"op": "add", "path": "/city", "value": "Lyon"},
                        {"op": "replace", "path": "/missing", "value": 1},
                    ]
                },
            )
        )
        assert bad_patch["code"] == "PATCH_FAILED"
        bad_op = tool_problem(
            await client.call_tool("update_profile", {"operations": [{"op": "move"}]})
        )
        assert bad_op["code"] == "VALIDATION_FAILED"
        assert all(e["loc"][:3] == ["arguments", "operations", 0] for e in bad_op["errors"])

        assert structured(await client.call_tool("list_memories", {}))["items"] == []
    async with httpx.AsyncClient(base_url=live_server.base_url, headers=headers) as rest:
        profile = (await rest.get("/v1/users/me/profile")).json()
    assert "city" not in profile["profile"] and profile["version"] == 0


async def test_an_argument_no_database_can_store_is_a_tool_error_the_client_reads(
    live_server: RunningServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "gus")
    async with mcp_client(live_server, headers) as client:
        refused = tool_problem(await client.call_tool("remember", {"text": "nul \x00 here"}))
    assert refused["code"] == "VALIDATION_FAILED"
    assert refused["errors"] == [
        {"loc": ["arguments", "text"], "msg": refused["detail"], "type": "nul_character"}
    ]
    assert await rest_memories(live_server, headers) == []


async def test_reading_another_users_resource_is_a_not_found_error_the_client_reads(
    live_server: RunningServer, settings: Settings, tenant: str
) -> None:
    async with mcp_client(live_server, bearer(settings, tenant, "hal")) as client:
        with pytest.raises(MCPError) as caught:
            await client.read_resource("mneme://users/ivy/procedures")
    assert caught.value.code == -32602
    assert caught.value.message.startswith("NOT_FOUND: ")
    assert caught.value.data["code"] == "NOT_FOUND"


async def test_mcp_offers_no_event_stream_a_get_is_refused_at_once(
    live_server: RunningServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "u1") | {"Accept": "text/event-stream"}
    async with httpx.AsyncClient(base_url=live_server.base_url, timeout=10.0) as http:
        response = await http.get("/mcp", headers=headers)
    assert response.status_code == 405, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.headers["allow"] == "POST"
    # The SDK's client, which opens that stream after initializing, still works without it.
    async with mcp_client(live_server, bearer(settings, tenant, "u1")) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS


@pytest.mark.parametrize("method", ["DELETE", "PUT", "GET"])
async def test_mcp_serves_only_post_and_says_so_in_allow(
    live_server: RunningServer, settings: Settings, tenant: str, method: str
) -> None:
    headers = bearer(settings, tenant, "u1")
    async with httpx.AsyncClient(base_url=live_server.base_url, timeout=10.0) as http:
        response = await http.request(method, "/mcp", headers=headers)
    assert response.status_code == 405, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["code"] == "METHOD_NOT_ALLOWED"
    # A stateless server has no session for a DELETE to end: it is not advertised either.
    assert response.headers["allow"] == "POST"
