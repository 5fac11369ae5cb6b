"""Import applies the API's secret policy: what a write through the API refuses, an import line
refuses the same way (422 `SECRET_REFUSED`, naming the line, nothing stored); a message's text
and tool calls are imported as the API stores them, as sent, and masked wherever they are
replayed."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from httpx import AsyncClient, Response
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from service.kit.secrets import MASK
from tests.admin.conftest import rows_of, seed_user
from tests.conftest import assert_problem, bearer
from tests.secret_samples import SAMPLES

NDJSON = {"content-type": "application/x-ndjson"}
Change = Callable[[dict[str, Any], str], None]


def _set(column: str) -> Change:
    def change(data: dict[str, Any], secret: str) -> None:
        data[column] = secret

    return change


def _under(column: str, key: str) -> Change:
    def change(data: dict[str, Any], secret: str) -> None:
        data[column] = {**(data.get(column) or {}), key: secret}

    return change


# (record type, how the secret gets into its first record) for every place the API refuses one.
REFUSED_PLACES: dict[str, tuple[str, Change]] = {
    "memory text": ("memory", _set("text")),
    "memory evidence": ("memory", _set("evidence")),
    "memory metadata": ("memory", _under("metadata", "note")),
    "memory speaker": ("memory", _set("speaker")),
    "memory key": ("memory", _set("store_key")),
    "memory history": ("memory_event", _set("new_text")),
    "profile value": ("profile", _under("document", "note")),
    "account name": ("user_account", _set("name")),
    "thread title": ("thread", _set("title")),
    "thread metadata": ("thread", _under("metadata", "note")),
    "message author": ("message", _set("name")),
    "message metadata": ("message", _under("metadata", "note")),
    "audit detail": ("audit_log", _under("detail", "note")),
}


async def exported_then_purged(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """Ada's export, taken before she was purged: the admin's headers and the records."""
    await seed_user(client, settings, owner_engine, tenant, "ada")
    admin = bearer(settings, tenant, "root", admin=True)
    response = await client.get("/v1/users/ada/export", headers=admin)
    assert response.status_code == 200, response.text
    records = [json.loads(line) for line in response.text.splitlines()]
    assert (await client.delete("/v1/admin/users/ada", headers=admin)).status_code == 200
    return admin, records


def first_of(records: list[dict[str, Any]], kind: str) -> int:
    return next(i for i, record in enumerate(records) if record["type"] == kind)


async def import_records(
    client: AsyncClient, admin: dict[str, str], records: list[dict[str, Any]]
) -> Response:
    body = "".join(json.dumps(record) + "\n" for record in records)
    return await client.post(
        "/v1/admin/users/ada/import", headers={**admin, **NDJSON}, content=body
    )


async def tenant_text(owner_engine: AsyncEngine, tenant: str) -> str:
    """Every row the tenant holds in the tables an import writes, as text (as the owner)."""
    tables = (
        "user_account",
        "profile",
        "thread",
        "message",
        "memory",
        "memory_event",
        "audit_log",
    )
    async with owner_engine.connect() as connection:
        rows = [
            str(row)
            for table in tables
            for row in await connection.execute(
                text(f"SELECT t::text FROM {table} t WHERE tenant_id = :t"), {"t": tenant}
            )
        ]
    return "\n".join(rows)


@pytest.mark.parametrize("kind", sorted(SAMPLES))
async def test_a_secret_the_api_refuses_refuses_the_whole_import_naming_its_line(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str, kind: str
) -> None:
    admin, records = await exported_then_purged(client, settings, owner_engine, tenant)
    sample = SAMPLES[kind]
    for place, (record_type, change) in REFUSED_PLACES.items():
        tampered = copy.deepcopy(records)
        index = first_of(tampered, record_type)
        change(tampered[index]["data"], sample.text)

        response = await import_records(client, admin, tampered)

        body = assert_problem(response, 422, "SECRET_REFUSED")
        assert body["line"] == index + 1, place
        assert f"Line {index + 1}" in body["detail"]
        assert body["errors"][0]["loc"][0] == record_type
        assert sample.core not in response.text
        assert set((await rows_of(owner_engine, tenant, "ada")).values()) == {0}, place
        assert sample.core not in await tenant_text(owner_engine, tenant)
    # The untouched export still imports: the refusals were about the secret alone.
    assert (await import_records(client, admin, records)).status_code == 200
    context = await client.post(
        "/v1/users/ada/context",
        headers=bearer(settings, tenant, "agent", service=True),
        json={"query": sample.text},
    )
    assert context.status_code == 200, context.text
    assert "ada likes green tea" in context.text and sample.core not in context.text


async def test_a_credential_named_profile_key_is_refused_whatever_it_holds(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    admin, records = await exported_then_purged(client, settings, owner_engine, tenant)
    index = first_of(records, "profile")
    records[index]["data"]["document"]["wifi_password"] = 1234

    body = assert_problem(await import_records(client, admin, records), 422, "SECRET_REFUSED")

    assert body["line"] == index + 1
    assert body["errors"][0]["loc"] == ["profile", "document", "wifi_password"]
    assert set((await rows_of(owner_engine, tenant, "ada")).values()) == {0}


@pytest.mark.parametrize("kind", sorted(SAMPLES))
async def test_a_secret_in_an_imported_message_is_kept_as_sent_and_never_replayed(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str, kind: str
) -> None:
    admin, records = await exported_then_purged(client, settings, owner_engine, tenant)
    sample = SAMPLES[kind]
    summary = records[first_of(records, "thread_summary")]["data"]
    summary["entries"][0]["answer"] = sample.text
    thread_id = summary["thread_id"]
    message = next(
        r["data"]
        for r in records
        if r["type"] == "message" and r["data"]["thread_id"] == thread_id and r["data"]["seq"] == 0
    )
    message["content"] = sample.text

    imported = await import_records(client, admin, records)

    # What the API stores as sent, an import stores as sent: an export imports again.
    assert imported.status_code == 200, imported.text
    agent = bearer(settings, tenant, "agent", service=True)
    thread = f"/v1/users/ada/threads/{thread_id}"
    stored = await client.get(f"{thread}/messages", headers=agent)
    assert stored.json()["items"][0]["content"] == sample.text
    window = await client.get(f"{thread}/window", headers=agent)
    context = await client.post(
        "/v1/users/ada/context",
        headers=agent,
        json={"query": sample.text, "thread_id": thread_id},
    )
    assert window.status_code == 200 and context.status_code == 200, context.text
    assert sample.core not in window.text and MASK in window.text
    assert sample.core not in context.text and MASK in context.json()["text"]
    # The summaries as stored are the record; their text rendered for a prompt is masked.
    summaries = (await client.get(f"{thread}/summaries", headers=agent)).json()
    assert summaries["items"][0]["entries"][0]["answer"] == sample.text
    assert sample.core not in summaries["text"] and MASK in summaries["text"]


async def test_a_secret_in_message_tool_calls_is_stored_as_the_api_stores_it(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    admin, records = await exported_then_purged(client, settings, owner_engine, tenant)
    agent = bearer(settings, tenant, "agent", service=True)
    tool_calls = [{"name": "remember", "arguments": sample.text} for sample in SAMPLES.values()]
    # Through the API, on another user: a message's tool calls are kept as sent (its metadata
    # is refused, as the import refuses it).
    thread = await client.post("/v1/users/bob/threads", headers=agent, json={})
    appended = await client.post(
        f"/v1/users/bob/threads/{thread.json()['id']}/messages",
        headers=agent,
        json={"messages": [{"role": "assistant", "content": "ok", "tool_calls": tool_calls}]},
    )
    assert appended.status_code == 201, appended.text
    through_api = appended.json()["items"][0]
    message = records[first_of(records, "message")]["data"]
    message.update(tool_calls=tool_calls)

    imported = await import_records(client, admin, records)

    # What the API keeps as sent, an import keeps as sent: the same message reads back alike.
    assert imported.status_code == 200, imported.text
    page = await client.get(f"/v1/users/ada/threads/{message['thread_id']}/messages", headers=agent)
    stored = next(m for m in page.json()["items"] if m["id"] == message["id"])
    assert stored["tool_calls"] == through_api["tool_calls"] == tool_calls
