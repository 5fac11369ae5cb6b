"""Durable background jobs: enqueued in the caller's transaction, run by an in-process worker."""

from service.jobs.kinds import THREAD_SUMMARY_JOB, enqueue_thread_summary
from service.jobs.queue import enqueue_job
from service.jobs.worker import JobFailed, JobHandler, JobWorker, RetryPolicy

__all__ = [
    "THREAD_SUMMARY_JOB",
    "JobFailed",
    "JobHandler",
    "JobWorker",
    "RetryPolicy",
    "enqueue_job",
    "enqueue_thread_summary",
]
