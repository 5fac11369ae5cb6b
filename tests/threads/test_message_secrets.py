"""A message is stored as sent, and the window replays its text, author name, tool calls and
metadata with secrets masked."""

from __future__ import annotations

from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from service.kit.secrets import MASK
from tests.conftest import bearer
from tests.fixtures.factories import start_thread

PASSWORD = "hunter2hunter2"
API_KEY = "sk-abcdefghijklmnopqrstuvwxyz0123456789ABCD"
LOGIN_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "login", "arguments": f'{{"password": "{PASSWORD}"}}'},
}


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
    # An author and metadata holding secrets are replayed masked too.
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
