"""How `/mcp` answers what it refuses, at each level: an HTTP problem before any JSON-RPC
message is read (in process, over JSON-RPC)."""

from __future__ import annotations

from typing import Any

import pytest
from httpx import AsyncClient, Response

from service.config import Settings
from tests.conftest import bearer

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
