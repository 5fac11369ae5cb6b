"""The migrations build the whole schema, and revert it cleanly, on a database of their own."""

from __future__ import annotations

import logging

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service import db_migrations
from service.db import create_engine
from service.embedded_postgres import OWNER_ROLE, EmbeddedCluster, bootstrap
from tests.conftest import as_tenant, make_settings

SCHEMA_SNAPSHOT_SQL = text(
    """
    SELECT 'table:' || tablename AS item FROM pg_tables WHERE schemaname = 'public'
    UNION ALL SELECT 'index:' || indexname FROM pg_indexes WHERE schemaname = 'public'
    UNION ALL SELECT 'policy:' || tablename || '.' || policyname FROM pg_policies
    UNION ALL SELECT 'column:' || table_name || '.' || column_name || ':' || data_type
      FROM information_schema.columns WHERE table_schema = 'public'
    ORDER BY 1
    """
)


async def _snapshot(engine: AsyncEngine) -> list[str]:
    async with engine.connect() as connection:
        return list((await connection.execute(SCHEMA_SNAPSHOT_SQL)).scalars())


def _moves_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "mneme.migrations" and record.levelno == logging.INFO
    ]


def _alembic_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("alembic")]
    caplog.clear()
    return lines


async def test_downgrade_to_base_and_upgrade_to_head_round_trip(
    cluster: EmbeddedCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="alembic")
    caplog.set_level(logging.DEBUG, logger="mneme.migrations")
    database = "mneme_roundtrip"
    await bootstrap(cluster, database)
    settings = make_settings(cluster)
    head = db_migrations.head_revision(settings)
    revisions = len(
        list(ScriptDirectory.from_config(db_migrations.alembic_config(settings)).walk_revisions())
    )
    engine = create_engine(cluster.url(OWNER_ROLE, database), settings, pool_size=1)
    try:
        # A new database is given its schema in one line (each revision's title at debug)...
        await db_migrations.upgrade(engine, settings, "20261129_1300")
        assert [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG] == [
            "applied 20261129_1200: Initial schema: tenants, users, API keys, profiles, "
            "threads, memories, history, audit.",
            "applied 20261129_1300: Idempotency records: the stored outcome of POSTs sent with "
            "an `Idempotency-Key`.",
        ]
        assert _moves_logged(caplog) == [
            "schema migrated from an empty database to 20261129_1300 (2 revisions)"
        ]
        assert _alembic_logged(caplog) == []
        # ... a schema moved on says each revision as it starts, on one line, then the run.
        await db_migrations.upgrade(engine, settings)
        assert _moves_logged(caplog) == [
            f"schema migrated from 20261129_1300 to {head} ({revisions - 2} revisions)"
        ]
        running = _alembic_logged(caplog)
        assert len(running) == revisions - 2
        assert running[0].startswith(
            "Running upgrade 20261129_1300 -> 20261129_1400, Exact-duplicate memories"
        )
        assert all(line.startswith("Running upgrade") and "\n" not in line for line in running)
        await db_migrations.upgrade(engine, settings)
        assert _moves_logged(caplog) == []
        assert _alembic_logged(caplog) == []
        at_head = await _snapshot(engine)
        assert await db_migrations.current_revision(engine) == db_migrations.head_revision(settings)
        assert "table:memory" in at_head
        # The table keeps no vector graph and no text index of its own (owners' graphs only).
        assert not [item for item in at_head if item.endswith("_hnsw") or "ix_memory_tsv" in item]
        assert "index:ix_memory_posting_impact" in at_head
        assert "column:memory.embedding:USER-DEFINED" in at_head

        await db_migrations.downgrade(engine, settings, "base")
        assert await db_migrations.current_revision(engine) is None
        assert _moves_logged(caplog) == [
            f"schema downgraded from {head} to base ({revisions} revisions)"
        ]
        assert len(_alembic_logged(caplog)) == revisions
        leftovers = [item for item in await _snapshot(engine) if "alembic_version" not in item]
        assert leftovers == []

        await db_migrations.upgrade(engine, settings)
        assert await _snapshot(engine) == at_head
    finally:
        await engine.dispose()


async def test_embedding_column_uses_the_configured_dimensions(owner_engine: AsyncEngine) -> None:
    async with owner_engine.connect() as connection:
        declared = (
            await connection.execute(
                text(
                    "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                    "WHERE attrelid = 'memory'::regclass AND attname = 'embedding'"
                )
            )
        ).scalar_one()
    assert declared == "vector(384)"


async def test_generated_search_columns_are_computed_by_postgres(
    runtime_engine: AsyncEngine, tenant: str
) -> None:
    async with runtime_engine.begin() as connection:
        await as_tenant(connection, tenant)
        await connection.execute(text("INSERT INTO tenant (id) VALUES (:t)"), {"t": tenant})
        row = (
            await connection.execute(
                text(
                    "INSERT INTO memory (tenant_id, scope, kind, text) "
                    "VALUES (:t, 'org', 'semantic', '  Prefers   GREEN tea ') "
                    "RETURNING tsv::text AS tsv, content_hash"
                ),
                {"t": tenant},
            )
        ).one()
        same = (
            await connection.execute(
                text("SELECT md5('prefers green tea') = :h"), {"h": row.content_hash}
            )
        ).scalar_one()
    assert "'green'" in row.tsv and "'tea'" in row.tsv
    assert same
