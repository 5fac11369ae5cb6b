"""Idempotency keys, driven through real tenant-scoped transactions as the runtime role."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi import FastAPI
from httpx import ASGITransport, AsyncClient
from pydantic import BaseModel
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker
from starlette.requests import Request

from service.db import create_sessionmaker, tenant_transaction
from service.errors import ValidationFailed, install_problem_handlers
from service.kit.idempotency import (
    REPLAYED_HEADER,
    IdempotencyClaim,
    IdempotencyKeyHeader,
    IdempotencyKeyInProgress,
    IdempotencyKeyReused,
    IdempotencyStore,
    IdempotentReplay,
)
from tests.conftest import assert_problem, new_tenant

PATH = "/v1/users/me/memories"
BODY = {"text": "likes green tea", "kind": "semantic"}
RESPONSE = {"id": "m-1", "text": "likes green tea"}


class Rollback(Exception):
    """Raised inside a transaction to roll it back."""


@pytest.fixture
def sessionmaker(runtime_engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return create_sessionmaker(runtime_engine)


@asynccontextmanager
async def scoped(
    sessionmaker: async_sessionmaker[AsyncSession], tenant_id: str
) -> AsyncIterator[AsyncSession]:
    """A tenant transaction whose tenant row exists, as the request's session would be."""
    async with tenant_transaction(sessionmaker, tenant_id) as session:
        await session.execute(
            text("INSERT INTO tenant (id) VALUES (:t) ON CONFLICT DO NOTHING"), {"t": tenant_id}
        )
        yield session


async def claim_and_complete(
    sessionmaker: async_sessionmaker[AsyncSession],
    tenant_id: str,
    key: str,
    *,
    principal: str = "alice",
    body: Any = BODY,
    response: Any = RESPONSE,
    ttl: timedelta | None = None,
) -> None:
    async with scoped(sessionmaker, tenant_id) as session:
        store = _store(session, tenant_id, principal, ttl)
        claim = await store.begin(key, "POST", PATH, body)
        assert isinstance(claim, IdempotencyClaim)
        await store.complete(claim, 201, response)


async def begin_once(
    sessionmaker: async_sessionmaker[AsyncSession],
    tenant_id: str,
    key: str,
    *,
    principal: str = "alice",
    method: str = "POST",
    path: str = PATH,
    body: Any = BODY,
    ttl: timedelta | None = None,
) -> IdempotentReplay | IdempotencyClaim:
    """`begin` in a transaction of its own, committed (so a claim stays open, uncompleted)."""
    async with scoped(sessionmaker, tenant_id) as session:
        return await _store(session, tenant_id, principal, ttl).begin(key, method, path, body)


def _store(
    session: AsyncSession, tenant_id: str, principal: str, ttl: timedelta | None
) -> IdempotencyStore:
    if ttl is None:
        return IdempotencyStore(session, tenant_id, principal)
    return IdempotencyStore(session, tenant_id, principal, ttl=ttl)


def new_key() -> str:
    return str(uuid.uuid4())


async def test_a_retry_after_the_first_request_committed_replays_its_response(
    sessionmaker: async_sessionmaker[AsyncSession], tenant: str
) -> None:
    key = new_key()
    await claim_and_complete(sessionmaker, tenant, key)

    outcome = await begin_once(sessionmaker, tenant, key)

    assert outcome == IdempotentReplay(status_code=201, body=RESPONSE)


async def test_a_replay_renders_the_stored_response_marked_as_replayed() -> None:
    replay = IdempotentReplay(status_code=201, body=RESPONSE)

    response = replay.response()

    assert response.status_code == 201
    assert response.headers[REPLAYED_HEADER] == "true"
    assert response.body == b'{"id":"m-1","text":"likes green tea"}'


async def test_an_empty_replay_keeps_no_content_empty() -> None:
    response = IdempotentReplay(status_code=204, body=None).response()

    assert response.status_code == 204
    assert response.body == b""


async def test_the_same_key_with_a_different_body_is_refused_as_reused(
    sessionmaker: async_sessionmaker[AsyncSession], tenant: str
) -> None:
    key = new_key()
    await claim_and_complete(sessionmaker, tenant, key)

    with pytest.raises(IdempotencyKeyReused) as caught:
        await begin_once(sessionmaker, tenant, key, body={**BODY, "text": "likes coffee"})

    assert caught.value.status == 409
    assert caught.value.code == "IDEMPOTENCY_KEY_REUSED"


@pytest.mark.parametrize(
    ("method", "path"), [("PUT", PATH), ("POST", "/v1/users/me/threads")], ids=["method", "path"]
)
async def test_the_same_key_on_another_endpoint_is_refused_as_reused(
    sessionmaker: async_sessionmaker[AsyncSession], tenant: str, method: str, path: str
) -> None:
    key = new_key()
    await claim_and_complete(sessionmaker, tenant, key)

    with pytest.raises(IdempotencyKeyReused):
        await begin_once(sessionmaker, tenant, key, method=method, path=path)


async def test_body_formatting_and_key_order_do_not_make_a_different_request(
    sessionmaker: async_sessionmaker[AsyncSession], tenant: str
) -> None:
    class MemoryCreate(BaseModel):
        text: str
        kind: str

    key = new_key()
    await claim_and_complete(sessionmaker, tenant, key, body=MemoryCreate(**BODY))

    raw = b'{ "kind": "semantic",\n  "text": "likes green tea" }'
    assert await begin_once(sessionmaker, tenant, key, body=raw) == IdempotentReplay(201, RESPONSE)
    assert await begin_once(sessionmaker, tenant, key, body=BODY) == IdempotentReplay(201, RESPONSE)


async def test_a_pydantic_response_is_stored_as_its_json_form(
    sessionmaker: async_sessionmaker[AsyncSession], tenant: str
) -> None:
    class MemoryRead(BaseModel):
        id: uuid.UUID
        created_at: datetime

    read = MemoryRead(id=uuid.uuid4(), created_at=datetime(2026, 11, 29, 13, tzinfo=UTC))
    key = new_key()
    await claim_and_complete(sessionmaker, tenant, key, response=read)

    outcome = await begin_once(sessionmaker, tenant, key)

    assert outcome == IdempotentReplay(201, read.model_dump(mode="json"))


async def test_a_rolled_back_first_attempt_leaves_no_record_so_the_retry_claims(
    sessionmaker: async_sessionmaker[AsyncSession], tenant: str
) -> None:
    key = new_key()
    with pytest.raises(Rollback):
        async with scoped(sessionmaker, tenant) as session:
            store = IdempotencyStore(session, tenant, "alice")
            claim = await store.begin(key, "POST", PATH, BODY)
            assert isinstance(claim, IdempotencyClaim)
            await store.complete(claim, 201, RESPONSE)
            raise Rollback

    outcome = await begin_once(sessionmaker, tenant, key, body={"a": "different body"})

    assert isinstance(outcome, IdempotencyClaim)


async def test_claiming_a_key_twice_in_one_transaction_is_in_progress(
    sessionmaker: async_sessionmaker[AsyncSession], tenant: str
) -> None:
    key = new_key()
    async with scoped(sessionmaker, tenant) as session:
        store = IdempotencyStore(session, tenant, "alice")
        assert isinstance(await store.begin(key, "POST", PATH, BODY), IdempotencyClaim)

        with pytest.raises(IdempotencyKeyInProgress) as caught:
            await store.begin(key, "POST", PATH, BODY)

    assert caught.value.status == 409
    assert caught.value.code == "IDEMPOTENCY_KEY_IN_PROGRESS"


async def _backend_pid(session: AsyncSession) -> int:
    pid: int = (await session.execute(text("SELECT pg_backend_pid()"))).scalar_one()
    return pid


async def _wait_until_blocked_on_a_lock(owner_engine: AsyncEngine, pid: int) -> None:
    """Returns once backend `pid` waits for a lock another transaction holds."""
    async with asyncio.timeout(30):
        while True:
            async with owner_engine.connect() as connection:
                blockers = (
                    await connection.execute(
                        text("SELECT cardinality(pg_blocking_pids(:pid))"), {"pid": pid}
                    )
                ).scalar_one()
            if blockers:
                return
            await asyncio.sleep(0.01)


async def _race_two_attempts(
    sessionmaker: async_sessionmaker[AsyncSession],
    owner_engine: AsyncEngine,
    tenant_id: str,
    *,
    first_commits: bool,
) -> IdempotentReplay | IdempotencyClaim:
    """Two transactions with one key: the second begins while the first holds its claim.

    Returns what the second one's `begin` gave, after proving it waited for the first.
    """
    key = new_key()
    async with scoped(sessionmaker, tenant_id):
        pass  # the tenant row, committed, so neither attempt waits on it
    first_claimed = asyncio.Event()
    release_first = asyncio.Event()
    second_pid: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def first() -> None:
        async with scoped(sessionmaker, tenant_id) as session:
            store = IdempotencyStore(session, tenant_id, "alice")
            claim = await store.begin(key, "POST", PATH, BODY)
            assert isinstance(claim, IdempotencyClaim)
            first_claimed.set()
            await release_first.wait()
            await store.complete(claim, 201, RESPONSE)
            if not first_commits:
                raise Rollback

    async def second() -> IdempotentReplay | IdempotencyClaim:
        await first_claimed.wait()
        async with scoped(sessionmaker, tenant_id) as session:
            second_pid.set_result(await _backend_pid(session))
            return await IdempotencyStore(session, tenant_id, "alice").begin(
                key, "POST", PATH, BODY
            )

    first_task = asyncio.create_task(first())
    second_task = asyncio.create_task(second())
    try:
        await _wait_until_blocked_on_a_lock(owner_engine, await second_pid)
        assert not second_task.done()
        release_first.set()
        if first_commits:
            await first_task
        else:
            with pytest.raises(Rollback):
                await first_task
        return await second_task
    finally:
        release_first.set()
        for task in (first_task, second_task):
            if not task.done():
                task.cancel()


async def test_a_concurrent_retry_waits_for_the_first_attempt_and_then_replays(
    sessionmaker: async_sessionmaker[AsyncSession], owner_engine: AsyncEngine, tenant: str
) -> None:
    outcome = await _race_two_attempts(sessionmaker, owner_engine, tenant, first_commits=True)

    assert outcome == IdempotentReplay(status_code=201, body=RESPONSE)


async def test_a_concurrent_retry_claims_when_the_first_attempt_rolls_back(
    sessionmaker: async_sessionmaker[AsyncSession], owner_engine: AsyncEngine, tenant: str
) -> None:
    outcome = await _race_two_attempts(sessionmaker, owner_engine, tenant, first_commits=False)

    assert isinstance(outcome, IdempotencyClaim)


async def test_keys_are_scoped_to_the_principal(
    sessionmaker: async_sessionmaker[AsyncSession], tenant: str
) -> None:
    key = new_key()
    await claim_and_complete(sessionmaker, tenant, key, principal="alice")

    outcome = await begin_once(
        sessionmaker, tenant, key, principal="bob", body={"text": "bob's own request"}
    )

    assert isinstance(outcome, IdempotencyClaim)
    assert await begin_once(sessionmaker, tenant, key) == IdempotentReplay(201, RESPONSE)


async def test_tenants_do_not_see_each_others_keys(
    sessionmaker: async_sessionmaker[AsyncSession], tenant: str
) -> None:
    other = new_tenant()
    key = new_key()
    await claim_and_complete(sessionmaker, tenant, key)

    outcome = await begin_once(sessionmaker, other, key, body={"text": "other tenant"})

    assert isinstance(outcome, IdempotencyClaim)
    async with scoped(sessionmaker, other) as session:
        visible = (
            await session.execute(text("SELECT DISTINCT tenant_id FROM idempotency_record"))
        ).scalars()
        assert list(visible) == [other]


async def _backdate(
    sessionmaker: async_sessionmaker[AsyncSession], tenant_id: str, key: str, age: timedelta
) -> None:
    async with scoped(sessionmaker, tenant_id) as session:
        await session.execute(
            text(
                "UPDATE idempotency_record SET created_at = now() - make_interval(secs => :age) "
                "WHERE key = :key"
            ),
            {"age": age.total_seconds(), "key": key},
        )


async def test_a_record_past_the_default_ttl_is_treated_as_absent(
    sessionmaker: async_sessionmaker[AsyncSession], tenant: str
) -> None:
    key = new_key()
    await claim_and_complete(sessionmaker, tenant, key)
    await _backdate(sessionmaker, tenant, key, timedelta(hours=25))

    fresh = {"text": "a new request reusing an expired key"}
    await claim_and_complete(sessionmaker, tenant, key, body=fresh, response={"id": "m-2"})

    assert await begin_once(sessionmaker, tenant, key, body=fresh) == IdempotentReplay(
        201, {"id": "m-2"}
    )


async def test_the_ttl_is_the_stores_to_choose(
    sessionmaker: async_sessionmaker[AsyncSession], tenant: str
) -> None:
    key = new_key()
    await claim_and_complete(sessionmaker, tenant, key)
    await _backdate(sessionmaker, tenant, key, timedelta(minutes=10))

    assert await begin_once(sessionmaker, tenant, key) == IdempotentReplay(201, RESPONSE)
    reclaimed = await begin_once(sessionmaker, tenant, key, ttl=timedelta(minutes=5))
    assert isinstance(reclaimed, IdempotencyClaim)


@pytest.mark.parametrize(
    "key",
    ["", "x" * 256, "clé", "tab\there", "new\nline", "nul\x00"],
    ids=["empty", "too-long", "non-ascii", "tab", "newline", "nul"],
)
async def test_a_malformed_key_is_a_validation_failure_on_the_header(
    sessionmaker: async_sessionmaker[AsyncSession], tenant: str, key: str
) -> None:
    with pytest.raises(ValidationFailed) as caught:
        await begin_once(sessionmaker, tenant, key)

    assert caught.value.status == 422
    assert caught.value.extensions["errors"][0]["loc"] == ["header", "Idempotency-Key"]


@pytest.mark.parametrize("key", ["x" * 255, "a", "order 42 ~!@#$%^&*()"])
async def test_keys_of_printable_ascii_up_to_255_characters_are_accepted(
    sessionmaker: async_sessionmaker[AsyncSession], tenant: str, key: str
) -> None:
    assert isinstance(await begin_once(sessionmaker, tenant, key), IdempotencyClaim)


def _request(method: str = "POST", path: str = PATH) -> Request:
    return Request({"type": "http", "method": method, "path": path, "headers": []})


async def test_run_applies_the_operation_once_and_replays_it_on_retry(
    sessionmaker: async_sessionmaker[AsyncSession], tenant: str
) -> None:
    calls: list[int] = []

    async def create() -> dict[str, str]:
        calls.append(1)
        return RESPONSE

    key = new_key()
    async with scoped(sessionmaker, tenant) as session:
        first = await IdempotencyStore(session, tenant, "alice").run(
            key, _request(), BODY, create, status_code=201
        )
    async with scoped(sessionmaker, tenant) as session:
        retry = await IdempotencyStore(session, tenant, "alice").run(
            key, _request(), BODY, create, status_code=201
        )

    assert first == RESPONSE
    assert calls == [1]
    assert not isinstance(retry, dict)
    assert retry.status_code == 201
    assert retry.headers[REPLAYED_HEADER] == "true"
    assert retry.body == b'{"id":"m-1","text":"likes green tea"}'


async def test_run_without_a_key_always_applies_the_operation(
    sessionmaker: async_sessionmaker[AsyncSession], tenant: str
) -> None:
    calls: list[int] = []

    async def create() -> dict[str, str]:
        calls.append(1)
        return RESPONSE

    for _ in range(2):
        async with scoped(sessionmaker, tenant) as session:
            result = await IdempotencyStore(session, tenant, "alice").run(
                None, _request(), BODY, create, status_code=201
            )
            assert result == RESPONSE

    assert calls == [1, 1]


@pytest.fixture(scope="module")
def header_app() -> FastAPI:
    app = FastAPI()
    install_problem_handlers(app)

    @app.post("/things", status_code=201)
    async def create_thing(key: IdempotencyKeyHeader) -> dict[str, str | None]:
        return {"key": key}

    return app


async def _post_thing(app: FastAPI, headers: dict[str, str]) -> Any:
    async with AsyncClient(transport=ASGITransport(app=app), base_url="http://mneme.test") as c:
        return await c.post("/things", headers=headers)


async def test_the_header_is_documented_as_optional(header_app: FastAPI) -> None:
    parameters = header_app.openapi()["paths"]["/things"]["post"]["parameters"]

    (header,) = [p for p in parameters if p["in"] == "header"]
    assert header["name"] == "Idempotency-Key"
    assert header["required"] is False
    assert "retry" in header["description"]


async def test_the_header_reaches_the_route_or_is_none_when_absent(header_app: FastAPI) -> None:
    with_key = await _post_thing(header_app, {"Idempotency-Key": "order-42"})
    without = await _post_thing(header_app, {})

    assert (with_key.status_code, with_key.json()) == (201, {"key": "order-42"})
    assert (without.status_code, without.json()) == (201, {"key": None})


async def test_a_malformed_header_is_a_422_problem_pointing_at_the_header(
    header_app: FastAPI,
) -> None:
    response = await _post_thing(header_app, {"Idempotency-Key": "x" * 256})

    body = assert_problem(response, 422, "VALIDATION_FAILED")
    assert body["errors"][0]["loc"] == ["header", "Idempotency-Key"]
