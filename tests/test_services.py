"""The unit of work every entry point composes its services in: each service once per unit,
and what a process shares (the thread summarizer, the append listeners) built at start-up."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from httpx import AsyncClient
from sqlalchemy import text

from service.auth.owner import Owner
from service.auth.principal import Principal
from service.config import Settings
from service.context.dependencies import context_builder
from service.memories.dependencies import memory_recorder, memory_service
from service.memories.schemas import MemoryCreate
from service.services import Services, unit_of_work
from service.threads import dependencies as thread_dependencies
from tests.conftest import bearer
from tests.fixtures.factories import remember, start_thread


def principal_of(tenant: str) -> Principal:
    return Principal(tenant_id=tenant, subject="ada", kind="user", credential="jwt")


async def test_a_unit_builds_each_service_once_and_the_next_unit_anew(
    app: FastAPI, tenant: str
) -> None:
    built: list[Services] = []

    def counted(services: Services) -> object:
        built.append(services)
        return object()

    async with unit_of_work(app.state.mneme, principal_of(tenant)) as services:
        first = services.get(counted)
        assert services.get(counted) is first
        # A context builder takes the memory service the unit already built.
        memories = services.get(memory_service)
        services.get(context_builder)
        assert services.get(memory_service) is memories
        recorder = services.get(memory_recorder)
    async with unit_of_work(app.state.mneme, principal_of(tenant)) as later:
        assert later.get(counted) is not first
        assert later.get(memory_recorder) is not recorder
    assert built == [services, later]


async def test_requests_never_build_a_summarizer_or_a_summary_scheduler(
    client: AsyncClient,
    settings: Settings,
    tenant: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Both are built once at start-up; a context read, an append and a thread read reuse them."""

    def refused(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("built per request")

    monkeypatch.setattr(thread_dependencies, "Summarizer", refused)
    monkeypatch.setattr(thread_dependencies, "SummaryScheduler", refused)
    headers = bearer(settings, tenant, "ada")
    await remember(client, headers, text="Ada rides her bike to work.")
    thread_id = await start_thread(client, headers)
    appended = await client.post(
        f"/v1/users/me/threads/{thread_id}/messages",
        headers=headers,
        json={"messages": [{"role": "user", "content": "How do I get to work?"}]},
    )
    assert appended.status_code == 201, appended.text
    context = await client.post(
        "/v1/users/me/context",
        headers=headers,
        json={"query": "How does Ada get to work?", "thread_id": thread_id},
    )
    assert context.status_code == 200, context.text
    assert "bike" in context.text
    window = await client.get(f"/v1/users/me/threads/{thread_id}/messages", headers=headers)
    assert window.status_code == 200
    assert [m["content"] for m in window.json()["items"]] == ["How do I get to work?"]


async def test_a_unit_that_ended_its_transaction_commits_and_refuses_any_later_statement(
    app: FastAPI, tenant: str
) -> None:
    """`Services.end_transaction`: what the unit wrote is committed at once (the session
    holds no transaction, nor its connection); a statement after it would run outside the
    tenant's scope, and is refused instead."""
    state = app.state.mneme
    owner = Owner.user("ada")
    async with unit_of_work(state, principal_of(tenant)) as services:
        [written] = await services.get(memory_service).create(
            owner, [MemoryCreate(text="Ended its transaction early")]
        )
        assert services.session.in_transaction()
        await services.end_transaction()
        assert not services.session.in_transaction()
        with pytest.raises(RuntimeError, match="ended its transaction"):
            await services.session.execute(text("SELECT 1"))
    async with unit_of_work(state, principal_of(tenant)) as later:
        read = await later.get(memory_service).get(owner, written.id)
        assert read.text == "Ended its transaction early"
