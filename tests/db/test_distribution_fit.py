"""The schema fits a database sharded by tenant (Citus distributing on `tenant_id`).

A distributed table can only enforce a primary key or unique index that includes its
distribution column, and a foreign key between two distributed tables only when both sides
carry the distribution column in the same position (so both rows live on one shard). This
catalogue check keeps every future migration inside those rules, on single-node Postgres,
before any cluster sees it.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

# pgqueuer's job queue is global (one queue for every tenant, holding ids only) and stays a
# plain table on the Citus coordinator, as Citus advises for queue tables that are polled with
# SKIP LOCKED and LISTEN/NOTIFY; the distribution rules do not apply to it.
# The vector columns' state (which model each column holds, which tenants read the one being
# filled) is global too, read whole by every service process, and stays on the coordinator.
LOCAL_TABLES = frozenset(
    {
        "pgqueuer",
        "pgqueuer_log",
        "pgqueuer_schedules",
        "pgqueuer_statistics",
        "alembic_version",
        "embedding_column",
        "embedding_column_tenant",
    }
)

# `tenant` is the root of every tenant's rows: its key `id` is the tenant id itself.
TENANT_COLUMN = {"tenant": "id"}

KEYS_SQL = text(
    """
    SELECT r.relname AS table_name, c.conname AS name, c.contype::text AS kind,
           ARRAY(SELECT a.attname::text FROM unnest(c.conkey) WITH ORDINALITY AS k(num, pos)
                   JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.num
                  ORDER BY k.pos) AS columns,
           f.relname AS referenced_table,
           ARRAY(SELECT a.attname::text FROM unnest(c.confkey) WITH ORDINALITY AS k(num, pos)
                   JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.num
                  ORDER BY k.pos) AS referenced_columns
      FROM pg_constraint c
      JOIN pg_class r ON r.oid = c.conrelid
      JOIN pg_namespace n ON n.oid = r.relnamespace
      LEFT JOIN pg_class f ON f.oid = c.confrelid
     WHERE n.nspname = 'public' AND c.contype IN ('p', 'u', 'f')
    UNION ALL
    SELECT r.relname, x.relname, 'i',
           ARRAY(SELECT coalesce(a.attname::text, '<expression>')
                   FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k(num, pos)
                   LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.num
                  ORDER BY k.pos),
           NULL, NULL
      FROM pg_index i
      JOIN pg_class r ON r.oid = i.indrelid
      JOIN pg_class x ON x.oid = i.indexrelid
      JOIN pg_namespace n ON n.oid = r.relnamespace
     WHERE n.nspname = 'public' AND i.indisunique
    """
)


def _tenant_column(table: str) -> str:
    return TENANT_COLUMN.get(table, "tenant_id")


@pytest.fixture(scope="module")
async def keys(owner_engine: AsyncEngine) -> list[dict[str, object]]:
    async with owner_engine.connect() as connection:
        rows = (await connection.execute(KEYS_SQL)).mappings().all()
    return [dict(row) for row in rows if row["table_name"] not in LOCAL_TABLES]


def test_the_catalogue_query_sees_the_tenant_tables(keys: list[dict[str, object]]) -> None:
    tables = {key["table_name"] for key in keys}
    assert {"tenant", "memory", "message", "thread", "idempotency_record"} <= tables
    assert {key["kind"] for key in keys} >= {"p", "u", "f", "i"}


def test_every_primary_key_and_unique_index_includes_the_tenant(
    keys: list[dict[str, object]],
) -> None:
    offenders = [
        f"{key['table_name']}.{key['name']} {key['columns']}"
        for key in keys
        if key["kind"] in ("p", "u", "i")
        and _tenant_column(str(key["table_name"])) not in key["columns"]  # type: ignore[operator]
    ]
    assert offenders == []


def test_every_foreign_key_joins_on_the_tenant_in_the_same_position(
    keys: list[dict[str, object]],
) -> None:
    offenders = []
    for key in keys:
        if key["kind"] != "f":
            continue
        columns = list(key["columns"])  # type: ignore[call-overload]
        referenced = list(key["referenced_columns"])  # type: ignore[call-overload]
        local = _tenant_column(str(key["table_name"]))
        remote = _tenant_column(str(key["referenced_table"]))
        if local not in columns or remote not in referenced:
            offenders.append(f"{key['table_name']}.{key['name']}: no tenant column")
        elif columns.index(local) != referenced.index(remote):
            offenders.append(f"{key['table_name']}.{key['name']}: tenant columns do not pair")
    assert offenders == []
