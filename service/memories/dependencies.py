"""Wiring of the memories domain: how each of its services is built from a unit of work
(`service.services`), used by the request dependencies below, MCP tool calls and the write
path's passes alike, so the object graph is built in one place."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Annotated

from fastapi import Depends

from service.accounts.dependencies import account_service
from service.dependencies import CurrentPrincipal, State, UserOwner, provided
from service.memories.embedding import TextVectors, embed_ahead
from service.memories.fusion import FusionRepository
from service.memories.keyed import KeyedMemoryService, put_texts
from service.memories.postings import StatisticsRequests
from service.memories.recording import MemoryRecorder
from service.memories.repository import MemoryRepository
from service.memories.schemas import (
    KeyedMemoryPut,
    MemoryBatchCreate,
    MemoryCreate,
    MemoryUpdate,
    ProceduresUpdate,
    SearchRequest,
)
from service.memories.search import (
    MemorySearch,
    PendingVector,
    question_on_its_way,
    searched_question,
)
from service.memories.service import (
    MemoryService,
    changed_texts,
    created_texts,
    procedure_texts,
)
from service.memories.writer import DerivedMemoryWriter
from service.providers.reranker import Reranker
from service.services import Services
from service.state import AppState


def memory_recorder(services: Services) -> MemoryRecorder:
    return MemoryRecorder(
        MemoryRepository(services.session, services.tenant_id),
        services.get(account_service),
        services.state.embedding_backfill,
        services.post_commit,
        services.principal,
        services.get(statistics_requests),
        services.state.settings.search_bounded_from,
    )


def statistics_requests(services: Services) -> StatisticsRequests:
    """Where the unit of work's searches and writes ask for owners' statistics to be
    recounted (after its commit)."""
    return StatisticsRequests(services.state.sessionmaker, services.post_commit, services.tenant_id)


def memory_service(services: Services) -> MemoryService:
    return MemoryService(services.get(memory_recorder))


def memory_search(services: Services) -> MemorySearch:
    """The search service; with the state's reranker, its first candidates are ordered by that
    service (searches a person or agent reads, not the write path's own look-ups)."""
    return _search(services, services.state.reranker)


def write_path_memory_search(services: Services) -> MemorySearch:
    """The search the write path reads what is known through: never reranked (a background
    pass needs the fused candidates, not a hosted service's opinion of them, nor its latency)."""
    return _search(services, None)


def _search(services: Services, reranker: Reranker | None) -> MemorySearch:
    return MemorySearch(
        FusionRepository(services.session, services.tenant_id, services.get(statistics_requests)),
        services.state.vector_columns,
        services.tenant_id,
        services.state.settings,
        reranker,
        services.end_transaction,
    )


def memory_writer(services: Services) -> DerivedMemoryWriter:
    return DerivedMemoryWriter(services.get(memory_recorder))


def keyed_memory_service(services: Services) -> KeyedMemoryService:
    return KeyedMemoryService(services.get(memory_recorder), services.get(memory_service))


async def embed_search_question(
    _owner: UserOwner, principal: CurrentPrincipal, body: SearchRequest, state: State
) -> AsyncIterator[PendingVector | None]:
    """The search question's vector, on its way before the request's transaction begins.

    A route declares it before its service, so the embedding in the embedder's thread runs
    while BEGIN, the tenant setting and the per-request bookkeeping go to the database,
    instead of after them, and a remote API's is done before the transaction holds a
    connection (`embedding_underway`). It depends on the addressed user: nothing is
    embedded for a caller the route refuses. None: a lexical search needs no vector.
    """
    async with question_on_its_way(
        state.vector_columns,
        principal.tenant_id,
        searched_question(body),
    ) as pending:
        yield pending


EmbeddingQuestion = Annotated[PendingVector | None, Depends(embed_search_question)]


# A write's texts are embedded by the dependencies below, before the request's transaction
# begins: a route declares one after its owner (nothing is embedded for a caller it refuses)
# and before its service and idempotency store (which begin the transaction), and hands the
# vectors to the service. A hosted model's round trip then holds no pooled connection, nor the
# row or key lock the write takes.


async def _embedded_ahead(state: AppState, texts: Iterable[str]) -> TextVectors:
    return await embed_ahead(state.embedding_backfill.embedder, texts)


async def embed_created_text(body: MemoryCreate, state: State) -> TextVectors:
    return await _embedded_ahead(state, created_texts([body]))


async def embed_created_texts(body: MemoryBatchCreate, state: State) -> TextVectors:
    return await _embedded_ahead(state, created_texts(body.items))


async def embed_changed_text(body: MemoryUpdate, state: State) -> TextVectors:
    return await _embedded_ahead(state, changed_texts(body))


async def embed_procedure_texts(body: ProceduresUpdate, state: State) -> TextVectors:
    return await _embedded_ahead(state, procedure_texts(body))


async def embed_put_text(body: KeyedMemoryPut, state: State) -> TextVectors:
    return await _embedded_ahead(state, put_texts(body))


CreatedTextAhead = Annotated[TextVectors, Depends(embed_created_text)]
CreatedTextsAhead = Annotated[TextVectors, Depends(embed_created_texts)]
ChangedTextAhead = Annotated[TextVectors, Depends(embed_changed_text)]
ProcedureTextsAhead = Annotated[TextVectors, Depends(embed_procedure_texts)]
PutTextAhead = Annotated[TextVectors, Depends(embed_put_text)]
MemorySvc = Annotated[MemoryService, Depends(provided(memory_service))]
MemorySearchSvc = Annotated[MemorySearch, Depends(provided(memory_search))]
MemoryWriterSvc = Annotated[DerivedMemoryWriter, Depends(provided(memory_writer))]
KeyedMemorySvc = Annotated[KeyedMemoryService, Depends(provided(keyed_memory_service))]
