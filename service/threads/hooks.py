"""What an append tells the rest of the service: other domains (the write path) implement
`AppendListener`, and the app hands the thread service its listeners, so threads never
decide, or import, what follows an append."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from service.jobs import enqueue_thread_summary


@dataclass(frozen=True, slots=True)
class Appended:
    """New messages were stored on a thread by a principal (`by_admin`: its token's roles
    make it an admin, the only thing that may let follow-up work write org memory)."""

    tenant_id: str
    thread_id: uuid.UUID
    by_admin: bool


class AppendListener(Protocol):
    async def messages_appended(self, session: AsyncSession, appended: Appended) -> None:
        """Queue follow-up work in the append's transaction, so it commits (or not) with the
        messages."""


class SummaryScheduler:
    """The threads domain's own listener: queues a summary pass when summaries can run."""

    def __init__(self, enabled: bool) -> None:
        self._enabled = enabled

    async def messages_appended(self, session: AsyncSession, appended: Appended) -> None:
        if self._enabled:
            await enqueue_thread_summary(session, appended.tenant_id, appended.thread_id)
