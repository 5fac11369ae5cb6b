"""Import holds every line to the API's input rules: a time the service could not read back, a
number no double holds, JSON nested too deep or a column the table does not have is a 422
naming the line, and nothing is stored; what an import accepts reads back everywhere.

The property test generates import lines (times in any offset and year, Postgres' own words
for times, free-form JSON, unknown columns) and asserts: never a 5xx, nothing stored on
refusal, and after an accepted import every read of the user and the tenant answers.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from httpx import AsyncClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.admin.service import IMPORT_COLUMN_TYPES
from service.config import Settings
from tests.admin.conftest import JSON_PATCH, rows_of, seed_user
from tests.conftest import assert_problem, bearer, new_tenant

NDJSON = {"content-type": "application/x-ndjson"}
IMPORT = "/v1/admin/users/ada/import"


async def exported_then_purged(
    client: AsyncClient, settings: Settings, tenant: str
) -> list[dict[str, Any]]:
    """Ada's export (a memory, a thread with a tool call), taken before her purge."""
    ada = bearer(settings, tenant, "ada")
    memory = {"text": "likes green tea", "metadata": {"source": "chat"}}
    assert (await client.post("/v1/users/me/memories", json=memory, headers=ada)).is_success
    thread = (await client.post("/v1/users/me/threads", json={}, headers=ada)).json()
    message = {"role": "assistant", "content": "ok", "tool_calls": [{"name": "f", "args": {}}]}
    appended = await client.post(
        f"/v1/users/me/threads/{thread['id']}/messages",
        json={"messages": [message]},
        headers=ada,
    )
    assert appended.is_success, appended.text
    admin = bearer(settings, tenant, "root", admin=True)
    exported = await client.get("/v1/users/ada/export", headers=admin)
    assert exported.status_code == 200
    assert (await client.delete("/v1/admin/users/ada", headers=admin)).status_code == 200
    return [json.loads(line) for line in exported.text.splitlines()]


def first_of(records: list[dict[str, Any]], kind: str) -> int:
    return next(i for i, record in enumerate(records) if record["type"] == kind)


def file_with(records: list[dict[str, Any]], index: int, line: str) -> str:
    lines = [json.dumps(record) for record in records]
    lines[index] = line
    return "\n".join(lines) + "\n"


def record_line(record: dict[str, Any], column: str, value_json: str) -> str:
    """The record's line with `column` set to `value_json`, spliced in as written (so that
    text no encoder produces, such as `1e400`, reaches the importer)."""
    data = {k: v for k, v in record["data"].items() if k != column}
    head = json.dumps({"type": record["type"], "data": {column: "<>", **data}})
    return head.replace('"<>"', value_json, 1)


async def assert_readable(
    client: AsyncClient, settings: Settings, tenant: str, admin: dict[str, str]
) -> None:
    """Every read that once failed on an unreadable import answers."""
    users = await client.get("/v1/admin/users", headers=admin)
    assert users.status_code == 200, users.text
    ada = bearer(settings, tenant, "ada")
    for url in ("/v1/users/me", "/v1/users/me/memories", "/v1/users/me/threads"):
        response = await client.get(url, headers=ada)
        assert response.status_code == 200, (url, response.text)
    assert (await client.get("/v1/admin/users/ada", headers=admin)).status_code == 200
    assert (await client.get("/v1/users/ada/export", headers=admin)).status_code == 200


REFUSED = [
    ("memory", "created_at", '"0001-01-01T00:00:00+14:00"', "years 1 to 9999"),
    ("memory", "event_at", '"200000-01-01T00:00:00Z"', "ISO 8601"),
    ("thread", "created_at", '"4000-01-01 BC"', "ISO 8601"),
    ("memory", "created_at", '"yesterday"', "ISO 8601"),
    ("memory", "expires_at", '"infinity"', "ISO 8601"),
    ("memory", "created_at", '"2026-01-01T00:00:00"', "UTC offset"),
    ("memory", "created_at", '"2026-01-01T00:00:00+15:00"', "within ±14:00"),
    ("user_account", "created_at", '"9999-12-31T23:59:59-01:00"', "years 1 to 9999"),
    ("memory", "event_at", '"0001-01-01T14:00:00+14:00"', "after 0001-01-01T00:00:00Z"),
    ("memory", "expires_at", '"9999-12-31T23:59:59.999999Z"', "before 9999-12-31T23:59:59.999999Z"),
    ("message", "created_at", "1700000000", "ISO 8601"),
    ("memory", "colour", '"red"', "has no column 'colour'"),
    ("memory", "metadata", '{"x": 1e400}', "too large for a number"),
    ("memory", "metadata", '{"x": ' + "9" * 5000 + "}", "at most 4300 digits"),
    ("memory", "metadata", '{"k": ' * 999 + "{}" + "}" * 999, "nested deeper"),
    ("memory", "metadata", '"not an object"', "memory.metadata"),
    ("memory", "confidence", "1e-300", "at least 1e-06"),
    ("message", "tool_calls", '[{"x": "\\u0000"}]', "NUL"),
    ("message", "metadata", json.dumps({"x": "y" * 70_000}), "at most 65536 bytes"),
]


@pytest.mark.parametrize(("kind", "column", "value", "reason"), REFUSED)
async def test_a_line_the_api_would_refuse_is_named_and_nothing_is_imported(
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    kind: str,
    column: str,
    value: str,
    reason: str,
) -> None:
    records = await exported_then_purged(client, settings, tenant)
    admin = bearer(settings, tenant, "root", admin=True)
    index = first_of(records, kind)

    response = await client.post(
        IMPORT,
        headers={**admin, **NDJSON},
        content=file_with(records, index, record_line(records[index], column, value)),
    )

    problem = assert_problem(response, 422, "IMPORT_LINE_INVALID")
    assert problem["line"] == index + 1
    assert reason in problem["detail"]
    assert set((await rows_of(owner_engine, tenant, "ada")).values()) == {0}
    assert (await client.get("/v1/admin/users", headers=admin)).status_code == 200


async def test_times_at_the_calendars_edges_and_in_any_offset_are_imported_and_read_back(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    records = await exported_then_purged(client, settings, tenant)
    admin = bearer(settings, tenant, "root", admin=True)
    index = first_of(records, "memory")
    # The far end is for the times a client gives: the service's own are not in the future.
    edges = {
        "created_at": "0001-01-01T14:00:00.000001+14:00",
        "event_at": "9999-12-31T23:59:59.999998Z",
        "expires_at": "9999-12-31T11:59:59-12:00",
        "updated_at": "2026-06-01T12:00:00+05:30:15.250000",
    }
    records[index]["data"].update(edges)

    response = await client.post(
        IMPORT,
        headers={**admin, **NDJSON},
        content=file_with(records, index, json.dumps(records[index])),
    )

    assert response.status_code == 200, response.text
    await assert_readable(client, settings, tenant, admin)
    [memory] = (
        await client.get("/v1/users/me/memories", headers=bearer(settings, tenant, "ada"))
    ).json()["items"]
    for column, written in edges.items():
        assert datetime.fromisoformat(memory[column]) == datetime.fromisoformat(written), column


# --- property: generated import lines -------------------------------------------------------

offsets = st.integers(min_value=-24 * 60 + 1, max_value=24 * 60 - 1).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)
iso_times = st.builds(
    lambda moment, tz: moment.replace(tzinfo=tz).isoformat(),
    st.one_of(
        st.sampled_from([datetime(1, 1, 1), datetime(9999, 12, 31, 23, 59, 59, 999999)]),
        st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)),
    ),
    offsets,
)
postgres_words = st.sampled_from(
    ["yesterday", "today", "tomorrow", "now", "epoch", "infinity", "-infinity", "allballs"]
)
odd_texts = st.sampled_from(
    ["4000-01-01 BC", "200000-01-01T00:00:00Z", "2026-01-01 00:00:00+00", "2026-W01-1", ""]
)
times = st.one_of(iso_times, postgres_words, odd_texts).map(json.dumps)
json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
json_documents = st.recursive(
    json_leaves,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
).map(json.dumps)
raw_numbers = st.sampled_from(["1e400", "-1e400", "1e-400", "5e-324", "1e308", "9" * 4400])
deep = st.integers(min_value=1, max_value=300).map(lambda n: "[" * n + "]" * n)

TIME_COLUMNS = [
    ("memory", "created_at"),
    ("memory", "event_at"),
    ("memory", "expires_at"),
    ("memory", "updated_at"),
    ("thread", "created_at"),
    ("message", "created_at"),
    ("user_account", "created_at"),
    ("user_account", "last_seen_at"),
]
JSON_COLUMNS = [
    ("memory", "metadata"),
    ("thread", "metadata"),
    ("message", "metadata"),
    ("message", "tool_calls"),
    ("memory", "confidence"),
    ("memory", "colour"),
]
changes = st.one_of(
    st.tuples(st.sampled_from(TIME_COLUMNS), times),
    st.tuples(st.sampled_from(JSON_COLUMNS), st.one_of(json_documents, raw_numbers, deep)),
)


# A long property test (40 imports, each read back): with the slow tests.
@pytest.mark.slow
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(change=changes)
async def test_any_import_line_is_either_refused_storing_nothing_or_imported_and_readable(
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    change: tuple[tuple[str, str], str],
) -> None:
    (kind, column), value = change
    tenant = new_tenant()
    records = await exported_then_purged(client, settings, tenant)
    admin = bearer(settings, tenant, "root", admin=True)
    index = first_of(records, kind)

    response = await client.post(
        IMPORT,
        headers={**admin, **NDJSON},
        content=file_with(records, index, record_line(records[index], column, value)),
    )

    assert response.status_code in (200, 422), response.text
    if response.status_code == 422:
        assert response.json()["line"] == index + 1
        assert set((await rows_of(owner_engine, tenant, "ada")).values()) == {0}
    else:
        await assert_readable(client, settings, tenant, admin)
    await client.delete("/v1/admin/users/ada", headers=admin)


@pytest.mark.parametrize(
    ("kind", "column", "value"),
    [
        ("profile", "document", "[1, 2]"),
        ("user_account", "socials", '{"github": true}'),
        ("memory_event", "changes", "[1]"),
        ("thread_summary", "entries", '{"question": "q"}'),
        ("audit_log", "detail", '"a string"'),
        ("message", "tool_calls", '{"name": "f"}'),
    ],
)
async def test_a_json_column_of_another_shape_than_its_readers_expect_is_refused(
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    kind: str,
    column: str,
    value: str,
) -> None:
    # Stored, such a value made the profile, the context block, a memory's history, a
    # thread's summaries or the audit trail answer 500 on every read.
    await seed_user(client, settings, owner_engine, tenant, "ada")
    admin = bearer(settings, tenant, "root", admin=True)
    exported = await client.get("/v1/users/ada/export", headers=admin)
    records = [json.loads(line) for line in exported.text.splitlines()]
    assert (await client.delete("/v1/admin/users/ada", headers=admin)).status_code == 200
    # An audit record whose target (not its detail) names the user, so it is hers either way.
    index = next(
        i
        for i, record in enumerate(records)
        if record["type"] == kind and record["data"].get("target_id", "ada") == "ada"
    )

    response = await client.post(
        IMPORT,
        headers={**admin, **NDJSON},
        content=file_with(records, index, record_line(records[index], column, value)),
    )

    problem = assert_problem(response, 422, "IMPORT_LINE_INVALID")
    assert problem["line"] == index + 1 and f"{kind}.{column}" in problem["detail"]
    assert set((await rows_of(owner_engine, tenant, "ada")).values()) == {0}


async def test_every_json_column_an_export_holds_has_the_shape_its_readers_expect(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    """A jsonb column added later must say what it holds before an import can fill it."""
    await seed_user(client, settings, owner_engine, tenant, "ada")
    admin = bearer(settings, tenant, "root", admin=True)
    exported = await client.get("/v1/users/ada/export", headers=admin)
    tables = {json.loads(line)["type"] for line in exported.text.splitlines()[1:]}
    async with owner_engine.connect() as connection:
        rows = await connection.execute(
            text(
                "SELECT table_name, column_name FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND data_type = 'jsonb' "
                "AND table_name = ANY(:tables)"
            ),
            {"tables": sorted(tables)},
        )
        json_columns = {(row.table_name, row.column_name) for row in rows}
    assert json_columns
    assert json_columns <= set(IMPORT_COLUMN_TYPES)


# --- profile documents: the rules a patch holds a profile to -----------------------------


def nested(depth: int) -> Any:
    """A JSON value `depth` levels deep (the value itself is level 1)."""
    value: Any = "leaf"
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        ({"9lives": "cat"}, "should match pattern"),
        ({"home town": "Porto"}, "should match pattern"),
        ({"city\n": "Porto"}, "should match pattern"),
        ({"": "Porto"}, "should match pattern"),
        ({"k" * 129: "Porto"}, "at most 128 characters"),
        ({"city": nested(33)}, "nested deeper than 32 levels"),
    ],
)
async def test_a_profile_no_patch_could_have_written_is_refused_naming_its_line(
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    document: dict[str, Any],
    reason: str,
) -> None:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    admin = bearer(settings, tenant, "root", admin=True)
    exported = await client.get("/v1/users/ada/export", headers=admin)
    records = [json.loads(line) for line in exported.text.splitlines()]
    assert (await client.delete("/v1/admin/users/ada", headers=admin)).status_code == 200
    index = first_of(records, "profile")
    records[index]["data"]["document"] = document

    response = await client.post(
        IMPORT,
        headers={**admin, **NDJSON},
        content=file_with(records, index, json.dumps(records[index])),
    )

    problem = assert_problem(response, 422, "IMPORT_LINE_INVALID")
    assert problem["line"] == index + 1
    assert "profile.document" in problem["detail"] and reason in problem["detail"]
    assert set((await rows_of(owner_engine, tenant, "ada")).values()) == {0}


async def test_a_profile_over_the_size_limit_is_refused_with_its_size_and_the_limit(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    admin = bearer(settings, tenant, "root", admin=True)
    exported = await client.get("/v1/users/ada/export", headers=admin)
    records = [json.loads(line) for line in exported.text.splitlines()]
    assert (await client.delete("/v1/admin/users/ada", headers=admin)).status_code == 200
    index = first_of(records, "profile")
    limit = settings.profile_max_bytes
    # `{"notes":"…"}` is 12 bytes around the text; "é" is two bytes in UTF-8.
    at_limit = {"notes": "é" * ((limit - 12) // 2) + "x" * ((limit - 12) % 2)}
    over = {"notes": at_limit["notes"] + "x"}
    assert len(json.dumps(at_limit, ensure_ascii=False, separators=(",", ":")).encode()) == limit

    records[index]["data"]["document"] = over
    response = await client.post(
        IMPORT,
        headers={**admin, **NDJSON},
        content=file_with(records, index, json.dumps(records[index])),
    )

    problem = assert_problem(response, 422, "IMPORT_LINE_INVALID")
    assert problem["line"] == index + 1
    assert problem["attempted_bytes"] == limit + 1 and problem["max_bytes"] == limit
    assert set((await rows_of(owner_engine, tenant, "ada")).values()) == {0}

    # At the limit it is what a patch could have written.
    records[index]["data"]["document"] = at_limit
    response = await client.post(
        IMPORT,
        headers={**admin, **NDJSON},
        content=file_with(records, index, json.dumps(records[index])),
    )
    assert response.status_code == 200, response.text
    profile = await client.get("/v1/users/me/profile", headers=bearer(settings, tenant, "ada"))
    assert profile.json()["bytes"] == limit == profile.json()["max_bytes"]


async def test_a_profile_value_as_deep_as_a_patch_allows_is_imported(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    admin = bearer(settings, tenant, "root", admin=True)
    exported = await client.get("/v1/users/ada/export", headers=admin)
    records = [json.loads(line) for line in exported.text.splitlines()]
    assert (await client.delete("/v1/admin/users/ada", headers=admin)).status_code == 200
    index = first_of(records, "profile")
    deepest = nested(32)
    # The API takes the same value: import and API draw the line at the same depth.
    patched = await client.patch(
        "/v1/users/me/profile",
        headers={**bearer(settings, tenant, "bob"), **JSON_PATCH},
        json=[{"op": "add", "path": "/depth", "value": deepest}],
    )
    assert patched.status_code == 200, patched.text
    records[index]["data"]["document"] = {"depth": deepest}

    response = await client.post(
        IMPORT,
        headers={**admin, **NDJSON},
        content=file_with(records, index, json.dumps(records[index])),
    )

    assert response.status_code == 200, response.text
    profile = await client.get("/v1/users/me/profile", headers=bearer(settings, tenant, "ada"))
    assert profile.json()["profile"]["depth"] == deepest
