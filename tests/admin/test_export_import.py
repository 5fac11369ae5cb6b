"""Export (NDJSON, header + typed records) and import: export → purge → import → export gives
the same records; a bad line names itself and nothing is written."""

from __future__ import annotations

import json
from typing import Any

import pytest
from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.admin.plan import DERIVED_TABLES
from service.admin.service import UserLifecycle
from service.config import Settings
from tests.admin.conftest import rows_of, seed_user
from tests.conftest import assert_problem, bearer
from tests.memories.test_bounded_search import assert_postings_follow_the_text

NDJSON = {"content-type": "application/x-ndjson"}


async def export_lines(client: AsyncClient, headers: dict[str, str], user: str) -> list[Any]:
    response = await client.get(f"/v1/users/{user}/export", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    return [json.loads(line) for line in response.text.splitlines()]


def by_type(records: list[Any]) -> dict[str, list[Any]]:
    grouped: dict[str, list[Any]] = {}
    for record in records[1:]:
        grouped.setdefault(record["type"], []).append(record["data"])
    return grouped


async def test_export_has_a_header_with_counts_and_every_kind_of_record(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    ada = await seed_user(client, settings, owner_engine, tenant, "ada")

    records = await export_lines(client, ada.headers, "me")

    header = records[0]
    assert (header["type"], header["format"], header["version"]) == (
        "header",
        "mneme-user-export",
        1,
    )
    grouped = by_type(records)
    assert header["counts"] == {kind: len(grouped.get(kind, [])) for kind in header["counts"]}
    assert len(grouped["memory"]) == 2 and len(grouped["memory_event"]) == 3
    assert len(grouped["thread"]) == 2 and len(grouped["message"]) == 4
    assert len(grouped["thread_summary"]) == 2 and len(grouped["extraction_cursor"]) == 2
    assert grouped["profile"][0]["document"] == {"city": "ada-town"}
    assert grouped["user_account"][0]["email"] == "ada@x.io"
    assert {e["action"] for e in grouped["audit_log"]} >= {"profile.patch", "extraction.pass"}
    memory = grouped["memory"][0]
    assert "tsv" not in memory and "content_hash" not in memory
    assert memory["embedding"] is None or memory["embedding"].startswith("[")
    order = [r["type"] for r in records[1:]]
    assert order.index("user_account") < order.index("thread") < order.index("message")


async def test_only_the_user_or_an_admin_may_export(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    bob = bearer(settings, tenant, "bob")
    assert_problem(await client.get("/v1/users/ada/export", headers=bob), 404, "NOT_FOUND")
    service = bearer(settings, tenant, "agent", service=True)
    assert_problem(await client.get("/v1/users/ada/export", headers=service), 403, "FORBIDDEN")
    admin = bearer(settings, tenant, "root", admin=True)
    assert (await client.get("/v1/users/ada/export", headers=admin)).status_code == 200
    missing = await client.get("/v1/users/nobody/export", headers=admin)
    assert_problem(missing, 404, "NOT_FOUND")


async def test_a_head_of_the_export_answers_the_gets_headers_and_exports_nothing(
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    admin = bearer(settings, tenant, "root", admin=True)
    got = await client.get("/v1/users/ada/export", headers=admin)
    assert got.status_code == 200, got.text
    audited = "/v1/admin/audit?action=admin.user_export"
    before = (await client.get(audited, headers=admin)).json()["items"]
    assert len(before) == 1

    async def no_export(*_args: object) -> None:
        raise AssertionError("a HEAD opened the export")

    monkeypatch.setattr(UserLifecycle, "open_export", no_export)
    head = await client.head("/v1/users/ada/export", headers=admin)

    assert head.status_code == 200 and head.content == b""
    for header in ("content-type", "content-disposition"):
        assert head.headers[header] == got.headers[header], header
    assert "content-length" not in head.headers
    assert (await client.get(audited, headers=admin)).json()["items"] == before
    # Refused where the GET is, for the same reasons.
    missing = await client.head("/v1/users/nobody/export", headers=admin)
    assert missing.status_code == 404
    other = await client.head("/v1/users/ada/export", headers=bearer(settings, tenant, "bob"))
    assert other.status_code == 404
    service = bearer(settings, tenant, "agent", service=True)
    assert (await client.head("/v1/users/ada/export", headers=service)).status_code == 403


async def test_export_purge_import_export_gives_the_same_records(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    admin = bearer(settings, tenant, "root", admin=True)
    first = await export_lines(client, admin, "ada")
    body = "".join(json.dumps(record) + "\n" for record in first)
    assert (await client.delete("/v1/admin/users/ada", headers=admin)).status_code == 200

    imported = await client.post(
        "/v1/admin/users/ada/import", headers={**admin, **NDJSON}, content=body
    )

    assert imported.status_code == 200, imported.text
    assert imported.json()["imported"] == {k: v for k, v in first[0]["counts"].items() if v}
    second = await export_lines(client, admin, "ada")
    assert second[0]["counts"] == first[0]["counts"]
    assert second[1:] == first[1:]
    # The search's postings are not in an export; the import wrote them from the memories.
    assert not {record["type"] for record in first} & set(DERIVED_TABLES)
    await assert_postings_follow_the_text(owner_engine, tenant)
    search = await client.post(
        "/v1/users/ada/memories/search",
        headers=bearer(settings, tenant, "agent", service=True),
        json={"query": "green tea"},
    )
    assert [h["memory"]["text"] for h in search.json()["hits"]][:1] == ["ada likes green tea"]


async def test_an_expired_memory_is_in_no_export_or_count_before_the_sweep_removes_it(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    """Gone for every reader at once: the export and the admin's user overview leave out a
    memory whose `expires_at` has passed, and its history, as the sweep will remove them; the
    export of what is left still goes through purge and import unchanged."""
    await seed_user(client, settings, owner_engine, tenant, "ada")
    admin = bearer(settings, tenant, "root", admin=True)
    ada = bearer(settings, tenant, "ada")
    kept = await export_lines(client, admin, "ada")
    for words, kind in (("ada is on call", "semantic"), ("ada flew to Oslo", "episodic")):
        expiring = await client.post(
            "/v1/users/me/memories",
            headers=ada,
            json={"text": words, "kind": kind, "expires_at": "2999-01-01T00:00:00Z"},
        )
        assert expiring.status_code == 201, expiring.text
    async with owner_engine.begin() as connection:
        await connection.execute(
            text(
                "UPDATE memory SET expires_at = now() - interval '1 second' "
                "WHERE tenant_id = :t AND expires_at IS NOT NULL"
            ),
            {"t": tenant},
        )

    exported = await export_lines(client, admin, "ada")
    overview = await client.get("/v1/admin/users/ada", headers=admin)

    assert exported[0]["counts"] == kept[0]["counts"]
    memories = by_type(exported)["memory"]
    assert sorted(m["text"] for m in memories) == sorted(m["text"] for m in by_type(kept)["memory"])
    assert len(by_type(exported)["memory_event"]) == len(by_type(kept)["memory_event"])
    assert overview.json()["memories"] == {"semantic": 1, "episodic": 1, "procedural": 0}
    assert (await client.delete("/v1/admin/users/ada", headers=admin)).status_code == 200
    body = "".join(json.dumps(record) + "\n" for record in exported)
    imported = await client.post(
        "/v1/admin/users/ada/import", headers={**admin, **NDJSON}, content=body
    )
    assert imported.status_code == 200, imported.text
    again = await export_lines(client, admin, "ada")
    assert again[0]["counts"] == exported[0]["counts"] and again[1:] == exported[1:]


async def test_import_into_a_user_with_data_is_a_conflict(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    admin = bearer(settings, tenant, "root", admin=True)
    records = await export_lines(client, admin, "ada")
    body = "".join(json.dumps(record) + "\n" for record in records)
    response = await client.post(
        "/v1/admin/users/ada/import", headers={**admin, **NDJSON}, content=body
    )
    assert_problem(response, 409, "USER_NOT_EMPTY")


async def test_a_bad_line_is_named_and_nothing_is_written(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    admin = bearer(settings, tenant, "root", admin=True)
    records = await export_lines(client, admin, "ada")
    assert (await client.delete("/v1/admin/users/ada", headers=admin)).status_code == 200
    lines = [json.dumps(record) for record in records]
    cases = {
        5: "{not json",
        6: json.dumps({"type": "spaceship", "data": {}}),
        7: json.dumps({"type": "memory", "data": {**records[6]["data"], "user_id": "mallory"}}),
    }
    for number, bad in cases.items():
        broken = [*lines[: number - 1], bad, *lines[number:]]
        response = await client.post(
            "/v1/admin/users/ada/import",
            headers={**admin, **NDJSON},
            content="\n".join(broken) + "\n",
        )
        body = assert_problem(response, 422, "IMPORT_LINE_INVALID")
        assert body["line"] == number and f"Line {number}" in body["detail"]
        assert set((await rows_of(owner_engine, tenant, "ada")).values()) == {0}
    typed_wrong = [*lines]
    memory_line = next(i for i, r in enumerate(records) if r["type"] == "memory")
    typed_wrong[memory_line] = json.dumps(
        {"type": "memory", "data": {**records[memory_line]["data"], "confidence": 7}}
    )
    response = await client.post(
        "/v1/admin/users/ada/import",
        headers={**admin, **NDJSON},
        content="\n".join(typed_wrong) + "\n",
    )
    body = assert_problem(response, 422, "IMPORT_LINE_INVALID")
    assert body["line"] == memory_line + 1
    assert set((await rows_of(owner_engine, tenant, "ada")).values()) == {0}


async def test_an_imported_memory_may_not_name_another_users_thread(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    bob = await seed_user(client, settings, owner_engine, tenant, "bob")
    admin = bearer(settings, tenant, "root", admin=True)
    records = await export_lines(client, admin, "ada")
    assert (await client.delete("/v1/admin/users/ada", headers=admin)).status_code == 200
    memory_line = next(i for i, r in enumerate(records) if r["type"] == "memory")
    cited = {**records[memory_line]["data"], "source_thread_id": bob.thread_ids[0]}
    lines = [json.dumps(record) for record in records]
    lines[memory_line] = json.dumps({"type": "memory", "data": cited})

    response = await client.post(
        "/v1/admin/users/ada/import",
        headers={**admin, **NDJSON},
        content="\n".join(lines) + "\n",
    )

    body = assert_problem(response, 422, "IMPORT_LINE_INVALID")
    assert body["line"] == memory_line + 1
    assert set((await rows_of(owner_engine, tenant, "ada")).values()) == {0}


async def test_a_record_or_header_of_another_shape_is_refused_naming_its_line(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    admin = bearer(settings, tenant, "root", admin=True)
    records = await export_lines(client, admin, "ada")
    assert (await client.delete("/v1/admin/users/ada", headers=admin)).status_code == 200
    cases = {
        "a record with a member beyond type and data": (
            2,
            {**records[1], "extra": "x"},
            "exactly the members",
        ),
        "a header with an unknown member": (1, {**records[0], "signed": True}, "no member"),
        "a header whose version is true": (1, {**records[0], "version": True}, "version True"),
    }
    for name, (line, record, reason) in cases.items():
        lines = [json.dumps(r) for r in records]
        lines[line - 1] = json.dumps(record)
        response = await client.post(
            "/v1/admin/users/ada/import",
            headers={**admin, **NDJSON},
            content="\n".join(lines) + "\n",
        )
        problem = assert_problem(response, 422, "IMPORT_LINE_INVALID")
        assert problem["line"] == line and reason in problem["detail"], name
        assert set((await rows_of(owner_engine, tenant, "ada")).values()) == {0}


async def test_a_header_alone_imports_nothing_and_records_no_import_of_a_user_that_does_not_exist(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    admin = bearer(settings, tenant, "root", admin=True)
    header = {
        "type": "header",
        "format": "mneme-user-export",
        "version": 1,
        "tenant_id": tenant,
        "user_id": "ghost",
        "exported_at": "2026-12-01T00:00:00+00:00",
        "counts": {},
    }

    response = await client.post(
        "/v1/admin/users/ghost/import",
        headers={**admin, **NDJSON},
        content=json.dumps(header) + "\n",
    )

    problem = assert_problem(response, 422, "IMPORT_LINE_INVALID")
    assert "user_account" in problem["detail"]
    trail = await client.get("/v1/admin/audit", headers=admin, params={"target_id": "ghost"})
    assert trail.json()["items"] == []
    assert (await client.get("/v1/admin/users/ghost", headers=admin)).status_code == 404


async def test_an_export_sent_as_another_media_type_is_a_415_and_imports_nothing(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    admin = bearer(settings, tenant, "root", admin=True)
    body = "".join(json.dumps(record) + "\n" for record in await export_lines(client, admin, "ada"))
    assert (await client.delete("/v1/admin/users/ada", headers=admin)).status_code == 200

    for content_type in ("text/plain", "image/png", None):
        headers = {**admin, "content-type": content_type} if content_type else admin
        refused = await client.post("/v1/admin/users/ada/import", headers=headers, content=body)
        assert_problem(refused, 415, "UNSUPPORTED_MEDIA_TYPE")
        assert refused.headers["accept-post"] == "application/x-ndjson"
    assert (await client.get("/v1/admin/users/ada", headers=admin)).status_code == 404
    # With parameters, as a client may add them.
    accepted = await client.post(
        "/v1/admin/users/ada/import",
        headers={**admin, "content-type": "application/x-ndjson; charset=utf-8"},
        content=body,
    )
    assert accepted.status_code == 200, accepted.text
