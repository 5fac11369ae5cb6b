"""The write path's job handlers: what the worker runs for each kind of job the write path
queues, registered at start-up."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from service.extraction.health import JobFailureRecorder
from service.extraction.pipeline import WritePath
from service.extraction.recovery import WritePathRecovery, write_path_sweep_job
from service.jobs import MEMORY_EXTRACTION_JOB, TURN_MEMORIES_JOB, JobHandler, JobRegistry
from service.jobs.sweep import WRITE_PATH_SWEEP_JOB
from service.state import AppState


def register_jobs(jobs: JobRegistry, state: AppState) -> None:
    """Extraction and turn storage, the sweep that re-queues what gave up, and a `job.failed`
    record for every failed run of a job that works on a thread."""
    write_path = WritePath(state)
    recovery = WritePathRecovery(state.sessionmaker, state.settings, state.chat_model)
    jobs.handle(MEMORY_EXTRACTION_JOB, memory_extraction_job(write_path))
    jobs.handle(TURN_MEMORIES_JOB, turn_memories_job(write_path))
    jobs.handle(WRITE_PATH_SWEEP_JOB, write_path_sweep_job(recovery))
    jobs.on_failure(JobFailureRecorder(state.sessionmaker, recovery.interval))


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
