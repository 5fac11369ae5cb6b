"""A message's author name and metadata follow the durable-write policy, as a thread's title and
metadata do (422 `SECRET_REFUSED`, nothing appended); its text and tool calls are stored as
sent, and the window replays all four with secrets masked."""

from __future__ import annotations

from typing import Any

import pytest
from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from service.kit.secrets import MASK
from tests.conftest import assert_problem, bearer
from tests.fixtures.factories import start_thread

PASSWORD = "hunter2hunter2"
API_KEY = "sk-abcdefghijklmnopqrstuvwxyz0123456789ABCD"
LOGIN_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "login", "arguments": f'{{"password": "{PASSWORD}"}}'},
}


@pytest.mark.parametrize(
    ("field", "value", "loc"),
    [
        ("metadata", {"api_key": "anything"}, ["metadata", "api_key"]),
        ("metadata", {"note": f"key {API_KEY}"}, ["metadata", "note"]),
        ("metadata", {"ok": [{"card": "4111 1111 1111 1111"}]}, ["metadata", "ok", 0, "card"]),
        ("name", f"password: {PASSWORD}", ["name"]),
    ],
)
@pytest.mark.parametrize("route", ["messages", "turns"])
async def test_a_message_whose_author_or_metadata_holds_a_secret_is_refused_with_its_batch(
    client: AsyncClient,
    settings: Settings,
    tenant: str,
    field: str,
    value: Any,
    loc: list[str | int],
    route: str,
) -> None:
    headers = bearer(settings, tenant, "ada")
    thread_id = await start_thread(client, headers)
    messages = [
        {"role": "user", "content": "I live in Lisbon."},
        {"role": "assistant", "content": "Noted.", field: value},
    ]

    refused = await client.post(
        f"/v1/users/me/threads/{thread_id}/{route}",
        headers=headers,
        json={"messages": messages},
    )

    body = assert_problem(refused, 422, "SECRET_REFUSED")
    assert body["errors"][0]["loc"] == ["body", "messages", 1, *loc]
    assert PASSWORD not in refused.text and API_KEY not in refused.text
    stored = await client.get(f"/v1/users/me/threads/{thread_id}/messages", headers=headers)
    assert stored.json()["items"] == []


async def test_the_window_replays_a_messages_text_author_tool_calls_and_metadata_masked(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    thread_id = await start_thread(client, headers)
    appended = await client.post(
        f"/v1/users/me/threads/{thread_id}/messages",
        headers=headers,
        json={
            "messages": [
                {"role": "user", "content": f"log me in, my password is {PASSWORD}"},
                {"role": "assistant", "content": "", "tool_calls": [LOGIN_CALL]},
            ]
        },
    )
    assert appended.status_code == 201, appended.text
    # An author and metadata stored before appends refused them are replayed masked too.
    async with owner_engine.begin() as connection:
        await connection.execute(
            text(
                "UPDATE message SET name = :name, metadata = CAST(:metadata AS jsonb) "
                "WHERE tenant_id = :t AND thread_id = :th AND seq = 0"
            ),
            {
                "name": f"password: {PASSWORD}",
                "metadata": f'{{"api_key": "anything", "note": "{API_KEY}", "channel": "web"}}',
                "t": tenant,
                "th": thread_id,
            },
        )

    stored = await client.get(f"/v1/users/me/threads/{thread_id}/messages", headers=headers)
    window = await client.get(f"/v1/users/me/threads/{thread_id}/window", headers=headers)

    # The record keeps what was sent; the window holds none of it.
    assert PASSWORD in stored.text and API_KEY in stored.text
    assert PASSWORD not in window.text and API_KEY not in window.text
    user, assistant = window.json()["messages"]
    assert user["name"] == MASK and user["content"] == f"log me in, my {MASK}"
    assert user["metadata"] == {"api_key": MASK, "note": MASK, "channel": "web"}
    [call] = assistant["tool_calls"]
    assert call["function"]["name"] == "login" and MASK in call["function"]["arguments"]
