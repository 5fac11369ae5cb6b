"""Wiring of the threads domain: its service per request, with what an append queues."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from sqlalchemy.ext.asyncio import AsyncSession

from service.accounts.dependencies import AccountSvc
from service.accounts.service import AccountService
from service.auth.principal import Principal
from service.dependencies import AppState, CurrentPrincipal, Session, State
from service.extraction.hooks import chain, write_path_hook
from service.jobs import enqueue_thread_summary
from service.memories.dependencies import MemorySvc
from service.memories.service import MemoryService
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
    # Appends queue a summary pass and a write-path pass (in their own transaction) only when
    # one could run. Org extraction is allowed by the appending principal's roles, nothing else.
    summarize_after_append = summarizer.status.enabled and state.settings.jobs_enabled
    on_append = chain(
        enqueue_thread_summary if summarize_after_append else None,
        write_path_hook(state.settings, state.chat_model, org_writes=principal.is_admin),
    )
    return ThreadService(
        session,
        ThreadRepository(session, principal.tenant_id),
        accounts,
        memories,
        principal.tenant_id,
        summarizer,
        on_append=on_append,
    )


def get_thread_service(
    session: Session,
    principal: CurrentPrincipal,
    memories: MemorySvc,
    state: State,
    accounts: AccountSvc,
) -> ThreadService:
    return build_thread_service(session, principal, memories, accounts, state)


ThreadSvc = Annotated[ThreadService, Depends(get_thread_service)]
