"""Wiring of the context endpoint: the builder over the memories, profile and threads
services of the same request."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from service.context.service import ContextBuilder
from service.dependencies import State
from service.memories.dependencies import MemorySearchSvc, MemorySvc
from service.profile.dependencies import ProfileSvc
from service.threads.dependencies import ThreadSvc


async def get_context_builder(
    search: MemorySearchSvc,
    memories: MemorySvc,
    profiles: ProfileSvc,
    threads: ThreadSvc,
    state: State,
) -> ContextBuilder:
    return ContextBuilder(
        search,
        memories,
        profiles,
        threads,
        state.settings.context_budget_tokens,
        state.settings.thread_messages_buffer_recent_turns,
    )


ContextSvc = Annotated[ContextBuilder, Depends(get_context_builder)]
