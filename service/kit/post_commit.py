"""Work that must run only after the request's transaction committed (e.g. embedding retries).

Services register callbacks; the session dependency hands them to the `BackgroundRunner` once
the commit succeeded, so background work never sees, or acts on, data that was rolled back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

logger = logging.getLogger("mneme.background")

Job = Callable[[], Awaitable[None]]


class PostCommitTasks:
    def __init__(self) -> None:
        self._jobs: list[Job] = []

    def add(self, job: Job) -> None:
        self._jobs.append(job)

    def take(self) -> list[Job]:
        jobs, self._jobs = self._jobs, []
        return jobs


class BackgroundRunner:
    """Runs fire-and-forget jobs, keeps them referenced, and drains them at shutdown."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, job: Job) -> None:
        task = asyncio.create_task(self._run(job))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, job: Job) -> None:
        try:
            await job()
        except Exception:
            logger.exception("background job failed")

    async def drain(self) -> None:
        """Wait for every job started so far (shutdown, tests)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
