"""HTTP route of the context endpoint."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Request, Response, status

from service.context.dependencies import ContextQuestion, ContextSvc, TurnQuestion
from service.context.schemas import ContextRequest, ContextResponse, TurnAppend, TurnAppended
from service.context.turns import record_turn
from service.dependencies import AddressedUserId, Idempotency
from service.errors import problem_responses
from service.kit.idempotency import AnswerHeaders, IdempotencyKeyHeader
from service.kit.openapi import READS_ONLY
from service.kit.resource_headers import created_response, location
from service.kit.routing import ApiRoute
from service.threads.dependencies import ThreadSvc

router = APIRouter(route_class=ApiRoute, prefix="/v1/users/{user_id}", tags=["context"])


@router.post(
    "/context",
    response_model=ContextResponse,
    response_model_exclude_none=False,
    summary="Build the memory block for the next model call",
    responses=problem_responses(401, 404, 422, 429),
    openapi_extra=READS_ONLY,
)
async def build_context(
    user_id: AddressedUserId, body: ContextRequest, question: ContextQuestion, context: ContextSvc
) -> ContextResponse:
    """A compact, token-budgeted block for the system prompt: organization memory, the user's
    profile, procedural instructions, relevant facts, episodic hints and (with `thread_id`) the
    thread's summaries and recent turns. Each item carries its id and the scores that chose it.
    Nothing is written."""
    return await context.build(user_id, body, embedding_question=question, last_database_work=True)


@router.post(
    "/threads/{thread_id}/turns",
    status_code=status.HTTP_201_CREATED,
    response_model=TurnAppended,
    response_model_exclude_none=False,
    summary="Append a turn and get the next context block",
    responses={
        **created_response(
            "The stored messages and the next context block; `Location` names the thread's "
            "messages.",
            tagged=False,
        ),
        **problem_responses(401, 404, 409, 413, 422, 429),
    },
)
async def append_turn(
    user_id: AddressedUserId,
    thread_id: uuid.UUID,
    body: TurnAppend,
    question: TurnQuestion,
    threads: ThreadSvc,
    context: ContextSvc,
    request: Request,
    response: Response,
    idempotency_key: IdempotencyKeyHeader,
    idempotency: Idempotency,
) -> TurnAppended | Response:
    """An agent turn in one round trip: append the messages (as `POST …/messages` does) and
    answer with the context block for the next model call (as `POST /context` with this thread
    would build it, after the append, in the same transaction). `context.query` defaults to the
    last appended user message. Send the previous assistant reply with the new user message."""
    messages = location("v1", "users", user_id, "threads", thread_id, "messages")
    return await idempotency.run(
        idempotency_key,
        request,
        body,
        lambda: record_turn(threads, context, user_id, thread_id, body, question),
        status_code=status.HTTP_201_CREATED,
        headers=AnswerHeaders(response, lambda _body: {"Location": messages}),
    )
