"""The write-path sweep: a durable, per-tenant job that finds threads whose background work
gave up and queues fresh jobs for them (its handler lives in `service.extraction.recovery`)."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from service.jobs.queue import enqueue_job

WRITE_PATH_SWEEP_JOB = "write_path_sweep"
"""Look for the tenant's threads whose extraction, turn storage or summary job failed for good
since their last progress, and queue fresh jobs for those whose backoff has passed."""


async def enqueue_write_path_sweep(
    session: AsyncSession, tenant_id: str, *, delay: timedelta
) -> None:
    """Queue the tenant's sweep to run after `delay`, in the caller's transaction; one already
    waiting that runs no later is kept instead."""
    await enqueue_job(
        session, WRITE_PATH_SWEEP_JOB, {"tenant_id": tenant_id}, dedupe=True, delay=delay
    )
