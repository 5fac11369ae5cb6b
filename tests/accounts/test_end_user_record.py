"""Each end-user request records its user; while the row already says so, nothing is written
and nothing is locked, so one user's requests never wait for each other's commit. Whether the
row says so is asked in the query of the request's BEGIN (no round trip of its own), or on its
own when that cannot be written as literals."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from service.accounts.dependencies import EndUserRecord
from service.accounts.repository import end_user_current_sql
from service.auth.principal import AccountClaims, Principal
from service.config import Settings
from service.db import begun_with, create_engine, create_sessionmaker, tenant_transaction
from tests.db.sent_queries import sent_queries

CLAIMS = AccountClaims(name="Ada", email="ada@example.com", socials=("github",))

ROW_SQL = text(
    "SELECT name, email, socials, last_seen_at FROM user_account"
    " WHERE tenant_id = :tenant AND id = 'ada'"
)

ASKED = ["in BEGIN's query", "on its own"]
"""How a request asks whether the user's row already says what its token carries."""


@asynccontextmanager
async def _request(
    sessionmaker: async_sessionmaker[AsyncSession],
    tenant: str,
    asked: str,
    claims: AccountClaims = CLAIMS,
    *,
    lock_timeout: bool = False,
) -> AsyncIterator[AsyncSession]:
    """A request's transaction of end user ada, recorded as the unit of work records it (with
    `lock_timeout`, its writes wait at most 200 ms for a lock)."""
    principal = Principal(tenant_id=tenant, subject="ada", kind="user", credential="jwt")
    principal = Principal(**{**principal.__dict__, "account": claims})
    record = EndUserRecord()
    with_begin = record.with_begin(principal) if asked == ASKED[0] else None
    async with tenant_transaction(sessionmaker, tenant, with_begin=with_begin) as session:
        if lock_timeout:
            await session.execute(text("SET LOCAL lock_timeout = '200ms'"))
        await record(session, principal, begun_with(session))
        yield session


async def _row(engine: AsyncEngine, tenant: str) -> tuple[str, str, list[str], datetime]:
    async with engine.connect() as connection:
        name, email, socials, last_seen = (
            await connection.execute(ROW_SQL, {"tenant": tenant})
        ).one()
    return name, email, socials, last_seen


async def _recorded(
    engine: AsyncEngine, tenant: str, asked: str
) -> async_sessionmaker[AsyncSession]:
    """Sessions of `engine`, once ada has been recorded by one of them."""
    sessionmaker = create_sessionmaker(engine)
    async with _request(sessionmaker, tenant, asked):
        pass
    return sessionmaker


@pytest.mark.parametrize("asked", ASKED)
async def test_one_end_users_requests_do_not_wait_for_each_others_commit(
    runtime_engine: AsyncEngine, owner_engine: AsyncEngine, tenant: str, asked: str
) -> None:
    sessionmaker = await _recorded(runtime_engine, tenant, asked)
    recorded = await _row(owner_engine, tenant)

    # The first request's transaction is still open when the second records the same user: an
    # upsert would wait for its row lock, past the lock timeout.
    async with (
        _request(sessionmaker, tenant, asked),
        _request(sessionmaker, tenant, asked, lock_timeout=True),
    ):
        pass

    assert await _row(owner_engine, tenant) == recorded


@pytest.mark.parametrize("asked", ASKED)
async def test_a_stale_mark_or_new_claims_are_still_written(
    runtime_engine: AsyncEngine, owner_engine: AsyncEngine, tenant: str, asked: str
) -> None:
    sessionmaker = await _recorded(runtime_engine, tenant, asked)
    async with owner_engine.begin() as connection:
        await connection.execute(
            text(
                "UPDATE user_account SET last_seen_at = now() - interval '10 minutes'"
                " WHERE tenant_id = :tenant AND id = 'ada'"
            ),
            {"tenant": tenant},
        )
    stale = (await _row(owner_engine, tenant))[3]

    async with _request(sessionmaker, tenant, asked):
        pass
    refreshed = await _row(owner_engine, tenant)
    renaming = AccountClaims(name="Ada L.", email="ada@example.com")
    async with _request(sessionmaker, tenant, asked, renaming):
        pass
    renamed = await _row(owner_engine, tenant)
    # A token without account claims refreshes only the mark; the overlay stays.
    async with _request(sessionmaker, tenant, asked, AccountClaims()):
        pass
    unclaimed = await _row(owner_engine, tenant)

    assert refreshed[:3] == ("Ada", "ada@example.com", ["github"])
    assert (refreshed[3] - stale).total_seconds() >= 9 * 60
    assert renamed[:3] == ("Ada L.", "ada@example.com", [])
    assert unclaimed == renamed


@pytest.mark.parametrize(
    "claims",
    [
        CLAIMS,
        AccountClaims(),
        AccountClaims(name="O'Brien \\ {user}", email=None, avatar="ünïcødé 🙂", socials=("a'b",)),
    ],
)
async def test_a_recorded_users_request_asks_in_begins_query_alone(
    settings: Settings, tenant: str, claims: AccountClaims
) -> None:
    """Recorded once, the user's next request sends BEGIN with the tenant and the question
    in one query, then its own statements and COMMIT: whatever the claims hold, written in as
    literals they read back as the row's values."""
    assert settings.database_url is not None
    engine = create_engine(
        settings.database_url.get_secret_value(), settings, pool_size=1, max_overflow=0
    )
    try:
        sessionmaker = create_sessionmaker(engine)
        async with _request(sessionmaker, tenant, ASKED[0], claims):
            pass
        async with engine.connect() as connection:
            sent = await sent_queries(connection)
        async with _request(sessionmaker, tenant, ASKED[0], claims) as session:
            assert begun_with(session) == "SELECT 1"
    finally:
        await engine.dispose()
    check = end_user_current_sql(tenant, "ada", claims)
    assert sent == [f"BEGIN; SET LOCAL app.tenant_id = '{tenant}'; {check};", "COMMIT;"]


def test_a_value_no_literal_can_hold_is_asked_on_its_own() -> None:
    assert end_user_current_sql("t", "ada", AccountClaims(name="a\x00b")) is None
    assert end_user_current_sql("t", "ada", AccountClaims(email="lone \ud800")) is None
    assert end_user_current_sql("t", "ada", AccountClaims(name="ab")) is not None
