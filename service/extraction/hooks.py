"""What an append queues for the write path, in the append's own transaction."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from service.config import Settings
from service.jobs import enqueue_memory_extraction, enqueue_turn_memories
from service.providers.llm import ChatModel
from service.threads.service import AppendHook


def write_path_hook(
    settings: Settings, chat_model: ChatModel | None, *, org_writes: bool
) -> AppendHook | None:
    """The hook that queues the thread's write-path job, or None when none could run.

    With an LLM it queues an extraction pass carrying `org_writes` — the appending principal's
    admin flag, from its token's roles — and without one, turn storage. Both are deduplicated
    per thread, so a burst of appends queues one job.
    """
    if not (settings.extraction_enabled and settings.jobs_enabled):
        return None
    if chat_model is None:
        return enqueue_turn_memories

    async def enqueue(session: AsyncSession, tenant_id: str, thread_id: uuid.UUID) -> None:
        await enqueue_memory_extraction(session, tenant_id, thread_id, org_writes=org_writes)

    return enqueue


def chain(*hooks: AppendHook | None) -> AppendHook | None:
    """One hook running each given hook in order (None when there is none)."""
    present = [hook for hook in hooks if hook is not None]
    if not present:
        return None
    if len(present) == 1:
        return present[0]

    async def run_all(session: AsyncSession, tenant_id: str, thread_id: uuid.UUID) -> None:
        for hook in present:
            await hook(session, tenant_id, thread_id)

    return run_all
