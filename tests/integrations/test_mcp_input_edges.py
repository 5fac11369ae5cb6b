"""MCP tool arguments are held to the API's input rules, in process (JSON-RPC over the
stateless `/mcp` endpoint, no server process): a refused argument is a tool error with a
problem document and stores nothing; a date at the calendar's edge is answered."""

from __future__ import annotations

from typing import Any

import pytest
from httpx import AsyncClient

from service.config import Settings
from tests.conftest import bearer

MCP_HEADERS = {"accept": "application/json, text/event-stream"}


async def call_tool(
    client: AsyncClient, headers: dict[str, str], name: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    """The result of one `tools/call` (structured content and whether it is an error)."""
    response = await client.post(
        "/mcp",
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        },
        headers={**headers, **MCP_HEADERS},
    )
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()["result"]
    return result


async def rest_memories(client: AsyncClient, headers: dict[str, str]) -> list[Any]:
    response = await client.get("/v1/users/me/memories", headers=headers)
    assert response.status_code == 200
    items: list[Any] = response.json()["items"]
    return items


@pytest.mark.parametrize(
    ("question", "event_at"),
    [
        ("what happened on 9999-12-31", "9999-12-31T12:00:00Z"),
        ("The deed is dated 1 January 0001", "0001-01-01T05:00:00Z"),
    ],
)
async def test_recall_and_get_context_answer_a_date_at_the_calendars_edge(
    client: AsyncClient, settings: Settings, tenant: str, question: str, event_at: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    memory = {"text": "the deed of the house", "event_at": event_at}
    assert (await client.post("/v1/users/me/memories", json=memory, headers=headers)).is_success

    recalled = await call_tool(client, headers, "recall", {"query": question})
    context = await call_tool(client, headers, "get_context", {"query": question})

    assert not recalled["isError"] and not context["isError"]
    [hit] = recalled["structuredContent"]["hits"]
    assert hit["text"] == memory["text"]
    assert hit["event_at"].startswith(event_at[:10])
    # The tool shows no scores; the same search over REST shows the date was understood.
    searched = await client.post(
        "/v1/users/me/memories/search", json={"query": question}, headers=headers
    )
    assert searched.json()["hits"][0]["scores"]["date_score"] > 0


@pytest.mark.parametrize("tool", ["recall", "get_context"])
@pytest.mark.parametrize("query", ["\u200b", "\ufeff", " \u2060 "])
async def test_a_query_of_invisible_characters_is_a_tool_error(
    client: AsyncClient, settings: Settings, tenant: str, tool: str, query: str
) -> None:
    result = await call_tool(client, bearer(settings, tenant, "ada"), tool, {"query": query})
    assert result["isError"]
    assert result["structuredContent"]["code"] == "VALIDATION_FAILED"


async def test_remember_holds_metadata_to_the_free_form_json_rules(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    too_large = {"notes": "x" * 70_000}
    result = await call_tool(
        client, headers, "remember", {"text": "likes tea", "metadata": too_large}
    )
    assert result["isError"]
    assert result["structuredContent"]["code"] == "VALIDATION_FAILED"
    assert "65536 bytes" in str(result["structuredContent"])

    overflowing = await client.post(
        "/mcp",
        content=b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": '
        b'"remember", "arguments": {"text": "likes tea", "metadata": {"x": 1e400}}}}',
        headers={**headers, **MCP_HEADERS, "content-type": "application/json"},
    )
    assert overflowing.status_code == 200
    refused = overflowing.json()["result"]
    assert refused["isError"]
    assert refused["structuredContent"]["errors"][0]["type"] == "finite_number"
    assert await rest_memories(client, headers) == []
