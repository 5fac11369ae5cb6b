"""HTTP routes for a user's conversation threads and their messages."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, Response, status

from service.dependencies import AddressedUserId, Idempotency, State
from service.errors import problem_responses
from service.kit.idempotency import AnswerHeaders, IdempotencyKeyHeader
from service.kit.pagination import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, Page
from service.kit.resource_headers import (
    NOT_MODIFIED_RESPONSE,
    IfMatch,
    IfNoneMatch,
    IfNoneMatchOnWrite,
    Tagged,
    conditional_read,
    created_response,
    location,
    tagged_response,
    with_etag,
)
from service.kit.routing import ApiRoute
from service.kit.types import PositiveInt64
from service.threads.dependencies import SummaryNowSvc, ThreadSvc
from service.threads.schemas import (
    MessagePage,
    MessagesAppend,
    MessagesAppended,
    SummariesDeleted,
    SummarizeResult,
    SummaryList,
    ThreadCreate,
    ThreadDeleted,
    ThreadRead,
    ThreadUpdate,
    ThreadWindow,
)
from service.threads.service import thread_etag

router = APIRouter(route_class=ApiRoute, prefix="/v1/users/{user_id}/threads", tags=["threads"])

READ_PROBLEMS = problem_responses(401, 404, 422, 429)
WRITE_PROBLEMS = problem_responses(401, 404, 409, 413, 422, 429)
GUARDED_WRITE_PROBLEMS = problem_responses(401, 404, 409, 412, 413, 422, 429)

MAX_WINDOW_MESSAGES = 1000
"""The most raw messages one window response may ask for (`max_messages`)."""


def tagged(thread: ThreadRead) -> Tagged[ThreadRead]:
    return Tagged(thread, thread_etag(thread))


def _created_thread(response: Response) -> AnswerHeaders:
    def derive(body: Any) -> dict[str, str]:
        thread = ThreadRead.model_validate(body)
        return {
            "Location": location("v1", "users", thread.user_id, "threads", thread.id),
            "ETag": thread_etag(thread),
        }

    return AnswerHeaders(response, derive)


def appended_to(response: Response, user_id: str, thread_id: uuid.UUID) -> AnswerHeaders:
    """Appended messages are read in order at the thread's messages, which `Location` names."""
    messages = location("v1", "users", user_id, "threads", thread_id, "messages")
    return AnswerHeaders(response, lambda _body: {"Location": messages})


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=ThreadRead,
    summary="Start a thread",
    responses={**created_response("The new thread."), **WRITE_PROBLEMS},
)
async def create_thread(
    user_id: AddressedUserId,
    body: ThreadCreate,
    threads: ThreadSvc,
    request: Request,
    response: Response,
    idempotency_key: IdempotencyKeyHeader,
    idempotency: Idempotency,
) -> ThreadRead | Response:
    """A new conversation for the user. A title or metadata holding what looks like a secret
    or PII is refused (422 `SECRET_REFUSED`); messages are appended separately."""
    return await idempotency.run(
        idempotency_key,
        request,
        body,
        lambda: threads.create(user_id, body),
        status_code=status.HTTP_201_CREATED,
        headers=_created_thread(response),
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
    "/{thread_id}",
    response_model=ThreadRead,
    summary="Get a thread",
    responses={**tagged_response("The thread."), **NOT_MODIFIED_RESPONSE, **READ_PROBLEMS},
)
async def get_thread(
    user_id: AddressedUserId,
    thread_id: uuid.UUID,
    threads: ThreadSvc,
    response: Response,
    if_none_match: IfNoneMatch = None,
) -> ThreadRead | Response:
    """The thread's title, metadata and activity, with its ETag. With `If-None-Match` naming
    the current ETag, 304 and no body. Its messages are listed by `…/messages`."""
    return conditional_read(response, tagged(await threads.get(user_id, thread_id)), if_none_match)


@router.patch(
    "/{thread_id}",
    response_model=ThreadRead,
    summary="Rename a thread or change its metadata",
    responses={**tagged_response("The thread as changed."), **GUARDED_WRITE_PROBLEMS},
)
async def update_thread(
    user_id: AddressedUserId,
    thread_id: uuid.UUID,
    body: ThreadUpdate,
    threads: ThreadSvc,
    response: Response,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatchOnWrite = None,
) -> ThreadRead:
    """Change the title or the metadata (replaced whole). A title or metadata holding what
    looks like a secret or PII is refused (422 `SECRET_REFUSED`) and nothing changes. With
    `If-Match`, only if the thread still has that ETag (else 412 and nothing changes); appending
    messages changes a thread's ETag. With `If-None-Match: *` (or its ETag), 412 since it
    exists (in that state)."""
    updated = await threads.update(
        user_id, thread_id, body, if_match=if_match, if_none_match=if_none_match
    )
    return with_etag(response, tagged(updated))


@router.delete(
    "/{thread_id}",
    response_model=ThreadDeleted,
    summary="Delete a thread",
    responses=GUARDED_WRITE_PROBLEMS,
)
async def delete_thread(
    user_id: AddressedUserId,
    thread_id: uuid.UUID,
    threads: ThreadSvc,
    cascade: Annotated[
        list[Literal["memories"]] | None,
        Query(description="`memories` also forgets the memories taken from this thread."),
    ] = None,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatchOnWrite = None,
) -> ThreadDeleted:
    """Delete the thread with its messages, summaries and extraction cursor; the answer
    counts the rows deleted per table. With `If-Match`, only if the thread still has that
    ETag; with `If-None-Match: *` (or its ETag), 412 since it exists (in that state)."""
    return await threads.delete(
        user_id,
        thread_id,
        with_memories="memories" in (cascade or []),
        if_match=if_match,
        if_none_match=if_none_match,
    )


@router.post(
    "/{thread_id}/messages",
    status_code=status.HTTP_201_CREATED,
    response_model=MessagesAppended,
    summary="Append messages",
    responses={
        **created_response("The messages, stored or found stored.", tagged=False),
        **WRITE_PROBLEMS,
    },
)
async def append_messages(
    user_id: AddressedUserId,
    thread_id: uuid.UUID,
    body: MessagesAppend,
    threads: ThreadSvc,
    request: Request,
    response: Response,
    idempotency_key: IdempotencyKeyHeader,
    idempotency: Idempotency,
) -> MessagesAppended | Response:
    """Append up to 100 messages in order. They are committed before anything else happens
    (summaries and extraction run afterwards, in the background). A message whose
    `client_message_id` is already stored is returned, not stored twice. A message's text and
    tool calls are stored as sent and masked wherever they are replayed into a prompt; an
    author `name` or `metadata` that looks like a secret is refused (422 `SECRET_REFUSED`) and
    nothing is appended."""
    return await idempotency.run(
        idempotency_key,
        request,
        body,
        lambda: threads.append(user_id, thread_id, body.messages),
        status_code=status.HTTP_201_CREATED,
        headers=appended_to(response, user_id, thread_id),
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
        list[PositiveInt64] | None,
        Query(description="Fetch human turns `#N` (each with the replies that follow)."),
    ] = None,
) -> MessagePage:
    """Messages in order, oldest first; or the turns a summary's refs cite."""
    return await threads.messages(user_id, thread_id, cursor=cursor, limit=limit, labels=label)


@router.get(
    "/{thread_id}/summaries",
    response_model=SummaryList,
    summary="List the thread's summaries",
    responses=READ_PROBLEMS,
)
async def list_summaries(
    user_id: AddressedUserId, thread_id: uuid.UUID, threads: ThreadSvc
) -> SummaryList:
    """Every summary pass, oldest first: entries `{question, answer, refs}` with refs mapped to
    message ids, the window it covers and token counts before and after."""
    return await threads.summaries(user_id, thread_id)


@router.delete(
    "/{thread_id}/summaries",
    response_model=SummariesDeleted,
    summary="Delete the thread's summaries",
    responses=WRITE_PROBLEMS,
)
async def delete_summaries(
    user_id: AddressedUserId, thread_id: uuid.UUID, threads: ThreadSvc
) -> SummariesDeleted:
    """Forget the summaries; the next pass writes them again from the messages."""
    return await threads.delete_summaries(user_id, thread_id)


@router.post(
    "/{thread_id}/summarize",
    response_model=SummarizeResult,
    summary="Summarize now",
    responses=problem_responses(401, 404, 409, 422, 429, 503),
)
async def summarize_thread_now(
    user_id: AddressedUserId, thread_id: uuid.UUID, summaries: SummaryNowSvc
) -> SummarizeResult:
    """Run a summary pass now over every complete turn not yet summarised (without waiting for
    K new turns). 409 `SUMMARIZATION_DISABLED` when no LLM is configured; 503 when it fails."""
    return await summaries.summarize(user_id, thread_id)


@router.get(
    "/{thread_id}/window",
    response_model=ThreadWindow,
    summary="The thread as a prompt should carry it",
    responses=READ_PROBLEMS,
)
async def get_thread_window(
    user_id: AddressedUserId,
    thread_id: uuid.UUID,
    threads: ThreadSvc,
    state: State,
    max_messages: Annotated[
        int | None,
        Query(
            ge=1,
            le=MAX_WINDOW_MESSAGES,
            description="The most raw messages to return, the newest "
            "(default MNEME_THREAD_WINDOW_MAX_MESSAGES, 200).",
        ),
    ] = None,
) -> ThreadWindow:
    """The summaries (oldest first, formatted for an `<earlier_conversation>` block) and the raw
    messages after the last summarised window, keeping at least
    MNEME_THREAD_MESSAGES_BUFFER_RECENT_TURNS recent human turns raw; at most `max_messages` of
    them, the newest (`truncated` says when older ones were left out). `summarization` says
    whether summaries are being written at all. Secrets in the messages (their text, author,
    tool calls and metadata) and summaries are masked, as in every prompt
    (`MNEME_MESSAGE_SECRETS_ON_REPLAY`)."""
    settings = state.settings
    return await threads.window(
        user_id,
        thread_id,
        settings.thread_messages_buffer_recent_turns,
        max_messages=max_messages or settings.thread_window_max_messages,
    )
