"""Wiring of the write path's HTTP side: compaction, job health and recovery."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated

from fastapi import Depends

from service.dependencies import CurrentPrincipal, State, provided
from service.extraction.compaction import CompactionService
from service.extraction.health import WritePathHealth
from service.extraction.recovery import RerunInTransaction, WritePathRecovery
from service.extraction.repository import ExtractionRepository
from service.jobs.status import JobStatusRepository
from service.memories.dependencies import memory_writer
from service.memories.writer import DerivedMemoryWriter
from service.services import Services, unit_of_work


async def compaction_service(principal: CurrentPrincipal, state: State) -> CompactionService:
    """A compaction opens its own units of work (none of the request's: its model call runs
    between them, `CompactionService`)."""

    @asynccontextmanager
    async def writer_unit() -> AsyncIterator[DerivedMemoryWriter]:
        async with unit_of_work(state, principal) as services:
            yield services.get(memory_writer)

    return CompactionService(
        writer_unit, state.chat_model, state.embedding_backfill.embedder, state.settings
    )


def extraction_repository(services: Services) -> ExtractionRepository:
    return ExtractionRepository(services.session, services.tenant_id)


def write_path_health(services: Services) -> WritePathHealth:
    # The tenant is the principal's: pgqueuer's tables are shared and have no row-level security.
    return WritePathHealth(
        JobStatusRepository(services.session, services.tenant_id),
        services.get(extraction_repository),
        services.state.settings,
        services.state.chat_model,
    )


def write_path_recovery(services: Services) -> RerunInTransaction:
    state = services.state
    recovery = WritePathRecovery(state.sessionmaker, state.settings, state.chat_model)
    return RerunInTransaction(recovery, services.session, services.principal)


CompactionSvc = Annotated[CompactionService, Depends(compaction_service)]
Health = Annotated[WritePathHealth, Depends(provided(write_path_health))]
Recovery = Annotated[RerunInTransaction, Depends(provided(write_path_recovery))]
