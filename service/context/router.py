"""HTTP route of the context endpoint."""

from __future__ import annotations

from fastapi import APIRouter

from service.context.dependencies import ContextSvc
from service.context.schemas import ContextRequest, ContextResponse
from service.dependencies import AddressedUserId
from service.errors import problem_responses

router = APIRouter(prefix="/v1/users/{user_id}", tags=["context"])


@router.post(
    "/context",
    response_model=ContextResponse,
    response_model_exclude_none=False,
    summary="Build the memory block for the next model call",
    responses=problem_responses(401, 404, 422, 429),
)
async def build_context(
    user_id: AddressedUserId, body: ContextRequest, context: ContextSvc
) -> ContextResponse:
    """A compact, token-budgeted block for the system prompt: organization memory, the user's
    profile, procedural instructions, relevant facts, episodic hints and (with `thread_id`) the
    thread's summaries and recent turns. Each item carries its id and the scores that chose it.
    Nothing is written."""
    return await context.build(user_id, body)
