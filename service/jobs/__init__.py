"""Durable background jobs: enqueued in the caller's transaction, run by an in-process worker."""

from service.jobs.kinds import (
    MEMORY_EXTRACTION_JOB,
    SEARCH_STATISTICS_JOB,
    THREAD_SUMMARY_JOB,
    TURN_MEMORIES_JOB,
    WRITE_PATH_JOBS,
    enqueue_memory_extraction,
    enqueue_search_statistics,
    enqueue_thread_summary,
    enqueue_turn_memories,
)
from service.jobs.queue import enqueue_job
from service.jobs.registry import JobRegistry
from service.jobs.worker import (
    FailureHook,
    JobFailed,
    JobFailure,
    JobHandler,
    JobWorker,
    RetryPolicy,
)

__all__ = [
    "MEMORY_EXTRACTION_JOB",
    "SEARCH_STATISTICS_JOB",
    "THREAD_SUMMARY_JOB",
    "TURN_MEMORIES_JOB",
    "WRITE_PATH_JOBS",
    "FailureHook",
    "JobFailed",
    "JobFailure",
    "JobHandler",
    "JobRegistry",
    "JobWorker",
    "RetryPolicy",
    "enqueue_job",
    "enqueue_memory_extraction",
    "enqueue_search_statistics",
    "enqueue_thread_summary",
    "enqueue_turn_memories",
]
