"""HTTP routes for a user's memories and the organization's shared memories."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response, status

from service.accounts.router import AccountSvc
from service.dependencies import (
    AddressedUserId,
    CurrentPrincipal,
    Idempotency,
    PostCommit,
    Session,
    State,
)
from service.errors import problem_responses
from service.kit.idempotency import IdempotencyKeyHeader
from service.kit.pagination import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, Page
from service.kit.types import Timestamp
from service.memories.repository import MemoryRepository
from service.memories.schemas import (
    Lifecycle,
    MemoriesDeleted,
    MemoryBatchCreate,
    MemoryBatchWritten,
    MemoryCreate,
    MemoryFilter,
    MemoryHistory,
    MemoryKind,
    MemoryRead,
    MemoryScope,
    MemoryUpdate,
    MemoryWritten,
    Procedures,
    ProceduresUpdate,
    SearchRequest,
    SearchResponse,
)
from service.memories.service import MemoryService

user_router = APIRouter(prefix="/v1/users/{user_id}", tags=["memories"])
org_router = APIRouter(prefix="/v1/org", tags=["org memories"])

READ_PROBLEMS = problem_responses(401, 404, 422, 429)
WRITE_PROBLEMS = problem_responses(401, 403, 404, 409, 413, 422, 429)


def get_memory_service(
    session: Session,
    principal: CurrentPrincipal,
    state: State,
    post_commit: PostCommit,
    accounts: AccountSvc,
) -> MemoryService:
    return MemoryService(
        MemoryRepository(session, principal.tenant_id),
        accounts,
        state.embedding_backfill,
        post_commit,
        state.settings,
        principal,
    )


MemorySvc = Annotated[MemoryService, Depends(get_memory_service)]


def memory_filter(
    scope: Annotated[
        list[MemoryScope] | None,
        Query(description="On a user's listing: `user` (default), `org`, or both."),
    ] = None,
    kind: Annotated[list[MemoryKind] | None, Query()] = None,
    category: Annotated[list[str] | None, Query()] = None,
    lifecycle: Annotated[
        list[Lifecycle] | None,
        Query(description="Default for listing: proposed and confirmed (not superseded)."),
    ] = None,
    created_after: Timestamp | None = None,
    created_before: Timestamp | None = None,
    event_after: Timestamp | None = None,
    event_before: Timestamp | None = None,
) -> MemoryFilter:
    return MemoryFilter(
        scopes=scope,
        kinds=kind,
        categories=category,
        lifecycles=lifecycle,
        created_after=created_after,
        created_before=created_before,
        event_after=event_after,
        event_before=event_before,
    )


Filters = Annotated[MemoryFilter, Depends(memory_filter)]
Cursor = Annotated[str | None, Query(description="From a previous page's next_cursor.")]
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)]
Everything = Annotated[
    bool, Query(alias="all", description="Required to delete without any filter.")
]


async def _create_one(
    memories: MemoryService, user_id: str | None, body: MemoryCreate
) -> MemoryWritten:
    [written] = await memories.create(user_id, [body])
    return written


async def _create_batch(
    memories: MemoryService, user_id: str | None, body: MemoryBatchCreate
) -> MemoryBatchWritten:
    return MemoryBatchWritten(items=await memories.create(user_id, body.items))


# --- a user's memories -------------------------------------------------------------------------


@user_router.post(
    "/memories",
    status_code=status.HTTP_201_CREATED,
    response_model=MemoryWritten,
    summary="Remember one memory",
    responses=WRITE_PROBLEMS,
)
async def create_memory(
    user_id: AddressedUserId,
    body: MemoryCreate,
    memories: MemorySvc,
    request: Request,
    idempotency_key: IdempotencyKeyHeader,
    idempotency: Idempotency,
) -> MemoryWritten | Response:
    """Store a memory for the user (or, for admins with `scope: org`, for the organization).
    Refuses secrets and PII-like text (422 `SECRET_REFUSED`). An identical live memory is
    returned instead of stored twice (`duplicate: true`). With an `Idempotency-Key`, a retry
    replays the first response instead of writing again."""
    return await idempotency.run(
        idempotency_key,
        request,
        body,
        lambda: _create_one(memories, user_id, body),
        status_code=status.HTTP_201_CREATED,
    )


@user_router.post(
    "/memories/batch",
    status_code=status.HTTP_201_CREATED,
    response_model=MemoryBatchWritten,
    summary="Remember a batch of memories",
    responses=WRITE_PROBLEMS,
)
async def create_memories(
    user_id: AddressedUserId,
    body: MemoryBatchCreate,
    memories: MemorySvc,
    request: Request,
    idempotency_key: IdempotencyKeyHeader,
    idempotency: Idempotency,
) -> MemoryBatchWritten | Response:
    """Store up to 100 memories at once, all or nothing, in input order."""
    return await idempotency.run(
        idempotency_key,
        request,
        body,
        lambda: _create_batch(memories, user_id, body),
        status_code=status.HTTP_201_CREATED,
    )


@user_router.get(
    "/memories",
    response_model=Page[MemoryRead],
    summary="List memories",
    responses=READ_PROBLEMS,
)
async def list_memories(
    user_id: AddressedUserId,
    memories: MemorySvc,
    filters: Filters,
    cursor: Cursor = None,
    limit: Limit = DEFAULT_PAGE_SIZE,
) -> Page[MemoryRead]:
    """The user's memories, newest first, filtered and paged by cursor."""
    return await memories.list_page(user_id, filters, cursor=cursor, limit=limit)


@user_router.delete(
    "/memories",
    response_model=MemoriesDeleted,
    summary="Forget memories matching a filter",
    responses=WRITE_PROBLEMS,
)
async def delete_memories(
    user_id: AddressedUserId, memories: MemorySvc, filters: Filters, everything: Everything = False
) -> MemoriesDeleted:
    """Delete every memory of the user matching the filters (e.g. `kind=episodic`);
    `all=true` with no filter forgets everything. Each deletion is kept in the history."""
    return MemoriesDeleted(
        deleted=await memories.delete_matching(user_id, filters, everything=everything)
    )


@user_router.post(
    "/memories/search",
    response_model=SearchResponse,
    summary="Search memories",
    responses=READ_PROBLEMS,
)
async def search_memories(
    user_id: AddressedUserId, body: SearchRequest, memories: MemorySvc
) -> SearchResponse:
    """Hybrid search (full-text OR query + vector similarity, fused in one SQL statement)
    over the user's and the organization's memories. Every hit carries its component scores."""
    return await memories.search(user_id, body)


@user_router.get(
    "/memories/{memory_id}",
    response_model=MemoryRead,
    summary="Get a memory",
    responses=READ_PROBLEMS,
)
async def get_memory(
    user_id: AddressedUserId, memory_id: uuid.UUID, memories: MemorySvc
) -> MemoryRead:
    return await memories.get(user_id, memory_id)


@user_router.patch(
    "/memories/{memory_id}",
    response_model=MemoryRead,
    summary="Change a memory",
    responses=WRITE_PROBLEMS,
)
async def update_memory(
    user_id: AddressedUserId, memory_id: uuid.UUID, body: MemoryUpdate, memories: MemorySvc
) -> MemoryRead:
    """Change text (re-embedded), category, confidence, lifecycle (e.g. confirm a proposed
    memory), review flag, event time, metadata or expiry. Recorded in the history."""
    return await memories.update(user_id, memory_id, body)


@user_router.delete(
    "/memories/{memory_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    summary="Forget a memory",
    responses=WRITE_PROBLEMS,
)
async def delete_memory(
    user_id: AddressedUserId, memory_id: uuid.UUID, memories: MemorySvc
) -> None:
    await memories.delete(user_id, memory_id)


@user_router.get(
    "/memories/{memory_id}/history",
    response_model=MemoryHistory,
    summary="A memory's change history",
    responses=READ_PROBLEMS,
)
async def get_memory_history(
    user_id: AddressedUserId, memory_id: uuid.UUID, memories: MemorySvc
) -> MemoryHistory:
    """Every add / update / supersede / delete of the memory, oldest first, with old and new
    text. Still available after the memory was deleted."""
    return await memories.history(user_id, memory_id)


@user_router.get(
    "/procedures",
    response_model=Procedures,
    summary="Get the user's procedural instructions",
    responses=READ_PROBLEMS,
)
async def get_procedures(user_id: AddressedUserId, memories: MemorySvc) -> Procedures:
    return await memories.procedures(user_id)


@user_router.put(
    "/procedures",
    response_model=Procedures,
    summary="Set the user's procedural instructions",
    responses=WRITE_PROBLEMS,
)
async def set_procedures(
    user_id: AddressedUserId, body: ProceduresUpdate, memories: MemorySvc
) -> Procedures:
    """Set slots (style, workflow, safety, task_policies); an empty string clears a slot.
    A replaced instruction is superseded, with history, not deleted."""
    return await memories.set_procedures(user_id, body)


# --- the organization's shared memories --------------------------------------------------------


@org_router.post(
    "/memories",
    status_code=status.HTTP_201_CREATED,
    response_model=MemoryWritten,
    summary="Remember an organization memory",
    responses=WRITE_PROBLEMS,
)
async def create_org_memory(
    body: MemoryCreate,
    memories: MemorySvc,
    request: Request,
    idempotency_key: IdempotencyKeyHeader,
    idempotency: Idempotency,
) -> MemoryWritten | Response:
    """Organization-shared memory, readable by every user of the tenant; admins only."""
    return await idempotency.run(
        idempotency_key,
        request,
        body,
        lambda: _create_one(memories, None, body),
        status_code=status.HTTP_201_CREATED,
    )


@org_router.post(
    "/memories/batch",
    status_code=status.HTTP_201_CREATED,
    response_model=MemoryBatchWritten,
    summary="Remember a batch of organization memories",
    responses=WRITE_PROBLEMS,
)
async def create_org_memories(
    body: MemoryBatchCreate,
    memories: MemorySvc,
    request: Request,
    idempotency_key: IdempotencyKeyHeader,
    idempotency: Idempotency,
) -> MemoryBatchWritten | Response:
    return await idempotency.run(
        idempotency_key,
        request,
        body,
        lambda: _create_batch(memories, None, body),
        status_code=status.HTTP_201_CREATED,
    )


@org_router.get(
    "/memories",
    response_model=Page[MemoryRead],
    summary="List organization memories",
    responses=READ_PROBLEMS,
)
async def list_org_memories(
    memories: MemorySvc, filters: Filters, cursor: Cursor = None, limit: Limit = DEFAULT_PAGE_SIZE
) -> Page[MemoryRead]:
    return await memories.list_page(None, filters, cursor=cursor, limit=limit)


@org_router.delete(
    "/memories",
    response_model=MemoriesDeleted,
    summary="Forget organization memories matching a filter",
    responses=WRITE_PROBLEMS,
)
async def delete_org_memories(
    memories: MemorySvc, filters: Filters, everything: Everything = False
) -> MemoriesDeleted:
    return MemoriesDeleted(
        deleted=await memories.delete_matching(None, filters, everything=everything)
    )


@org_router.get(
    "/memories/{memory_id}",
    response_model=MemoryRead,
    summary="Get an organization memory",
    responses=READ_PROBLEMS,
)
async def get_org_memory(memory_id: uuid.UUID, memories: MemorySvc) -> MemoryRead:
    return await memories.get(None, memory_id)


@org_router.patch(
    "/memories/{memory_id}",
    response_model=MemoryRead,
    summary="Change an organization memory",
    responses=WRITE_PROBLEMS,
)
async def update_org_memory(
    memory_id: uuid.UUID, body: MemoryUpdate, memories: MemorySvc
) -> MemoryRead:
    return await memories.update(None, memory_id, body)


@org_router.delete(
    "/memories/{memory_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    summary="Forget an organization memory",
    responses=WRITE_PROBLEMS,
)
async def delete_org_memory(memory_id: uuid.UUID, memories: MemorySvc) -> None:
    await memories.delete(None, memory_id)


@org_router.get(
    "/memories/{memory_id}/history",
    response_model=MemoryHistory,
    summary="An organization memory's change history",
    responses=READ_PROBLEMS,
)
async def get_org_memory_history(memory_id: uuid.UUID, memories: MemorySvc) -> MemoryHistory:
    return await memories.history(None, memory_id)


@org_router.get(
    "/procedures",
    response_model=Procedures,
    summary="Get the organization's procedural instructions",
    responses=READ_PROBLEMS,
)
async def get_org_procedures(memories: MemorySvc) -> Procedures:
    return await memories.procedures(None)


@org_router.put(
    "/procedures",
    response_model=Procedures,
    summary="Set the organization's procedural instructions",
    responses=WRITE_PROBLEMS,
)
async def set_org_procedures(body: ProceduresUpdate, memories: MemorySvc) -> Procedures:
    return await memories.set_procedures(None, body)
