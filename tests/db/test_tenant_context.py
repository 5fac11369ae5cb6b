"""The tenant context: `SET LOCAL app.tenant_id` with a whitelisted, quoted literal.

`SET` takes no bind parameters, so the tenant id becomes part of a SQL text. These tests prove
that only ids of the identifier whitelist get there, that quoting holds even for text that
tries to break out of the literal, and that the setting dies with its transaction (what
PgBouncer's transaction mode relies on).
"""

from __future__ import annotations

import base64
import uuid

import pytest
from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from service.db import (
    InvalidTenantId,
    create_engine,
    create_sessionmaker,
    quote_literal,
    set_tenant,
    set_tenant_sql,
    tenant_transaction,
)
from tests.conftest import assert_problem, new_tenant
from tests.db.sent_queries import sent_queries

CURRENT_TENANT_SQL = text("SELECT current_setting('app.tenant_id', true)")

HOSTILE_TENANT_IDS = (
    "x'; RESET ROLE; --",
    "a' OR '1'='1",
    "a\\'; SELECT 1; --",
    "tenant\x00other",
    "two words",
    "",
    "-leading-dash",
    "ünïcode",
    "a" * 129,
)


@pytest.mark.parametrize("tenant_id", HOSTILE_TENANT_IDS)
def test_a_tenant_id_outside_the_whitelist_never_becomes_sql(tenant_id: str) -> None:
    with pytest.raises(InvalidTenantId):
        set_tenant_sql(tenant_id)


def test_the_statement_is_a_set_local_with_a_quoted_literal() -> None:
    assert set_tenant_sql("acme-1") == "SET LOCAL app.tenant_id = 'acme-1'"


@pytest.mark.parametrize("value", ["O'Brien", "x'; DROP TABLE tenant; --", "''", "'", "a''b'"])
async def test_quoted_text_reads_back_as_the_same_data(
    runtime_engine: AsyncEngine, value: str
) -> None:
    async with runtime_engine.connect() as connection:
        raw = await connection.get_raw_connection()
        assert raw.driver_connection is not None
        echoed = await raw.driver_connection.fetchval("SELECT " + quote_literal(value))
    assert echoed == value


@pytest.mark.parametrize("value", ["a\\b", "a\x00b"])
def test_quoting_refuses_backslash_and_nul(value: str) -> None:
    with pytest.raises(InvalidTenantId):
        quote_literal(value)


async def test_the_setting_holds_for_its_transaction_only(runtime_engine: AsyncEngine) -> None:
    tenant = "t-" + uuid.uuid4().hex[:6] + ".a_b:c@d|e+f=g"
    async with runtime_engine.connect() as connection:
        async with connection.begin():
            await set_tenant(connection, tenant)
            assert (await connection.execute(CURRENT_TENANT_SQL)).scalar() == tenant
        # Same server connection, next transaction: nothing left behind for the next client.
        async with connection.begin():
            assert (await connection.execute(CURRENT_TENANT_SQL)).scalar() in (None, "")


async def test_the_setting_goes_in_the_same_query_as_begin(runtime_engine: AsyncEngine) -> None:
    tenant = new_tenant()
    async with runtime_engine.connect() as connection:
        sent = await sent_queries(connection)
        async with connection.begin():
            await set_tenant(connection, tenant)
            assert (await connection.execute(CURRENT_TENANT_SQL)).scalar() == tenant
    # One round trip opens the transaction already scoped; nothing sends the setting again.
    assert sorted(sent) == sorted(
        [
            f"BEGIN; SET LOCAL app.tenant_id = '{tenant}';",
            CURRENT_TENANT_SQL.text,
            "COMMIT;",
        ]
    )


async def test_a_transaction_under_way_gets_the_setting_as_a_statement_of_its_own(
    runtime_engine: AsyncEngine,
) -> None:
    tenant = new_tenant()
    async with runtime_engine.connect() as connection:
        sent = await sent_queries(connection)
        async with connection.begin():
            assert (await connection.execute(CURRENT_TENANT_SQL)).scalar() in (None, "")
            await set_tenant(connection, tenant)
            assert (await connection.execute(CURRENT_TENANT_SQL)).scalar() == tenant
    assert sorted(sent) == sorted(
        [
            CURRENT_TENANT_SQL.text,
            "BEGIN;",
            f"SET LOCAL app.tenant_id = '{tenant}'",
            CURRENT_TENANT_SQL.text,
            "COMMIT;",
        ]
    )


async def test_a_statement_sent_with_the_setting_tells_its_command_tag(
    runtime_engine: AsyncEngine,
) -> None:
    """`also` runs after the setting, in BEGIN's query when the transaction has not begun and
    as a statement of its own when it has; either way its command tag comes back."""
    tenant = new_tenant()
    count_one = "SELECT 1 WHERE current_setting('app.tenant_id') = " + quote_literal(tenant)
    async with runtime_engine.connect() as connection:
        sent = await sent_queries(connection)
        async with connection.begin():
            assert await set_tenant(connection, tenant, also=count_one) == "SELECT 1"
        async with connection.begin():
            await connection.execute(CURRENT_TENANT_SQL)
            assert await set_tenant(connection, tenant, also=count_one) == "SELECT 1"
            assert await set_tenant(connection, tenant, also=count_one + " AND false") == (
                "SELECT 0"
            )
    assert f"BEGIN; SET LOCAL app.tenant_id = '{tenant}'; {count_one};" in sent
    assert count_one in sent


async def test_a_request_transaction_is_three_round_trips(settings: Settings) -> None:
    """What every request runs (`tenant_transaction`): BEGIN with the setting, the request's
    statements (here one), COMMIT."""
    assert settings.database_url is not None
    # One pooled connection, so the transaction runs on the one whose queries are logged.
    engine = create_engine(
        settings.database_url.get_secret_value(), settings, pool_size=1, max_overflow=0
    )
    tenant = new_tenant()
    try:
        async with engine.connect() as connection:
            sent = await sent_queries(connection)
        async with tenant_transaction(create_sessionmaker(engine), tenant) as session:
            assert (await session.execute(CURRENT_TENANT_SQL)).scalar() == tenant
    finally:
        await engine.dispose()
    assert sorted(sent) == sorted(
        [
            f"BEGIN; SET LOCAL app.tenant_id = '{tenant}';",
            CURRENT_TENANT_SQL.text,
            "COMMIT;",
        ]
    )


async def test_a_refused_tenant_id_leaves_the_transaction_unscoped(
    runtime_engine: AsyncEngine,
) -> None:
    async with runtime_engine.connect() as connection, connection.begin():
        with pytest.raises(InvalidTenantId):
            await set_tenant(connection, "x'; RESET ROLE; --")
        assert (await connection.execute(CURRENT_TENANT_SQL)).scalar() in (None, "")
        assert (await connection.execute(text("SELECT count(*) FROM tenant"))).scalar() == 0


async def test_rls_sees_the_rows_of_a_tenant_id_using_every_allowed_punctuation(
    runtime_engine: AsyncEngine,
) -> None:
    tenant = "p" + uuid.uuid4().hex[:6] + "._:@|+=-z"
    async with runtime_engine.begin() as connection:
        await set_tenant(connection, tenant)
        await connection.execute(text("INSERT INTO tenant (id) VALUES (:t)"), {"t": tenant})
    async with runtime_engine.begin() as connection:
        await set_tenant(connection, tenant)
        ids = (await connection.execute(text("SELECT id FROM tenant"))).scalars().all()
    assert ids == [tenant]


async def test_an_api_key_with_a_forged_hostile_tenant_is_unauthenticated(
    client: AsyncClient,
) -> None:
    forged_tenant = base64.urlsafe_b64encode(b"x'; RESET ROLE; --").decode().rstrip("=")
    key = f"mneme.{forged_tenant}.{uuid.uuid4().hex}.secret"
    response = await client.get("/v1/users/me", headers={"Authorization": f"Bearer {key}"})
    assert_problem(response, 401, "UNAUTHENTICATED")


async def test_an_api_key_of_a_valid_but_unknown_tenant_is_unauthenticated(
    client: AsyncClient,
) -> None:
    tenant_part = base64.urlsafe_b64encode(new_tenant().encode()).decode().rstrip("=")
    key = f"mneme.{tenant_part}.{uuid.uuid4().hex}.secret"
    response = await client.get("/v1/users/me", headers={"Authorization": f"Bearer {key}"})
    assert_problem(response, 401, "UNAUTHENTICATED")
