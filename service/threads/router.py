"""HTTP routes for a user's conversation threads and their messages."""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request, Response, status
from pydantic import Field

from service.accounts.repository import AccountRepository
from service.accounts.service import AccountService
from service.dependencies import AddressedUserId, CurrentPrincipal, Idempotency, Session
from service.errors import problem_responses
from service.kit.idempotency import IdempotencyKeyHeader
from service.kit.pagination import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, Page
from service.memories.router import MemorySvc
from service.threads.repository import ThreadRepository
from service.threads.schemas import (
    MessagePage,
    MessagesAppend,
    MessagesAppended,
    ThreadCreate,
    ThreadRead,
    ThreadUpdate,
)
from service.threads.service import ThreadService

router = APIRouter(prefix="/v1/users/{user_id}/threads", tags=["threads"])

READ_PROBLEMS = problem_responses(401, 404, 422, 429)
WRITE_PROBLEMS = problem_responses(401, 404, 409, 413, 422, 429)


def get_thread_service(
    session: Session, principal: CurrentPrincipal, memories: MemorySvc
) -> ThreadService:
    return ThreadService(
        session,
        ThreadRepository(session, principal.tenant_id),
        AccountService(AccountRepository(session, principal.tenant_id)),
        memories,
        principal.tenant_id,
    )


ThreadSvc = Annotated[ThreadService, Depends(get_thread_service)]


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=ThreadRead,
    summary="Start a thread",
    responses=WRITE_PROBLEMS,
)
async def create_thread(
    user_id: AddressedUserId,
    body: ThreadCreate,
    threads: ThreadSvc,
    request: Request,
    idempotency_key: IdempotencyKeyHeader,
    idempotency: Idempotency,
) -> ThreadRead | Response:
    return await idempotency.run(
        idempotency_key,
        request,
        body,
        lambda: threads.create(user_id, body),
        status_code=status.HTTP_201_CREATED,
    )


@router.get("", response_model=Page[ThreadRead], summary="List threads", responses=READ_PROBLEMS)
async def list_threads(
    user_id: AddressedUserId,
    threads: ThreadSvc,
    cursor: Annotated[str | None, Query(description="From a previous page.")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = DEFAULT_PAGE_SIZE,
) -> Page[ThreadRead]:
    """The user's threads, most recently active first."""
    return await threads.list_page(user_id, cursor=cursor, limit=limit)


@router.get(
    "/{thread_id}", response_model=ThreadRead, summary="Get a thread", responses=READ_PROBLEMS
)
async def get_thread(
    user_id: AddressedUserId, thread_id: uuid.UUID, threads: ThreadSvc
) -> ThreadRead:
    return await threads.get(user_id, thread_id)


@router.patch(
    "/{thread_id}",
    response_model=ThreadRead,
    summary="Rename a thread or change its metadata",
    responses=WRITE_PROBLEMS,
)
async def update_thread(
    user_id: AddressedUserId, thread_id: uuid.UUID, body: ThreadUpdate, threads: ThreadSvc
) -> ThreadRead:
    return await threads.update(user_id, thread_id, body)


@router.delete(
    "/{thread_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    summary="Delete a thread",
    responses=WRITE_PROBLEMS,
)
async def delete_thread(
    user_id: AddressedUserId,
    thread_id: uuid.UUID,
    threads: ThreadSvc,
    cascade: Annotated[
        list[Literal["memories"]] | None,
        Query(description="`memories` also forgets the memories taken from this thread."),
    ] = None,
) -> None:
    """Delete the thread with its messages and summaries."""
    await threads.delete(user_id, thread_id, with_memories="memories" in (cascade or []))


@router.post(
    "/{thread_id}/messages",
    status_code=status.HTTP_201_CREATED,
    response_model=MessagesAppended,
    summary="Append messages",
    responses=WRITE_PROBLEMS,
)
async def append_messages(
    user_id: AddressedUserId,
    thread_id: uuid.UUID,
    body: MessagesAppend,
    threads: ThreadSvc,
    request: Request,
    idempotency_key: IdempotencyKeyHeader,
    idempotency: Idempotency,
) -> MessagesAppended | Response:
    """Append up to 100 messages in order. They are committed before anything else happens
    (summaries and extraction run afterwards, in the background). A message whose
    `client_message_id` is already stored is returned, not stored twice."""
    return await idempotency.run(
        idempotency_key,
        request,
        body,
        lambda: threads.append(user_id, thread_id, body.messages),
        status_code=status.HTTP_201_CREATED,
    )


@router.get(
    "/{thread_id}/messages",
    response_model=MessagePage,
    summary="List messages",
    responses=READ_PROBLEMS,
)
async def list_messages(
    user_id: AddressedUserId,
    thread_id: uuid.UUID,
    threads: ThreadSvc,
    cursor: Annotated[str | None, Query(description="From a previous page.")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = DEFAULT_PAGE_SIZE,
    label: Annotated[
        list[Annotated[int, Field(ge=1)]] | None,
        Query(description="Fetch human turns `#N` (each with the replies that follow)."),
    ] = None,
) -> MessagePage:
    """Messages in order, oldest first; or the turns a summary's refs cite."""
    return await threads.messages(user_id, thread_id, cursor=cursor, limit=limit, labels=label)
