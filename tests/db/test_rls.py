"""Row-level security, proven in raw SQL as the runtime role: a query that forgets its tenant
filter still sees and writes nothing of another tenant."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.conftest import as_tenant, new_tenant

TENANT_TABLES = (
    "tenant",
    "user_account",
    "api_key",
    "profile",
    "thread",
    "message",
    "thread_summary",
    "memory",
    "memory_event",
    "memory_posting",
    "memory_owner_stats",
    "memory_lexeme_stats",
    "audit_log",
    "idempotency_record",
    "extraction_cursor",
    "retention_policy",
)

# pgqueuer's job queue (migration 20261129_1500): shared by all tenants and holding no tenant
# content (a job's payload is a tenant id and row ids), so deliberately not under RLS.
# The vector columns' state: which model each of memory's vector columns holds and which
# tenants already read the one being filled (tenant ids, no content). Global, read whole by every
# service process (`service.memories.vector_columns`), and read-only for the runtime role.
UNSCOPED_TABLES = (
    "pgqueuer",
    "pgqueuer_log",
    "pgqueuer_schedules",
    "pgqueuer_statistics",
    "embedding_column",
    "embedding_column_tenant",
)


async def seed_every_table(engine: AsyncEngine, tenant_id: str) -> None:
    """One row in every tenant table for `tenant_id`, written through the runtime role."""
    thread_id, message_id, memory_id = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    params = {"t": tenant_id, "thread": thread_id, "message": message_id, "memory": memory_id}
    statements = [
        "INSERT INTO tenant (id) VALUES (:t)",
        "INSERT INTO user_account (tenant_id, id) VALUES (:t, 'u1')",
        "INSERT INTO api_key (tenant_id, name, display_prefix, secret_hash, created_by) "
        "VALUES (:t, 'k', 'p', '\\x00', 'admin')",
        "INSERT INTO profile (tenant_id, scope, user_id) VALUES (:t, 'user', 'u1')",
        "INSERT INTO profile (tenant_id, scope) VALUES (:t, 'org')",
        "INSERT INTO thread (tenant_id, id, user_id) VALUES (:t, :thread, 'u1')",
        "INSERT INTO message (tenant_id, id, thread_id, user_id, seq, role, content) "
        "VALUES (:t, :message, :thread, 'u1', 0, 'user', 'hello')",
        "INSERT INTO thread_summary (tenant_id, thread_id, sequence, start_index, end_index) "
        "VALUES (:t, :thread, 0, 0, 1)",
        "INSERT INTO memory (tenant_id, id, scope, user_id, kind, text) "
        "VALUES (:t, :memory, 'user', 'u1', 'semantic', 'likes tea')",
        "INSERT INTO memory_posting (tenant_id, memory_id, owner_key, lexeme, kind, frequency, "
        "length, impact) VALUES (:t, :memory, 'user:u1', 'tea', 'semantic', 1, 2, 1.0)",
        "INSERT INTO memory_owner_stats (tenant_id, user_id, documents, total_length, "
        "refreshed_at) VALUES (:t, 'u1', 1, 2, now())",
        "INSERT INTO memory_lexeme_stats (tenant_id, user_id, lexeme, documents) "
        "VALUES (:t, 'u1', 'tea', 1)",
        "INSERT INTO memory_event (tenant_id, memory_id, user_id, action, new_text, actor) "
        "VALUES (:t, :memory, 'u1', 'add', 'likes tea', 'u1')",
        "INSERT INTO audit_log (tenant_id, actor_kind, actor_id, action, target_type) "
        "VALUES (:t, 'user', 'u1', 'test', 'none')",
        "INSERT INTO idempotency_record (tenant_id, principal, key, method, path, request_hash) "
        "VALUES (:t, 'u1', 'k1', 'POST', '/v1/things', 'h')",
        "INSERT INTO extraction_cursor (tenant_id, thread_id, through_seq) VALUES (:t, :thread, 0)",
        "INSERT INTO retention_policy (tenant_id, episodic_days) VALUES (:t, 30)",
    ]
    async with engine.begin() as connection:
        await as_tenant(connection, tenant_id)
        for statement in statements:
            await connection.execute(text(statement), params)


@pytest.fixture(scope="module")
async def two_tenants(runtime_engine: AsyncEngine) -> tuple[str, str]:
    tenant_a, tenant_b = new_tenant(), new_tenant()
    await seed_every_table(runtime_engine, tenant_a)
    await seed_every_table(runtime_engine, tenant_b)
    return tenant_a, tenant_b


@pytest.mark.parametrize("table", TENANT_TABLES)
async def test_unfiltered_select_sees_only_the_current_tenant(
    runtime_engine: AsyncEngine, two_tenants: tuple[str, str], table: str
) -> None:
    tenant_a, tenant_b = two_tenants
    column = "id" if table == "tenant" else "tenant_id"
    async with runtime_engine.begin() as connection:
        await as_tenant(connection, tenant_a)
        owners = (await connection.execute(text(f"SELECT {column} FROM {table}"))).scalars().all()
    assert tenant_a in owners
    assert tenant_b not in owners
    assert set(owners) == {tenant_a}


@pytest.mark.parametrize("table", TENANT_TABLES)
async def test_no_tenant_setting_sees_nothing(
    runtime_engine: AsyncEngine, two_tenants: tuple[str, str], table: str
) -> None:
    async with runtime_engine.connect() as connection:
        count = (await connection.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one()
    assert count == 0


async def test_insert_with_another_tenants_id_is_refused(
    runtime_engine: AsyncEngine, two_tenants: tuple[str, str]
) -> None:
    tenant_a, tenant_b = two_tenants
    with pytest.raises(DBAPIError, match="row-level security"):
        async with runtime_engine.begin() as connection:
            await as_tenant(connection, tenant_a)
            await connection.execute(
                text(
                    "INSERT INTO memory (tenant_id, scope, kind, text) "
                    "VALUES (:b, 'org', 'semantic', 'smuggled')"
                ),
                {"b": tenant_b},
            )


async def test_update_cannot_move_a_row_to_another_tenant(
    runtime_engine: AsyncEngine, two_tenants: tuple[str, str]
) -> None:
    tenant_a, tenant_b = two_tenants
    with pytest.raises(DBAPIError, match="row-level security"):
        async with runtime_engine.begin() as connection:
            await as_tenant(connection, tenant_a)
            await connection.execute(text("UPDATE audit_log SET tenant_id = :b"), {"b": tenant_b})


async def test_unfiltered_delete_leaves_other_tenants_untouched(
    runtime_engine: AsyncEngine,
) -> None:
    tenant_a, tenant_b = new_tenant(), new_tenant()
    await seed_every_table(runtime_engine, tenant_a)
    await seed_every_table(runtime_engine, tenant_b)
    async with runtime_engine.begin() as connection:
        await as_tenant(connection, tenant_a)
        await connection.execute(text("DELETE FROM memory"))
    async with runtime_engine.begin() as connection:
        await as_tenant(connection, tenant_b)
        remaining = (await connection.execute(text("SELECT count(*) FROM memory"))).scalar_one()
    assert remaining == 1


async def test_runtime_role_cannot_escape_row_level_security(runtime_engine: AsyncEngine) -> None:
    async with runtime_engine.connect() as connection:
        role = (
            await connection.execute(
                text(
                    "SELECT rolsuper, rolbypassrls, rolcreaterole, rolcreatedb "
                    "FROM pg_roles WHERE rolname = current_user"
                )
            )
        ).one()
        owned = (
            await connection.execute(
                text(
                    "SELECT count(*) FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner "
                    "WHERE r.rolname = current_user"
                )
            )
        ).scalar_one()
    assert (role.rolsuper, role.rolbypassrls, role.rolcreaterole, role.rolcreatedb) == (
        False,
        False,
        False,
        False,
    )
    assert owned == 0


async def test_every_table_with_data_is_tenant_scoped_and_forced(owner_engine: AsyncEngine) -> None:
    """Guards future migrations: a new table without tenant_id, RLS or FORCE fails here."""
    async with owner_engine.connect() as connection:
        rows = (
            await connection.execute(
                text(
                    """
            SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity,
                   EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid) AS has_policy,
                   EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid
                            AND a.attname IN ('tenant_id') AND NOT a.attisdropped) AS has_tenant
              FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
               AND c.relname <> 'alembic_version'
            """
                )
            )
        ).all()
    tables = {row.relname: row for row in rows if row.relname not in UNSCOPED_TABLES}
    assert set(tables) == set(TENANT_TABLES)
    assert {row.relname for row in rows} - set(tables) == set(UNSCOPED_TABLES)
    for name, row in tables.items():
        assert row.relrowsecurity and row.relforcerowsecurity and row.has_policy, name
        assert row.has_tenant or name == "tenant", name


async def test_policies_check_writes_as_well_as_reads(owner_engine: AsyncEngine) -> None:
    async with owner_engine.connect() as connection:
        rows = (
            await connection.execute(
                text(
                    "SELECT tablename, qual, with_check FROM pg_policies "
                    "WHERE schemaname = 'public'"
                )
            )
        ).all()
    assert {row.tablename for row in rows} == set(TENANT_TABLES)
    for row in rows:
        assert "current_setting('app.tenant_id'" in row.qual
        assert "current_setting('app.tenant_id'" in row.with_check
