"""An import carries into the audit trail only what an export of the user holds: account and
profile changes and the write path's records on the user's threads, by an actor that could
have written them, at a time that has come. Anything else is a 422 naming its line."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from httpx import AsyncClient
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from tests.admin.conftest import rows_of, seed_user
from tests.conftest import assert_problem, bearer

NDJSON = {"content-type": "application/x-ndjson"}
KEY_ID = str(uuid.uuid4())

FORGED: list[tuple[str, str, dict[str, Any]]] = [
    (
        "profile.patch",
        "audit_log.action",
        {
            "action": "api_key.create",
            "target_type": "api_key",
            "target_id": KEY_ID,
            "actor_kind": "service",
            "actor_id": "root",
            "detail": {"user_id": "ada", "name": "backdoor"},
        },
    ),
    ("profile.patch", "audit_log.action", {"action": "api_key.revoke", "target_type": "user"}),
    ("profile.patch", "audit_log.action", {"action": "admin.user_purge", "target_type": "user"}),
    ("profile.patch", "audit_log.action", {"target_type": "user"}),
    ("profile.patch", "audit_log.target_id", {"target_id": "bob"}),
    ("profile.patch", "audit_log.actor_id", {"actor_kind": "user", "actor_id": "bob"}),
    ("profile.patch", "audit_log.actor_id", {"actor_kind": "admin", "actor_id": "root"}),
    ("extraction.pass", "audit_log.actor_id", {"actor_id": "root"}),
    ("extraction.pass", "audit_log.detail", {"detail": {"user_id": "bob"}}),
    ("extraction.pass", "audit_log.target_id", {"target_id": "not-a-thread"}),
    ("extraction.pass", "audit_log.created_at", {"created_at": "2999-01-01T00:00:00Z"}),
    ("profile.patch", "audit_log.created_at", {"created_at": "2999-01-01T00:00:00Z"}),
]


async def exported(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> tuple[list[dict[str, Any]], dict[str, str], str]:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    bob = await seed_user(client, settings, owner_engine, tenant, "bob")
    admin = bearer(settings, tenant, "root", admin=True)
    response = await client.get("/v1/users/ada/export", headers=admin)
    assert (await client.delete("/v1/admin/users/ada", headers=admin)).status_code == 200
    return [json.loads(line) for line in response.text.splitlines()], admin, bob.thread_ids[0]


def body(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(record) + "\n" for record in records)


@pytest.mark.parametrize(("action", "named", "changes"), FORGED)
async def test_an_audit_record_no_export_of_the_user_holds_is_refused(
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    action: str,
    named: str,
    changes: dict[str, Any],
) -> None:
    records, admin, _ = await exported(client, settings, owner_engine, tenant)
    index = next(
        i
        for i, r in enumerate(records)
        if r["type"] == "audit_log" and r["data"]["action"] == action
    )
    records[index]["data"].update(changes)

    response = await client.post(
        "/v1/admin/users/ada/import", headers={**admin, **NDJSON}, content=body(records)
    )

    problem = assert_problem(response, 422, "IMPORT_LINE_INVALID")
    assert problem["line"] == index + 1 and named in problem["detail"]
    assert set((await rows_of(owner_engine, tenant, "ada")).values()) == {0}
    trail = await client.get("/v1/admin/audit", headers=admin, params={"action": "api_key."})
    assert trail.json()["items"] == []


async def test_a_write_path_record_on_another_users_thread_is_refused(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    records, admin, bobs_thread = await exported(client, settings, owner_engine, tenant)
    index = next(
        i
        for i, r in enumerate(records)
        if r["type"] == "audit_log" and r["data"]["action"] == "extraction.pass"
    )
    records[index]["data"]["target_id"] = bobs_thread.upper()

    response = await client.post(
        "/v1/admin/users/ada/import", headers={**admin, **NDJSON}, content=body(records)
    )

    problem = assert_problem(response, 422, "IMPORT_LINE_INVALID")
    assert problem["line"] == index + 1 and "audit_log.target_id" in problem["detail"]


async def test_write_path_records_of_a_deleted_thread_and_of_any_past_time_are_imported(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    records, admin, _ = await exported(client, settings, owner_engine, tenant)
    for record in records:
        if record["type"] == "audit_log" and record["data"]["action"] == "extraction.pass":
            record["data"]["target_id"] = str(uuid.uuid4())
            record["data"]["created_at"] = "2001-01-01T00:00:00+02:00"

    response = await client.post(
        "/v1/admin/users/ada/import", headers={**admin, **NDJSON}, content=body(records)
    )

    assert response.status_code == 200, response.text
