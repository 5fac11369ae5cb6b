"""The threads domain's job handlers, registered at start-up."""

from __future__ import annotations

from service.jobs import THREAD_SUMMARY_JOB, JobRegistry
from service.state import AppState
from service.threads.summaries import thread_summary_job


def register_jobs(jobs: JobRegistry, state: AppState) -> None:
    """Summary passes, queued by appends (`SummaryScheduler`)."""
    jobs.handle(
        THREAD_SUMMARY_JOB, thread_summary_job(state.sessionmaker, state.chat_model, state.settings)
    )
