"""A transaction the database rolls back to end a deadlock is a 503 `DATABASE_CONFLICT` with
`Retry-After`, not a 500: nothing of the request was applied, and sent again it runs anew.

The service's writes take their locks in one order (a user's write lock first), so none of
them deadlocks with another; the deadlock here is made by the test's own transaction, which
takes them in the other order: it holds the memory's row, the request takes the user's write
lock and waits for the row, and the test then asks for the user's write lock alone. The
request waited first, so the database's deadlock check ends it."""

from __future__ import annotations

import asyncio

from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.admin.repository import AdminRepository
from service.config import Settings
from service.db import create_sessionmaker, tenant_transaction
from tests.conftest import assert_problem, bearer
from tests.fixtures.factories import remember
from tests.fixtures.locks import waiting_locks


async def test_a_request_rolled_back_for_a_deadlock_is_a_503_and_runs_when_sent_again(
    client: AsyncClient,
    settings: Settings,
    runtime_engine: AsyncEngine,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    headers = bearer(settings, tenant, "backend", service=True)
    memory = await remember(client, headers, user="ada", text="Ada likes tea.")
    path = f"/v1/users/ada/memories/{memory['id']}"
    async with tenant_transaction(create_sessionmaker(runtime_engine), tenant) as session:
        await session.execute(
            text("SELECT 1 FROM memory WHERE tenant_id = :t AND id = :id FOR UPDATE"),
            {"t": tenant, "id": memory["id"]},
        )
        change = asyncio.create_task(
            client.patch(path, headers=headers, json={"text": "Ada likes green tea."})
        )
        await waiting_locks(owner_engine)
        await AdminRepository(session, tenant).lock_user_writes("ada")
        response = await change
    body = assert_problem(response, 503, "DATABASE_CONFLICT")
    assert response.headers["Retry-After"] == "1" and body["retry_after_seconds"] == 1
    assert (await client.get(path, headers=headers)).json()["text"] == "Ada likes tea."
    again = await client.patch(path, headers=headers, json={"text": "Ada likes green tea."})
    assert again.status_code == 200, again.text
    assert again.json()["text"] == "Ada likes green tea."
