"""Wiring of the write path's HTTP side: compaction, job health and recovery."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from service.dependencies import CurrentPrincipal, Session, State
from service.extraction.compaction import CompactionService
from service.extraction.health import WritePathHealth
from service.extraction.recovery import RerunInTransaction, WritePathRecovery
from service.extraction.repository import ExtractionRepository
from service.jobs.status import JobStatusRepository
from service.memories.dependencies import MemoryWriterSvc


def get_compaction_service(memories: MemoryWriterSvc, state: State) -> CompactionService:
    return CompactionService(
        memories, state.chat_model, state.embedding_backfill.embedder, state.settings
    )


CompactionSvc = Annotated[CompactionService, Depends(get_compaction_service)]


def get_health(session: Session, principal: CurrentPrincipal, state: State) -> WritePathHealth:
    # The tenant is the principal's: pgqueuer's tables are shared and have no row-level security.
    return WritePathHealth(
        JobStatusRepository(session, principal.tenant_id),
        ExtractionRepository(session, principal.tenant_id),
        state.settings,
        state.chat_model,
    )


Health = Annotated[WritePathHealth, Depends(get_health)]


def get_recovery(session: Session, principal: CurrentPrincipal, state: State) -> RerunInTransaction:
    recovery = WritePathRecovery(state.sessionmaker, state.settings, state.chat_model)
    return RerunInTransaction(recovery, session, principal.tenant_id)


Recovery = Annotated[RerunInTransaction, Depends(get_recovery)]
