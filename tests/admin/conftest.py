"""Helpers for the admin tests: a user with data in every user-bearing table, and raw-SQL
counts (as the owner, across tenants) to prove what a purge left."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from tests.conftest import bearer

JSON_PATCH = {"content-type": "application/json-patch+json"}


@dataclass
class SeededUser:
    tenant_id: str
    user_id: str
    thread_ids: list[str]
    headers: dict[str, str]


async def seed_user(
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant_id: str,
    user_id: str,
    *,
    text_prefix: str = "",
) -> SeededUser:
    """Data for the user in every user-bearing table, through the API where it can be (and in
    raw SQL for what background passes write: summaries, cursors, pass records)."""
    headers = bearer(settings, tenant_id, user_id, name=f"{user_id} name", email=f"{user_id}@x.io")
    for kind, words in (("semantic", "likes green tea"), ("episodic", "visited Porto")):
        response = await client.post(
            "/v1/users/me/memories",
            headers={**headers, "Idempotency-Key": f"k-{kind}"},
            json={"kind": kind, "text": f"{text_prefix}{user_id} {words}"},
        )
        assert response.status_code == 201, response.text
    memory_id = response.json()["id"]
    changed = await client.patch(
        f"/v1/users/me/memories/{memory_id}",
        headers=headers,
        json={"text": f"{text_prefix}{user_id} visited Porto twice"},
    )
    assert changed.status_code == 200, changed.text
    patched = await client.patch(
        "/v1/users/me/profile",
        headers={**headers, **JSON_PATCH},
        json=[{"op": "add", "path": "/city", "value": f"{user_id}-town"}],
    )
    assert patched.status_code == 200, patched.text
    thread_ids = []
    for _ in range(2):
        thread = await client.post("/v1/users/me/threads", headers=headers, json={})
        assert thread.status_code == 201, thread.text
        thread_ids.append(thread.json()["id"])
        appended = await client.post(
            f"/v1/users/me/threads/{thread_ids[-1]}/messages",
            headers=headers,
            json={
                "messages": [
                    {"role": "user", "content": f"{text_prefix}hello from {user_id}"},
                    {"role": "assistant", "content": "hi"},
                ]
            },
        )
        assert appended.status_code == 201, appended.text
    async with owner_engine.begin() as connection:
        for thread_id in thread_ids:
            params = {"t": tenant_id, "th": thread_id, "u": user_id}
            await connection.execute(
                text(
                    "INSERT INTO thread_summary (tenant_id, thread_id, sequence, start_index, "
                    "end_index, entries) VALUES (:t, :th, 1, 0, 2, "
                    '\'[{"question": "q", "answer": "a", "refs": []}]\')'
                ),
                params,
            )
            await connection.execute(
                text(
                    "INSERT INTO extraction_cursor (tenant_id, thread_id, through_seq) "
                    "VALUES (:t, :th, 1)"
                ),
                params,
            )
            await connection.execute(
                text(
                    "INSERT INTO audit_log (tenant_id, actor_kind, actor_id, action, target_type, "
                    "target_id, detail) VALUES (:t, 'system', 'mneme:turns', 'extraction.pass', "
                    "'thread', :th, jsonb_build_object('user_id', CAST(:u AS text)))"
                ),
                params,
            )
    return SeededUser(tenant_id, user_id, thread_ids, headers)


async def rows_of(owner_engine: AsyncEngine, tenant_id: str, user_id: str) -> dict[str, int]:
    """Rows of the user per table, counted as the owner (no row-level security in the way)."""
    queries = {
        "user_account": "SELECT count(*) FROM user_account WHERE tenant_id = :t AND id = :u",
        "profile": "SELECT count(*) FROM profile WHERE tenant_id = :t AND user_id = :u",
        "thread": "SELECT count(*) FROM thread WHERE tenant_id = :t AND user_id = :u",
        "message": "SELECT count(*) FROM message WHERE tenant_id = :t AND user_id = :u",
        "memory": "SELECT count(*) FROM memory WHERE tenant_id = :t AND user_id = :u",
        "memory_event": "SELECT count(*) FROM memory_event WHERE tenant_id = :t AND user_id = :u",
        "thread_summary": "SELECT count(*) FROM thread_summary s WHERE tenant_id = :t AND "
        "thread_id IN (SELECT thread_id FROM message WHERE tenant_id = :t AND user_id = :u "
        "UNION SELECT id FROM thread WHERE tenant_id = :t AND user_id = :u)",
        "idempotency_record": "SELECT count(*) FROM idempotency_record WHERE tenant_id = :t "
        "AND (principal = 'user:' || :u OR path LIKE '/v1/users/' || :u || '%')",
        "audit_log": "SELECT count(*) FROM audit_log WHERE tenant_id = :t "
        "AND action NOT LIKE 'admin.%' AND (target_id = :u OR detail ->> 'user_id' = :u "
        "OR detail::text LIKE '%' || :u || '-town%')",
    }
    counts: dict[str, int] = {}
    async with owner_engine.connect() as connection:
        for table, sql in queries.items():
            value = await connection.execute(text(sql), {"t": tenant_id, "u": user_id})
            counts[table] = int(value.scalar_one())
    return counts


async def rows_by_thread(
    owner_engine: AsyncEngine, tenant_id: str, thread_ids: list[str]
) -> dict[str, int]:
    """Rows left that hang off these threads (summaries, cursors, messages, queued jobs)."""
    ids = [uuid.UUID(t) for t in thread_ids]
    params: dict[str, Any] = {"t": tenant_id, "ids": ids, "texts": thread_ids}
    counts: dict[str, int] = {}
    async with owner_engine.connect() as connection:
        for table in ("thread_summary", "extraction_cursor", "message"):
            value = await connection.execute(
                text(
                    f"SELECT count(*) FROM {table} WHERE tenant_id = :t AND thread_id = ANY(:ids)"
                ),
                params,
            )
            counts[table] = int(value.scalar_one())
        value = await connection.execute(
            text(
                "SELECT count(*) FROM pgqueuer WHERE convert_from(payload, 'UTF8')::jsonb "
                "->> 'thread_id' = ANY(CAST(:texts AS text[]))"
            ),
            params,
        )
        counts["pgqueuer"] = int(value.scalar_one())
    return counts


RLS_TABLES_SQL = """
    SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = current_schema() AND c.relkind = 'r' AND c.relrowsecurity
"""


async def tenant_rows(owner_engine: AsyncEngine, tenant_id: str) -> dict[str, int]:
    """Rows of the tenant in every table under row-level security, counted as the owner."""
    counts: dict[str, int] = {}
    async with owner_engine.connect() as connection:
        for table in (await connection.execute(text(RLS_TABLES_SQL))).scalars():
            column = "id" if table == "tenant" else "tenant_id"
            value = await connection.execute(
                text(f"SELECT count(*) FROM {table} WHERE {column} = :t"),
                {"t": tenant_id},
            )
            counts[table] = int(value.scalar_one())
    return counts
