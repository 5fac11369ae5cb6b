"""The kinds of background job and how each is enqueued (payload: tenant id and row ids only)."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from service.jobs.queue import enqueue_job

THREAD_SUMMARY_JOB = "thread_summary"
"""Evaluate a thread's summary trigger and, when due, write the next summary."""


async def enqueue_thread_summary(
    session: AsyncSession, tenant_id: str, thread_id: uuid.UUID
) -> None:
    """Queue a summary pass for the thread in the caller's transaction.

    A pass for the thread that has not started yet is reused (and kept from starting until this
    transaction ends), so a burst of appends queues one pass, not one per append.
    """
    await enqueue_job(
        session,
        THREAD_SUMMARY_JOB,
        {"tenant_id": tenant_id, "thread_id": str(thread_id)},
        dedupe=True,
    )
