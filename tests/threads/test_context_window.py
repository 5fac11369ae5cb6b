"""A context block reads a thread's window newest first, a page at a time: what it reads is the
newest part of the window the whole thread gives, and with summaries it reads on until the
human turns that decide where the window starts are in hand."""

from __future__ import annotations

import uuid

import pytest
from fastapi import FastAPI
from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.auth.principal import Principal
from service.config import Settings
from service.services import unit_of_work
from service.threads.dependencies import thread_service
from service.threads.service import CONTEXT_PAGE, ContextWindow
from tests.conftest import bearer
from tests.fixtures.factories import long_conversation

MESSAGES = 200


async def thread_of(client: AsyncClient, settings: Settings, tenant: str) -> str:
    return await long_conversation(client, bearer(settings, tenant, "ada"), MESSAGES)


async def windows(
    app: FastAPI, tenant: str, thread_id: str, buffer_turns: int
) -> tuple[ContextWindow, ContextWindow]:
    """The window read whole, and read until a block would have enough at once."""
    principal = Principal(tenant_id=tenant, subject="ada", kind="user", credential="jwt")
    async with unit_of_work(app.state.mneme, principal) as services:
        threads = services.get(thread_service)
        thread = uuid.UUID(thread_id)
        whole = await threads.context_window("ada", thread, buffer_turns)
        paged = await threads.context_window(
            "ada", thread, buffer_turns, enough=lambda newest_first: True
        )
    return whole, paged


async def test_without_summaries_one_page_is_read_and_it_is_the_windows_newest(
    app: FastAPI, client: AsyncClient, settings: Settings, tenant: str
) -> None:
    thread_id = await thread_of(client, settings, tenant)

    whole, paged = await windows(app, tenant, thread_id, buffer_turns=5)

    assert len(whole.messages) == MESSAGES
    assert len(paged.messages) == CONTEXT_PAGE
    assert paged.messages == whole.messages[-CONTEXT_PAGE:]


@pytest.mark.parametrize(("buffer_turns", "pages"), [(5, 1), (40, 2)])
async def test_with_summaries_reading_goes_on_until_the_buffered_human_turns_are_read(
    app: FastAPI,
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    buffer_turns: int,
    pages: int,
) -> None:
    thread_id = await thread_of(client, settings, tenant)
    async with owner_engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO thread_summary (tenant_id, thread_id, sequence, start_index, "
                "end_index, entries) VALUES (:t, :th, 1, 0, 50, "
                '\'[{"question": "q", "answer": "a", "refs": []}]\')'
            ),
            {"t": tenant, "th": thread_id},
        )

    whole, paged = await windows(app, tenant, thread_id, buffer_turns)

    # The window starts after the summarised turns: 150 raw messages.
    assert [message.seq for message in whole.messages] == list(range(50, MESSAGES))
    # A page holds 32 human turns: 40 buffered ones take a second page.
    assert len(paged.messages) == pages * CONTEXT_PAGE
    assert paged.messages == whole.messages[-pages * CONTEXT_PAGE :]
    assert paged.summaries == whole.summaries
