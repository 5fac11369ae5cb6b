"""The write path's job handlers: what the worker runs for each kind of job."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from service.extraction.pipeline import WritePath
from service.jobs import JobHandler


def memory_extraction_job(write_path: WritePath) -> JobHandler:
    """The handler of `MEMORY_EXTRACTION_JOB`; a model failure raises, so the job is retried
    with backoff (and the next append's pass reads the same turns anyway)."""

    async def handle(payload: Mapping[str, str]) -> None:
        await write_path.extract(
            payload["tenant_id"],
            uuid.UUID(payload["thread_id"]),
            org_writes=payload.get("org_writes") == "true",
        )

    return handle


def turn_memories_job(write_path: WritePath) -> JobHandler:
    """The handler of `TURN_MEMORIES_JOB`."""

    async def handle(payload: Mapping[str, str]) -> None:
        await write_path.store_turns(payload["tenant_id"], uuid.UUID(payload["thread_id"]))

    return handle
