"""The write path's answer to an append: which job it queues, in the append's transaction."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from service.config import Settings
from service.extraction.health import write_path_mode
from service.jobs import enqueue_memory_extraction, enqueue_turn_memories
from service.providers.llm import ChatModel
from service.threads.hooks import Appended


class WritePathScheduler:
    """An `AppendListener`: queues the thread's write-path job, or nothing when none could run.

    With an LLM it queues an extraction pass carrying `org_writes` — the appending principal's
    admin flag, from its token's roles — and without one, turn storage. Both are deduplicated
    per thread, so a burst of appends queues one job.
    """

    def __init__(self, settings: Settings, chat_model: ChatModel | None) -> None:
        self._mode = write_path_mode(settings, chat_model)

    async def messages_appended(self, session: AsyncSession, appended: Appended) -> None:
        if self._mode == "llm":
            await enqueue_memory_extraction(
                session, appended.tenant_id, appended.thread_id, org_writes=appended.by_admin
            )
        elif self._mode == "turns":
            await enqueue_turn_memories(session, appended.tenant_id, appended.thread_id)
