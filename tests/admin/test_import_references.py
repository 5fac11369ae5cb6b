"""An import writes the user's own rows only: every id a record carries names a row of the same
import (or, for a history or a provenance that outlives its row, no row of the tenant), never
another user's, however the UUID is spelled; an id that is missing or not a UUID is a 422
naming its line."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from httpx import AsyncClient
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from service.admin.plan import AUDIT_TABLE
from service.admin.repository import AdminRepository
from service.admin.service import IMPORT_REFERENCES
from service.config import Settings
from tests.admin.conftest import rows_of, seed_user
from tests.conftest import assert_problem, bearer

NDJSON = {"content-type": "application/x-ndjson"}
IMPORT = "/v1/admin/users/ada/import"


@dataclass
class Exports:
    """Ada's export (taken before her purge) and bob's, from one tenant."""

    ada: list[dict[str, Any]]
    bob: list[dict[str, Any]]
    admin: dict[str, str]

    def first(self, kind: str) -> int:
        return next(i for i, record in enumerate(self.ada) if record["type"] == kind)

    def bobs(self, kind: str, column: str = "id") -> str:
        return str(next(r["data"][column] for r in self.bob if r["type"] == kind))

    def body_with(self, index: int, **changes: Any) -> str:
        lines = [json.dumps(record) for record in self.ada]
        record = self.ada[index]
        lines[index] = json.dumps({"type": record["type"], "data": {**record["data"], **changes}})
        return "\n".join(lines) + "\n"


async def exports(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> Exports:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    await seed_user(client, settings, owner_engine, tenant, "bob")
    admin = bearer(settings, tenant, "root", admin=True)
    taken = {}
    for user in ("ada", "bob"):
        response = await client.get(f"/v1/users/{user}/export", headers=admin)
        assert response.status_code == 200, response.text
        taken[user] = [json.loads(line) for line in response.text.splitlines()]
    assert (await client.delete("/v1/admin/users/ada", headers=admin)).status_code == 200
    return Exports(taken["ada"], taken["bob"], admin)


def spellings(value: str) -> list[str]:
    """The forms of one UUID that Postgres (and Python) read as the same value."""
    return [value, value.upper(), uuid.UUID(value).hex, "{" + value + "}"]


@pytest.mark.parametrize("spelling", range(4))
async def test_a_message_in_another_users_thread_is_refused_however_the_id_is_spelled(
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    spelling: int,
) -> None:
    taken = await exports(client, settings, owner_engine, tenant)
    index = taken.first("message")
    bobs_thread = spellings(taken.bobs("thread"))[spelling]
    bob = bearer(settings, tenant, "bob")
    before = await client.get(f"/v1/users/me/threads/{taken.bobs('thread')}/messages", headers=bob)

    response = await client.post(
        IMPORT,
        headers={**taken.admin, **NDJSON},
        content=taken.body_with(index, thread_id=bobs_thread, seq=99, content="INJECTED"),
    )

    problem = assert_problem(response, 422, "IMPORT_LINE_INVALID")
    assert problem["line"] == index + 1 and "message.thread_id" in problem["detail"]
    assert set((await rows_of(owner_engine, tenant, "ada")).values()) == {0}
    after = await client.get(f"/v1/users/me/threads/{taken.bobs('thread')}/messages", headers=bob)
    assert after.json() == before.json()


@pytest.mark.parametrize(
    ("kind", "column", "bobs", "listed"),
    [
        ("memory", "source_thread_id", ("thread", "id"), False),
        ("memory", "superseded_by", ("memory", "id"), False),
        ("memory", "source_message_ids", ("message", "id"), True),
        ("memory_event", "memory_id", ("memory", "id"), False),
        ("thread_summary", "message_ids", ("message", "id"), True),
    ],
)
@pytest.mark.parametrize("spelling", range(4))
async def test_a_reference_to_another_users_row_is_refused_however_the_id_is_spelled(
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    kind: str,
    column: str,
    bobs: tuple[str, str],
    listed: bool,
    spelling: int,
) -> None:
    taken = await exports(client, settings, owner_engine, tenant)
    index = taken.first(kind)
    value = spellings(taken.bobs(*bobs))[spelling]

    response = await client.post(
        IMPORT,
        headers={**taken.admin, **NDJSON},
        content=taken.body_with(index, **{column: [value] if listed else value}),
    )

    problem = assert_problem(response, 422, "IMPORT_LINE_INVALID")
    assert problem["line"] == index + 1 and f"{kind}.{column}" in problem["detail"]
    assert set((await rows_of(owner_engine, tenant, "ada")).values()) == {0}


@pytest.mark.parametrize(
    ("kind", "column", "listed"),
    [
        ("memory", "source_thread_id", False),
        ("memory", "superseded_by", False),
        ("memory", "source_message_ids", True),
        ("memory_event", "memory_id", False),
        ("thread_summary", "message_ids", True),
    ],
)
async def test_a_reference_to_a_row_the_tenant_no_longer_holds_is_imported(
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    kind: str,
    column: str,
    listed: bool,
) -> None:
    # A memory's history and provenance outlive the memory, thread or messages they name.
    taken = await exports(client, settings, owner_engine, tenant)
    index = taken.first(kind)
    gone = str(uuid.uuid4()).upper()

    response = await client.post(
        IMPORT,
        headers={**taken.admin, **NDJSON},
        content=taken.body_with(index, **{column: [gone] if listed else gone}),
    )

    assert response.status_code == 200, response.text


async def test_a_memory_superseded_by_one_later_in_the_file_is_imported(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    taken = await exports(client, settings, owner_engine, tenant)
    memories = [i for i, record in enumerate(taken.ada) if record["type"] == "memory"]
    later = str(taken.ada[memories[-1]]["data"]["id"])

    response = await client.post(
        IMPORT,
        headers={**taken.admin, **NDJSON},
        content=taken.body_with(memories[0], superseded_by=later, lifecycle="superseded"),
    )

    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    ("kind", "column"),
    [
        ("memory", "id"),
        ("thread", "id"),
        ("message", "id"),
        ("message", "thread_id"),
        ("profile", "id"),
        ("memory_event", "id"),
        ("memory_event", "memory_id"),
        ("thread_summary", "id"),
        ("thread_summary", "thread_id"),
        ("extraction_cursor", "thread_id"),
        ("audit_log", "id"),
        ("user_account", "id"),
    ],
)
@pytest.mark.parametrize("value", ["<missing>", "not-a-uuid", 5, None, ["x"]])
async def test_an_id_that_is_missing_or_not_an_id_is_refused_naming_its_line(
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    kind: str,
    column: str,
    value: object,
) -> None:
    taken = await exports(client, settings, owner_engine, tenant)
    index = taken.first(kind)
    record = taken.ada[index]
    data = {k: v for k, v in record["data"].items() if k != column}
    if value != "<missing>":
        data[column] = value
    lines = [json.dumps(r) for r in taken.ada]
    lines[index] = json.dumps({"type": kind, "data": data})

    response = await client.post(
        IMPORT, headers={**taken.admin, **NDJSON}, content="\n".join(lines) + "\n"
    )

    problem = assert_problem(response, 422, "IMPORT_LINE_INVALID")
    assert problem["line"] == index + 1 and kind in problem["detail"]
    assert set((await rows_of(owner_engine, tenant, "ada")).values()) == {0}


@pytest.mark.parametrize(("column", "value"), [("source_message_ids", ["x"]), ("id", "")])
async def test_an_id_list_or_text_that_is_not_ids_is_refused(
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    column: str,
    value: object,
) -> None:
    taken = await exports(client, settings, owner_engine, tenant)
    index = taken.first("memory")

    response = await client.post(
        IMPORT, headers={**taken.admin, **NDJSON}, content=taken.body_with(index, **{column: value})
    )

    problem = assert_problem(response, 422, "IMPORT_LINE_INVALID")
    assert problem["line"] == index + 1 and f"memory.{column}" in problem["detail"]


async def test_every_id_column_an_export_holds_is_a_key_or_a_checked_reference(
    owner_engine: AsyncEngine, tenant: str
) -> None:
    """A column naming rows added later must say which table it names before an import can
    fill it: otherwise it could name another user's rows."""
    async with owner_engine.connect() as connection:
        plan = await AdminRepository(AsyncSession(bind=connection), tenant).plan()
    tables = [rule.table for rule in plan.exported] + [plan.tables[AUDIT_TABLE]]
    unchecked = []
    for table in tables:
        keyed = set(table.primary_key) | {c for key in table.foreign_keys for c in key.columns}
        keyed |= {column for name, column in IMPORT_REFERENCES if name == table.name}
        unchecked += [
            f"{table.name}.{column}"
            for column, column_type in table.column_types.items()
            if column_type in ("uuid", "uuid[]") and column not in keyed
        ]
    assert unchecked == []
    for (name, column), parent in IMPORT_REFERENCES.items():
        assert plan.tables[name].column_types[column] in ("uuid", "uuid[]")
        assert plan.tables[parent].primary_key == ("tenant_id", "id")


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("source_thread_id", "not-a-uuid"),
        ("source_thread_id", 5),
        ("superseded_by", "not-a-uuid"),
        ("source_message_ids", ["not-a-uuid"]),
        ("source_message_ids", [5]),
        ("source_message_ids", "not-a-list"),
    ],
)
async def test_a_reference_that_is_not_an_id_is_refused_naming_its_line(
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    column: str,
    value: object,
) -> None:
    taken = await exports(client, settings, owner_engine, tenant)
    index = taken.first("memory")
    record = taken.ada[index]
    lines = [json.dumps(r) for r in taken.ada]
    lines[index] = json.dumps({"type": "memory", "data": {**record["data"], column: value}})

    response = await client.post(
        IMPORT, headers={**taken.admin, **NDJSON}, content="\n".join(lines) + "\n"
    )

    problem = assert_problem(response, 422, "IMPORT_LINE_INVALID")
    assert problem["line"] == index + 1
    assert set((await rows_of(owner_engine, tenant, "ada")).values()) == {0}
