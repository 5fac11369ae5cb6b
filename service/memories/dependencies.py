"""Wiring of the memories domain: one constructor per service, used by the request
dependencies below and by everything else that needs them (the write path's jobs, the
benchmarks), so the object graph is built in one place."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends
from sqlalchemy.ext.asyncio import AsyncSession

from service.accounts.dependencies import build_account_service
from service.auth.principal import Principal
from service.config import Settings
from service.dependencies import CurrentPrincipal, PostCommit, Session, State, UserOwner
from service.kit.post_commit import PostCommitTasks
from service.memories.embedding import EmbeddingBackfill
from service.memories.fusion import FusionRepository
from service.memories.keyed import KeyedMemoryService
from service.memories.recording import MemoryRecorder
from service.memories.repository import MemoryRepository
from service.memories.schemas import SearchRequest
from service.memories.search import (
    MemorySearch,
    PendingVector,
    embedding_underway,
    start_embedding_question,
)
from service.memories.service import MemoryService
from service.memories.writer import DerivedMemoryWriter
from service.providers.reranker import Reranker


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
    session: AsyncSession,
    principal: Principal,
    backfill: EmbeddingBackfill,
    settings: Settings,
    reranker: Reranker | None = None,
) -> MemorySearch:
    """The search service; with `reranker`, its first candidates are ordered by that service
    (searches a person or agent reads, not the write path's own look-ups)."""
    return MemorySearch(
        FusionRepository(session, principal.tenant_id), backfill.embedder, settings, reranker
    )


async def get_memory_service(
    session: Session, principal: CurrentPrincipal, state: State, post_commit: PostCommit
) -> MemoryService:
    return MemoryService(
        build_memory_recorder(session, principal, state.embedding_backfill, post_commit)
    )


async def get_memory_search(
    session: Session, principal: CurrentPrincipal, state: State
) -> MemorySearch:
    return build_memory_search(
        session, principal, state.embedding_backfill, state.settings, state.reranker
    )


async def get_memory_writer(
    session: Session, principal: CurrentPrincipal, state: State, post_commit: PostCommit
) -> DerivedMemoryWriter:
    return DerivedMemoryWriter(
        build_memory_recorder(session, principal, state.embedding_backfill, post_commit)
    )


async def embed_search_question(
    _owner: UserOwner, body: SearchRequest, state: State
) -> AsyncIterator[PendingVector | None]:
    """The search question's vector, on its way before the request's transaction begins.

    A route declares it before its service, so the embedding (in the embedder's thread, or a
    call to a remote API) runs while BEGIN, the tenant setting and the per-request bookkeeping
    go to the database, instead of after them. It depends on the addressed user: nothing is
    embedded for a caller the route refuses. None: a lexical search needs no vector.
    """
    embedder = state.embedding_backfill.embedder
    async with embedding_underway(start_embedding_question(embedder, body)) as pending:
        yield pending


EmbeddingQuestion = Annotated[PendingVector | None, Depends(embed_search_question)]
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
