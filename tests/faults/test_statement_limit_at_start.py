"""The statement limit (`MNEME_DB_STATEMENT_TIMEOUT_MS`) binds what requests run, not the
service's start: a database busy enough that the start's own reads wait past the limit (here, a
table they read held locked for a while) delays the start instead of failing it, and the
requests of the started service are bound as before."""

from __future__ import annotations

import asyncio

from asgi_lifespan import LifespanManager
from httpx import ASGITransport, AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from service.embedded_postgres import EmbeddedCluster
from service.main import create_app
from tests.conftest import assert_problem, bearer, make_settings, new_tenant

LIMIT_MS = 200
HELD_SECONDS = 1.0


async def _hold_locked(owner_engine: AsyncEngine, table: str, locked: asyncio.Event) -> None:
    async with owner_engine.connect() as owner:
        await owner.execute(text(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"))
        locked.set()
        await asyncio.sleep(HELD_SECONDS)
        await owner.rollback()


async def test_a_start_whose_reads_wait_past_the_limit_waits_and_requests_stay_bound(
    cluster: EmbeddedCluster, base_settings: Settings, owner_engine: AsyncEngine
) -> None:
    application = create_app(make_settings(cluster, db_statement_timeout_ms=LIMIT_MS))
    locked = asyncio.Event()
    # The vector columns' state, which the start reads, is locked for five times the limit.
    holding = asyncio.create_task(_hold_locked(owner_engine, "embedding_column", locked))
    await locked.wait()
    started = asyncio.get_running_loop().time()
    async with LifespanManager(application, startup_timeout=30):
        waited = asyncio.get_running_loop().time() - started
        await holding
        # It waited for the lock instead of failing at the limit.
        assert waited >= HELD_SECONDS - 0.2
        async with application.state.mneme.engine.connect() as connection:
            limit = await connection.scalar(text("SHOW statement_timeout"))
        assert limit == f"{LIMIT_MS}ms"
        transport = ASGITransport(app=application)
        async with AsyncClient(transport=transport, base_url="http://mneme.test") as client:
            headers = bearer(base_settings, new_tenant(), "ada")
            assert (await client.get("/v1/users/me/memories", headers=headers)).status_code == 200
            # A request that waits past the limit is still cancelled: a 503.
            async with owner_engine.connect() as owner:
                await owner.execute(text("LOCK TABLE memory IN ACCESS EXCLUSIVE MODE"))
                response = await client.get("/v1/users/me/memories", headers=headers)
                await owner.rollback()
            assert_problem(response, 503, "DATABASE_TIMEOUT")
