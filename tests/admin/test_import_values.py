"""An import holds each column to the rule the API holds the same value to (the API's own field
types, not a copy of their limits): a value the API refuses, or would store changed, is a 422
naming its line, and nothing is stored."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from httpx import AsyncClient
from pydantic import BaseModel, ValidationError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from service.accounts.overlay import AccountOverlayUpdate
from service.admin.repository import AdminRepository
from service.admin.service import CLIENT_TIMES, IMPORT_COLUMN_TYPES
from service.config import Settings
from service.memories.schemas import KeyedMemoryPut, MemoryCreate, MemoryUpdate
from service.threads.schemas import MessageIn, ThreadCreate
from tests.admin.conftest import rows_of, seed_user
from tests.conftest import assert_problem, bearer

NDJSON = {"content-type": "application/x-ndjson"}

# The API's input models and the table each writes, with the least body each accepts.
API_MODELS: list[tuple[type[BaseModel], str, dict[str, Any]]] = [
    (MemoryCreate, "memory", {"text": "x"}),
    (MemoryUpdate, "memory", {}),
    (ThreadCreate, "thread", {}),
    (MessageIn, "message", {"role": "user", "content": "x"}),
    (AccountOverlayUpdate, "user_account", {}),
]
MODEL_OF = {model.__name__: (model, least) for model, _, least in API_MODELS}

# (table, column, a value the API refuses or would store changed, the API model that says so)
REFUSED: list[tuple[str, str, Any, str | None]] = [
    ("memory", "text", "     ", "MemoryCreate"),
    ("memory", "text", "\u200b\u200b\u2060", "MemoryCreate"),
    ("memory", "text", "  padded text  ", "MemoryCreate"),
    ("memory", "text", 123456, "MemoryCreate"),
    ("memory", "text", "x" * 4001, "MemoryCreate"),
    ("memory", "kind", "dream", "MemoryCreate"),
    ("memory", "category", "NOT A CATEGORY!!", "MemoryCreate"),
    ("memory", "confidence", 7, "MemoryCreate"),
    ("memory", "confidence", True, "MemoryCreate"),
    ("memory", "evidence", "e" * 2001, "MemoryCreate"),
    ("memory", "speaker", "   ", "MemoryCreate"),
    ("memory", "speaker", " Ada ", "MemoryCreate"),
    ("memory", "source_message_ids", [str(uuid.uuid4()) for _ in range(101)], "MemoryCreate"),
    ("memory", "scope", "team", "MemoryCreate"),
    ("memory", "needs_review", "yes", "MemoryCreate"),
    ("memory", "lifecycle", "forgotten", "MemoryUpdate"),
    ("thread", "title", "t" * 501, "ThreadCreate"),
    ("message", "content", "c" * 100_001, "MessageIn"),
    ("message", "tool_calls", [{"name": "f"}] * 129, "MessageIn"),
    ("message", "client_message_id", "c" * 201, "MessageIn"),
    ("message", "client_message_id", "", "MessageIn"),
    ("message", "name", "   ", "MessageIn"),
    ("message", "role", "human", None),
    ("message", "seq", -5, None),
    ("message", "seq", True, None),
    ("message", "seq", 0.0, None),
    # Past the last position an append gives (2^53 - 1): its thread could take no message.
    ("message", "seq", 2**53, None),
    ("message", "seq", 2**63 - 1, None),
    ("user_account", "name", "n" * 257, "AccountOverlayUpdate"),
    ("user_account", "email", "e" * 321, "AccountOverlayUpdate"),
    ("user_account", "avatar", "a" * 2049, "AccountOverlayUpdate"),
    ("user_account", "socials", ["not a provider!!"], "AccountOverlayUpdate"),
    ("user_account", "socials", [f"p{i}" for i in range(33)], "AccountOverlayUpdate"),
    ("profile", "version", -3, None),
    ("profile", "version", 1.0, None),
    ("profile", "version", 2**53, None),
    # The write path's cursor is a position of its thread, as `seq` is.
    ("extraction_cursor", "through_seq", "1", None),
    ("extraction_cursor", "through_seq", -5, None),
    ("extraction_cursor", "through_seq", True, None),
    ("extraction_cursor", "through_seq", 1.0, None),
    ("thread_summary", "start_index", True, None),
    ("thread_summary", "tokens_before", "12", None),
    # The keyed routes' rule for a key.
    ("memory", "store_key", "\u200b", None),
    ("memory", "store_key", " \u2060 ", None),
    ("memory", "store_key", "k" * 513, None),
    ("memory", "store_key", 7, None),
    # What a reader of a memory's history expects.
    ("memory_event", "action", "rewrite", None),
    # A row of the user's is the user's, never the organization's.
    ("memory", "scope", "org", None),
    ("profile", "scope", "org", None),
    # A column the table requires, given as null.
    ("memory", "text", None, None),
    ("memory", "kind", None, None),
    ("message", "content", None, None),
    # Times the service takes from its clock are not later than this server's.
    ("memory", "created_at", "9999-01-01T00:00:00+00:00", None),
    ("memory", "updated_at", "2999-01-01T00:00:00Z", None),
    ("user_account", "last_seen_at", "2999-01-01T00:00:00Z", None),
    ("thread", "created_at", "2999-01-01T00:00:00Z", None),
    ("message", "created_at", "2999-01-01T00:00:00Z", None),
]


@pytest.mark.parametrize(("table", "column", "value", "model"), REFUSED)
def test_the_api_refuses_or_changes_each_value(
    table: str, column: str, value: Any, model: str | None
) -> None:
    """The cases below are values of the API's own refusing (when an API model writes them)."""
    if model is None:
        return
    api, least = MODEL_OF[model]
    try:
        accepted = api.model_validate({**least, column: value})
    except ValidationError:
        return
    assert getattr(accepted, column) != value


@pytest.mark.parametrize(("table", "column", "value", "model"), REFUSED)
async def test_an_import_refuses_what_the_api_refuses_naming_the_line(
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    table: str,
    column: str,
    value: Any,
    model: str | None,
) -> None:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    admin = bearer(settings, tenant, "root", admin=True)
    exported = await client.get("/v1/users/ada/export", headers=admin)
    records = [json.loads(line) for line in exported.text.splitlines()]
    assert (await client.delete("/v1/admin/users/ada", headers=admin)).status_code == 200
    index = next(i for i, record in enumerate(records) if record["type"] == table)
    records[index]["data"][column] = value

    response = await client.post(
        "/v1/admin/users/ada/import",
        headers={**admin, **NDJSON},
        content="".join(json.dumps(record) + "\n" for record in records),
    )

    problem = assert_problem(response, 422, "IMPORT_LINE_INVALID")
    assert problem["line"] == index + 1 and f"{table}.{column}" in problem["detail"]
    # In the import's words: no constraint, relation or type of the database's.
    assert '"' not in problem["detail"], problem["detail"]
    assert set((await rows_of(owner_engine, tenant, "ada")).values()) == {0}


async def test_every_column_an_api_model_constrains_is_held_to_its_rule_on_import(
    owner_engine: AsyncEngine, tenant: str
) -> None:
    """A field the API gains later, for a column an export holds, must be held to on import."""
    async with owner_engine.connect() as connection:
        plan = await AdminRepository(AsyncSession(bind=connection), tenant).plan()
    missing = []
    for model, table, _ in API_MODELS:
        types = plan.tables[table].column_types
        # Times and ids have rules of their own for every column of their type.
        missing += [
            f"{table}.{field}"
            for field in model.model_fields
            if field in types
            and types[field] not in ("timestamp with time zone", "uuid")
            and (table, field) not in IMPORT_COLUMN_TYPES
        ]
    assert missing == []


async def test_a_tokens_account_claims_beyond_the_overlays_rules_are_left_out_so_its_export_imports(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    long_name = "n" * 300
    headers = bearer(
        settings,
        tenant,
        "ada",
        name=long_name,
        email="ada@example.com",
        identities=["github", "not a provider!!", *(f"p{i}" for i in range(40))],
    )
    me = await client.get("/v1/users/me", headers=headers)
    assert me.status_code == 200, me.text
    assert me.json()["name"] is None and me.json()["email"] == "ada@example.com"
    assert me.json()["socials"] == ["github", *(f"p{i}" for i in range(31))]
    admin = bearer(settings, tenant, "root", admin=True)
    exported = await client.get("/v1/users/ada/export", headers=admin)
    assert (await client.delete("/v1/admin/users/ada", headers=admin)).status_code == 200

    imported = await client.post(
        "/v1/admin/users/ada/import", headers={**admin, **NDJSON}, content=exported.text
    )

    assert imported.status_code == 200, imported.text


async def test_a_thread_whose_oldest_messages_retention_removed_imports_and_appends_after_its_last(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    """Positions are kept as exported: a gap before them (the retention sweep removes a
    thread's oldest messages, never its newest) is one the API leaves too."""
    seeded = await seed_user(client, settings, owner_engine, tenant, "ada")
    admin = bearer(settings, tenant, "root", admin=True)
    exported = await client.get("/v1/users/ada/export", headers=admin)
    records = [json.loads(line) for line in exported.text.splitlines()]
    assert (await client.delete("/v1/admin/users/ada", headers=admin)).status_code == 200
    thread_id = seeded.thread_ids[0]
    for record in records:
        if record["type"] == "message" and record["data"]["thread_id"] == thread_id:
            record["data"]["seq"] += 40

    imported = await client.post(
        "/v1/admin/users/ada/import",
        headers={**admin, **NDJSON},
        content="".join(json.dumps(record) + "\n" for record in records),
    )

    assert imported.status_code == 200, imported.text
    appended = await client.post(
        f"/v1/users/me/threads/{thread_id}/messages",
        headers=seeded.headers,
        json={"messages": [{"role": "user", "content": "after the import"}]},
    )
    assert appended.status_code == 201, appended.text
    assert [m["seq"] for m in appended.json()["items"]] == [42]


async def refused_import(
    client: AsyncClient,
    admin: dict[str, str],
    records: list[dict[str, Any]],
) -> dict[str, Any]:
    response = await client.post(
        "/v1/admin/users/ada/import",
        headers={**admin, **NDJSON},
        content="".join(json.dumps(record) + "\n" for record in records),
    )
    return assert_problem(response, 422, "IMPORT_LINE_INVALID")


async def exported_records(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Ada's export (see `seed_user`), taken before her purge."""
    await seed_user(client, settings, owner_engine, tenant, "ada")
    admin = bearer(settings, tenant, "root", admin=True)
    exported = await client.get("/v1/users/ada/export", headers=admin)
    assert (await client.delete("/v1/admin/users/ada", headers=admin)).status_code == 200
    return [json.loads(line) for line in exported.text.splitlines()], admin


@pytest.mark.parametrize("column", ["text", "kind", "scope"])
async def test_a_record_without_a_column_its_table_requires_is_refused_naming_it(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str, column: str
) -> None:
    records, admin = await exported_records(client, settings, owner_engine, tenant)
    index = next(i for i, record in enumerate(records) if record["type"] == "memory")
    del records[index]["data"][column]

    problem = await refused_import(client, admin, records)

    assert problem["line"] == index + 1
    assert problem["detail"] == (
        f"Line {index + 1}: memory.{column} is missing. Nothing was imported."
    )
    assert set((await rows_of(owner_engine, tenant, "ada")).values()) == {0}


@pytest.mark.parametrize("past", [1, 1000])
async def test_a_write_path_cursor_past_its_threads_last_message_is_refused(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str, past: int
) -> None:
    records, admin = await exported_records(client, settings, owner_engine, tenant)
    index = next(i for i, record in enumerate(records) if record["type"] == "extraction_cursor")
    thread_id = records[index]["data"]["thread_id"]
    last = max(
        record["data"]["seq"]
        for record in records
        if record["type"] == "message" and record["data"]["thread_id"] == thread_id
    )
    records[index]["data"]["through_seq"] = last + past

    problem = await refused_import(client, admin, records)

    assert problem["line"] == index + 1
    assert "extraction_cursor.through_seq" in problem["detail"]
    assert f"last message's position ({last})" in problem["detail"]
    assert set((await rows_of(owner_engine, tenant, "ada")).values()) == {0}


async def test_a_write_path_cursor_on_a_thread_without_messages_is_refused(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    records, admin = await exported_records(client, settings, owner_engine, tenant)
    index = next(i for i, record in enumerate(records) if record["type"] == "extraction_cursor")
    thread_id = records[index]["data"]["thread_id"]
    kept = [
        record
        for record in records
        if not (record["type"] == "message" and record["data"]["thread_id"] == thread_id)
    ]
    header = kept[0]
    header["counts"]["message"] -= len(records) - len(kept)
    # The summaries cite the removed messages by id, which is allowed (as after a deletion).
    index = next(i for i, record in enumerate(kept) if record["type"] == "extraction_cursor")

    problem = await refused_import(client, admin, kept)

    assert problem["line"] == index + 1
    assert "extraction_cursor.through_seq" in problem["detail"]
    assert "has no message in this import" in problem["detail"]


async def test_a_second_message_at_a_threads_position_is_refused_in_the_imports_words(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    records, admin = await exported_records(client, settings, owner_engine, tenant)
    first, second = [i for i, record in enumerate(records) if record["type"] == "message"][:2]
    records[second]["data"]["seq"] = records[first]["data"]["seq"]
    records[second]["data"]["thread_id"] = records[first]["data"]["thread_id"]

    problem = await refused_import(client, admin, records)

    assert problem["line"] == second + 1
    assert "message.thread_id, message.seq" in problem["detail"]
    assert '"' not in problem["detail"], problem["detail"]


def test_the_times_an_import_takes_from_any_date_are_those_the_apis_memory_writes_take() -> None:
    """Every other time is the service's clock reading, not later than the importing server's
    clock; a time field the memory routes gain must say which it is."""
    taken = {
        ("memory", name)
        for model in (MemoryCreate, MemoryUpdate, KeyedMemoryPut)
        for name, info in model.model_fields.items()
        if "datetime" in str(info.annotation).lower()
    }
    assert taken == CLIENT_TIMES
