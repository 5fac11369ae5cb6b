"""The kinds of background job and how each is enqueued (payload: tenant id and row ids only)."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from service.auth.owner import Owner
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


MEMORY_EXTRACTION_JOB = "memory_extraction"
"""Evaluate the thread's extraction trigger and, when due, extract memories from its new turns
with the LLM and reconcile them with what is known."""

TURN_MEMORIES_JOB = "turn_memories"
"""Without an LLM: store the thread's new human turns as episodic memories."""

WRITE_PATH_JOBS = (MEMORY_EXTRACTION_JOB, TURN_MEMORIES_JOB)


async def enqueue_memory_extraction(
    session: AsyncSession, tenant_id: str, thread_id: uuid.UUID, *, org_writes: bool
) -> None:
    """Queue an extraction pass for the thread in the caller's transaction (deduplicated like
    summary passes). `org_writes` is whether the appending principal is an admin: it comes from
    the principal's roles, never from a model or a request body, and is the only thing that
    lets the pass write organization memory."""
    await enqueue_job(
        session,
        MEMORY_EXTRACTION_JOB,
        {
            "tenant_id": tenant_id,
            "thread_id": str(thread_id),
            "org_writes": "true" if org_writes else "false",
        },
        dedupe=True,
    )


async def enqueue_turn_memories(
    session: AsyncSession, tenant_id: str, thread_id: uuid.UUID
) -> None:
    """Queue turn storage for the thread in the caller's transaction (deduplicated)."""
    await enqueue_job(
        session,
        TURN_MEMORIES_JOB,
        {"tenant_id": tenant_id, "thread_id": str(thread_id)},
        dedupe=True,
    )


SEARCH_STATISTICS_JOB = "search_statistics"
"""Recount an owner's search statistics (memory count, mean length, common lexemes' counts),
which a large owner's bounded search reads instead of counting them."""


async def enqueue_search_statistics(session: AsyncSession, tenant_id: str, owner: Owner) -> None:
    """Queue a recount of the owner's search statistics in the caller's transaction
    (deduplicated: the searches that find them missing or old queue one)."""
    payload = {"tenant_id": tenant_id, "scope": owner.scope}
    if owner.user_id is not None:
        payload["user_id"] = owner.user_id
    await enqueue_job(session, SEARCH_STATISTICS_JOB, payload, dedupe=True)
