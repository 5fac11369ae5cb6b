"""Wiring of the threads domain: its service per request, with what an append queues."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from sqlalchemy.ext.asyncio import AsyncSession

from service.accounts.dependencies import AccountSvc
from service.accounts.service import AccountService
from service.auth.principal import Principal
from service.dependencies import AppState, CurrentPrincipal, Session, State
from service.memories.dependencies import MemorySvc
from service.memories.service import MemoryService
from service.threads.hooks import SummaryScheduler
from service.threads.repository import ThreadRepository
from service.threads.service import Summarizer, ThreadService


def build_thread_service(
    session: AsyncSession,
    principal: Principal,
    memories: MemoryService,
    accounts: AccountService,
    state: AppState,
) -> ThreadService:
    summarizer = Summarizer(state.sessionmaker, state.chat_model, state.settings)
    # Appends queue a summary pass (when one could run) and whatever the app's other append
    # listeners queue (the write path), in the append's transaction.
    summaries = SummaryScheduler(summarizer.status.enabled and state.settings.jobs_enabled)
    return ThreadService(
        session,
        ThreadRepository(session, principal.tenant_id),
        accounts,
        memories,
        principal.tenant_id,
        summarizer,
        (summaries, *state.append_listeners),
        appended_by_admin=principal.is_admin,
        mask_replayed_secrets=state.settings.message_secrets_on_replay == "mask",
    )


async def get_thread_service(
    session: Session,
    principal: CurrentPrincipal,
    memories: MemorySvc,
    state: State,
    accounts: AccountSvc,
) -> ThreadService:
    return build_thread_service(session, principal, memories, accounts, state)


ThreadSvc = Annotated[ThreadService, Depends(get_thread_service)]
