"""Wiring of the threads domain: the start-up setup every thread service shares, and its
service per unit of work."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from fastapi import Depends
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from service.accounts.dependencies import account_service
from service.config import Settings
from service.dependencies import CurrentPrincipal, State, provided
from service.memories.dependencies import memory_service
from service.providers.llm import ChatModel
from service.services import Services
from service.threads.hooks import AppendListener, SummaryScheduler
from service.threads.replay import MessageReplay
from service.threads.repository import ThreadRepository
from service.threads.service import Summarizer, ThreadService, ThreadSetup
from service.threads.summary_now import SummaryNow


def build_thread_setup(
    sessionmaker: async_sessionmaker[AsyncSession],
    chat_model: ChatModel | None,
    settings: Settings,
    listeners: Sequence[AppendListener],
) -> ThreadSetup:
    """Built once at start-up. Appends queue a summary pass (when one could run) and whatever
    the app's other append listeners queue (the write path), in the append's transaction."""
    summarizer = Summarizer(sessionmaker, chat_model, settings)
    summaries = SummaryScheduler(summarizer.status.enabled and settings.jobs_enabled)
    return ThreadSetup(
        summarizer,
        (summaries, *listeners),
        replay=MessageReplay.configured(settings),
    )


def thread_service(services: Services) -> ThreadService:
    return ThreadService(
        ThreadRepository(services.session, services.tenant_id),
        services.get(account_service),
        services.get(memory_service),
        services.principal,
        services.state.threads,
    )


ThreadSvc = Annotated[ThreadService, Depends(provided(thread_service))]


async def summary_now(principal: CurrentPrincipal, state: State) -> SummaryNow:
    """A summary pass asked for now: no unit of work of the request's (it opens its own)."""
    return SummaryNow(state, principal, thread_service)


SummaryNowSvc = Annotated[SummaryNow, Depends(summary_now)]
