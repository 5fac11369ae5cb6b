"""Wiring of the memories domain: one constructor per service, used by the request
dependencies below and by everything else that needs them (the write path's jobs, the
benchmarks), so the object graph is built in one place."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from sqlalchemy.ext.asyncio import AsyncSession

from service.accounts.dependencies import build_account_service
from service.auth.principal import Principal
from service.config import Settings
from service.dependencies import CurrentPrincipal, PostCommit, Session, State
from service.kit.post_commit import PostCommitTasks
from service.memories.embedding import EmbeddingBackfill
from service.memories.keyed import KeyedMemoryService
from service.memories.recording import MemoryRecorder
from service.memories.repository import MemoryRepository
from service.memories.search import MemorySearch
from service.memories.service import MemoryService
from service.memories.writer import DerivedMemoryWriter


def build_memory_recorder(
    session: AsyncSession,
    principal: Principal,
    backfill: EmbeddingBackfill,
    post_commit: PostCommitTasks,
) -> MemoryRecorder:
    return MemoryRecorder(
        MemoryRepository(session, principal.tenant_id),
        build_account_service(session, principal),
        backfill,
        post_commit,
        principal,
    )


def build_memory_search(
    session: AsyncSession, principal: Principal, backfill: EmbeddingBackfill, settings: Settings
) -> MemorySearch:
    return MemorySearch(MemoryRepository(session, principal.tenant_id), backfill.embedder, settings)


async def get_memory_service(
    session: Session, principal: CurrentPrincipal, state: State, post_commit: PostCommit
) -> MemoryService:
    return MemoryService(
        build_memory_recorder(session, principal, state.embedding_backfill, post_commit)
    )


async def get_memory_search(
    session: Session, principal: CurrentPrincipal, state: State
) -> MemorySearch:
    return build_memory_search(session, principal, state.embedding_backfill, state.settings)


async def get_memory_writer(
    session: Session, principal: CurrentPrincipal, state: State, post_commit: PostCommit
) -> DerivedMemoryWriter:
    return DerivedMemoryWriter(
        build_memory_recorder(session, principal, state.embedding_backfill, post_commit)
    )


MemorySvc = Annotated[MemoryService, Depends(get_memory_service)]
MemorySearchSvc = Annotated[MemorySearch, Depends(get_memory_search)]
MemoryWriterSvc = Annotated[DerivedMemoryWriter, Depends(get_memory_writer)]


def build_keyed_memory_service(recorder: MemoryRecorder) -> KeyedMemoryService:
    return KeyedMemoryService(recorder, MemoryService(recorder))


async def get_keyed_memory_service(
    session: Session, principal: CurrentPrincipal, state: State, post_commit: PostCommit
) -> KeyedMemoryService:
    return build_keyed_memory_service(
        build_memory_recorder(session, principal, state.embedding_backfill, post_commit)
    )


KeyedMemorySvc = Annotated[KeyedMemoryService, Depends(get_keyed_memory_service)]
