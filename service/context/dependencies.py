"""Wiring of the context endpoint: the builder over the memories, profile and threads
services of the same unit of work."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends

from service.context.schemas import ContextRequest, TurnAppend
from service.context.service import ContextBuilder, block_question
from service.context.turns import turn_context_request
from service.dependencies import AddressedUserId, CurrentPrincipal, State, provided
from service.memories.dependencies import memory_search, memory_service
from service.memories.search import (
    PendingVector,
    question_on_its_way,
)
from service.profile.dependencies import profile_service
from service.services import Services
from service.threads.dependencies import thread_service


def context_builder(services: Services) -> ContextBuilder:
    settings = services.state.settings
    return ContextBuilder(
        services.get(memory_search),
        services.get(memory_service),
        services.get(profile_service),
        services.get(thread_service),
        settings.context_budget_tokens,
        settings.thread_messages_buffer_recent_turns,
    )


ContextSvc = Annotated[ContextBuilder, Depends(provided(context_builder))]


async def embed_context_question(
    _user_id: AddressedUserId, principal: CurrentPrincipal, body: ContextRequest, state: State
) -> AsyncIterator[PendingVector | None]:
    """The context question's vector, on its way before the request's transaction begins (as
    for a search: `service.memories.dependencies.embed_search_question`)."""
    async with question_on_its_way(
        state.vector_columns,
        principal.tenant_id,
        block_question(body),
    ) as pending:
        yield pending


ContextQuestion = Annotated[PendingVector | None, Depends(embed_context_question)]


async def embed_turn_question(
    thread_id: uuid.UUID, principal: CurrentPrincipal, body: TurnAppend, state: State
) -> AsyncIterator[PendingVector | None]:
    """The question of the block a turn asks for (`turn_context_request`), on its way before
    the request's transaction begins (as for a block alone: `embed_context_question`). The
    route declares it after the addressed user, so nothing is embedded for a caller it
    refuses."""
    async with question_on_its_way(
        state.vector_columns,
        principal.tenant_id,
        block_question(turn_context_request(body, thread_id)),
    ) as pending:
        yield pending


TurnQuestion = Annotated[PendingVector | None, Depends(embed_turn_question)]
