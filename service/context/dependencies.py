"""Wiring of the context endpoint: the builder over the memories, profile and threads
services of the same request."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends

from service.config import Settings
from service.context.schemas import ContextRequest
from service.context.service import ContextBuilder, start_embedding_context_question
from service.dependencies import AddressedUserId, State
from service.memories.dependencies import MemorySearchSvc, MemorySvc
from service.memories.search import MemorySearch, PendingVector, embedding_underway
from service.memories.service import MemoryService
from service.profile.dependencies import ProfileSvc
from service.profile.service import ProfileService
from service.threads.dependencies import ThreadSvc
from service.threads.service import ThreadService


def build_context_builder(
    search: MemorySearch,
    memories: MemoryService,
    profiles: ProfileService,
    threads: ThreadService,
    settings: Settings,
) -> ContextBuilder:
    return ContextBuilder(
        search,
        memories,
        profiles,
        threads,
        settings.context_budget_tokens,
        settings.thread_messages_buffer_recent_turns,
    )


async def get_context_builder(
    search: MemorySearchSvc,
    memories: MemorySvc,
    profiles: ProfileSvc,
    threads: ThreadSvc,
    state: State,
) -> ContextBuilder:
    return build_context_builder(search, memories, profiles, threads, state.settings)


ContextSvc = Annotated[ContextBuilder, Depends(get_context_builder)]


async def embed_context_question(
    _user_id: AddressedUserId, body: ContextRequest, state: State
) -> AsyncIterator[PendingVector | None]:
    """The context question's vector, on its way before the request's transaction begins (as
    for a search: `service.memories.dependencies.embed_search_question`)."""
    embedder = state.embedding_backfill.embedder
    async with embedding_underway(start_embedding_context_question(embedder, body)) as pending:
        yield pending


ContextQuestion = Annotated[PendingVector | None, Depends(embed_context_question)]
