"""Wiring of the context endpoint: the builder over the memories, profile and threads
services of the same request."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from service.config import Settings
from service.context.service import ContextBuilder
from service.dependencies import State
from service.memories.dependencies import MemorySearchSvc, MemorySvc
from service.memories.search import MemorySearch
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
