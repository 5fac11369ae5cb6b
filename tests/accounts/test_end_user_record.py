"""Each end-user request records its user; while the row already says so, nothing is written
and nothing is locked, so one user's requests never wait for each other's commit."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from service.accounts.repository import AccountRepository
from service.auth.principal import AccountClaims
from service.db import create_sessionmaker, tenant_transaction

CLAIMS = AccountClaims(name="Ada", email="ada@example.com", socials=("github",))

ROW_SQL = text(
    "SELECT name, email, socials, last_seen_at FROM user_account"
    " WHERE tenant_id = :tenant AND id = 'ada'"
)


async def _touch(session: AsyncSession, tenant: str, claims: AccountClaims = CLAIMS) -> None:
    await AccountRepository(session, tenant).touch_end_user("ada", claims)


async def _row(engine: AsyncEngine, tenant: str) -> tuple[str, str, list[str], datetime]:
    async with engine.connect() as connection:
        name, email, socials, last_seen = (
            await connection.execute(ROW_SQL, {"tenant": tenant})
        ).one()
    return name, email, socials, last_seen


async def _recorded(engine: AsyncEngine, tenant: str) -> async_sessionmaker[AsyncSession]:
    """Sessions of `engine`, once ada has been recorded by one of them."""
    sessionmaker = create_sessionmaker(engine)
    async with tenant_transaction(sessionmaker, tenant) as session:
        await _touch(session, tenant)
    return sessionmaker


async def test_one_end_users_requests_do_not_wait_for_each_others_commit(
    runtime_engine: AsyncEngine, owner_engine: AsyncEngine, tenant: str
) -> None:
    sessionmaker = await _recorded(runtime_engine, tenant)
    recorded = await _row(owner_engine, tenant)

    # The first request's transaction is still open when the second records the same user: an
    # upsert would wait for its row lock, past the lock timeout.
    async with tenant_transaction(sessionmaker, tenant) as first:
        await _touch(first, tenant)
        async with tenant_transaction(sessionmaker, tenant) as second:
            await second.execute(text("SET LOCAL lock_timeout = '200ms'"))
            await _touch(second, tenant)

    assert await _row(owner_engine, tenant) == recorded


async def test_a_stale_mark_or_new_claims_are_still_written(
    runtime_engine: AsyncEngine, owner_engine: AsyncEngine, tenant: str
) -> None:
    sessionmaker = await _recorded(runtime_engine, tenant)
    async with owner_engine.begin() as connection:
        await connection.execute(
            text(
                "UPDATE user_account SET last_seen_at = now() - interval '10 minutes'"
                " WHERE tenant_id = :tenant AND id = 'ada'"
            ),
            {"tenant": tenant},
        )
    stale = (await _row(owner_engine, tenant))[3]

    async with tenant_transaction(sessionmaker, tenant) as session:
        await _touch(session, tenant)
    refreshed = await _row(owner_engine, tenant)
    async with tenant_transaction(sessionmaker, tenant) as session:
        await _touch(session, tenant, AccountClaims(name="Ada L.", email="ada@example.com"))
    renamed = await _row(owner_engine, tenant)
    # A token without account claims refreshes only the mark; the overlay stays.
    async with tenant_transaction(sessionmaker, tenant) as session:
        await _touch(session, tenant, AccountClaims())
    unclaimed = await _row(owner_engine, tenant)

    assert refreshed[:3] == ("Ada", "ada@example.com", ["github"])
    assert (refreshed[3] - stale).total_seconds() >= 9 * 60
    assert renamed[:3] == ("Ada L.", "ada@example.com", [])
    assert unclaimed == renamed
