"""Settings a statement made for itself are restored only if its transaction goes on
(`ScopedBeginConnection.restore_before_next_statement`): never when the transaction ends next,
and before the next statement whichever way that statement is sent — as a simple query (in the
same query), by SQLAlchemy, or on the driver connection."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from service.config import Settings
from service.db import (
    ScopedBeginConnection,
    create_engine,
    create_sessionmaker,
    tenant_transaction,
    transaction_driver,
)
from tests.db.sent_queries import sent_queries

CHANGE = "SET LOCAL plan_cache_mode = force_generic_plan"
RESTORE = "SET LOCAL plan_cache_mode TO DEFAULT"
PLANNER_SQL = "SELECT current_setting('plan_cache_mode')"


@pytest.fixture
async def engine(settings: Settings) -> AsyncIterator[AsyncEngine]:
    """One pooled connection: every transaction runs on the one whose queries are logged."""
    assert settings.database_url is not None
    engine = create_engine(
        settings.database_url.get_secret_value(), settings, pool_size=1, max_overflow=0
    )
    yield engine
    await engine.dispose()


async def _logged(engine: AsyncEngine) -> list[str]:
    async with engine.connect() as connection:
        return await sent_queries(connection)


async def _owing(session: AsyncSession) -> ScopedBeginConnection:
    """The session's driver connection, its planner changed for the transaction and the
    restoring owed."""
    driver = await transaction_driver(await session.connection())
    await driver.execute(CHANGE)
    assert isinstance(driver, ScopedBeginConnection)
    driver.restore_before_next_statement(RESTORE)
    return driver


@pytest.mark.parametrize("ending", ["COMMIT;", "ROLLBACK;"])
async def test_a_transaction_that_ends_next_never_sends_them(
    engine: AsyncEngine, tenant: str, ending: str
) -> None:
    sent = await _logged(engine)
    with contextlib.suppress(LookupError):
        async with tenant_transaction(create_sessionmaker(engine), tenant) as session:
            await _owing(session)
            if ending == "ROLLBACK;":
                raise LookupError
    assert sorted(sent) == sorted([f"BEGIN; SET LOCAL app.tenant_id = '{tenant}';", CHANGE, ending])
    # The setting ended with its transaction; nothing is owed to the next one.
    async with tenant_transaction(create_sessionmaker(engine), tenant) as session:
        assert await session.scalar(text(PLANNER_SQL)) == "auto"
    assert RESTORE not in "\n".join(sent)


async def test_a_simple_query_carries_them_in_the_same_query(
    engine: AsyncEngine, tenant: str
) -> None:
    sent = await _logged(engine)
    async with tenant_transaction(create_sessionmaker(engine), tenant) as session:
        driver = await _owing(session)
        await driver.execute("SAVEPOINT before_the_rest")
        # A rollback to a savepoint does not end the transaction: nothing is dropped by it.
        driver.restore_before_next_statement(RESTORE)
        await driver.execute("ROLLBACK TO SAVEPOINT before_the_rest")
        assert await session.scalar(text(PLANNER_SQL)) == "auto"
    assert f"{RESTORE}; SAVEPOINT before_the_rest" in sent
    assert f"{RESTORE}; ROLLBACK TO SAVEPOINT before_the_rest" in sent
    assert RESTORE not in sent


@pytest.mark.parametrize("through", ["sqlalchemy", "driver"])
async def test_the_next_statement_with_parameters_is_preceded_by_them(
    engine: AsyncEngine, tenant: str, through: str
) -> None:
    """SQLAlchemy's statements (by an engine event) and those run on the driver connection
    (`transaction_driver`) are prepared: the restoring goes before them, once."""
    sent = await _logged(engine)
    async with tenant_transaction(create_sessionmaker(engine), tenant) as session:
        await _owing(session)
        for _ in range(2):
            if through == "sqlalchemy":
                planner = await session.scalar(text(PLANNER_SQL))
            else:
                driver = await transaction_driver(await session.connection())
                planner = await driver.fetchval(PLANNER_SQL)
            assert planner == "auto"
    assert sent.count(RESTORE) == 1
