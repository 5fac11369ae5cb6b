"""HTTP routes of the write path: compaction, and the health of its background jobs."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body

from service.dependencies import AddressedUserId, AdminPrincipal
from service.errors import problem_responses
from service.extraction.dependencies import CompactionSvc, Health, Recovery
from service.extraction.schemas import (
    CompactRequest,
    CompactResult,
    RerunQueued,
    RerunRequest,
    TenantJobs,
    UserJobs,
)
from service.kit.routing import ApiRoute

user_router = APIRouter(route_class=ApiRoute, prefix="/v1/users/{user_id}", tags=["memories"])
admin_router = APIRouter(route_class=ApiRoute, prefix="/v1/admin", tags=["admin"])


@user_router.post(
    "/memories/compact",
    response_model=CompactResult,
    summary="Compact the user's facts",
    responses=problem_responses(401, 404, 409, 422, 429, 503),
)
async def compact_memories(
    user_id: AddressedUserId,
    compaction: CompactionSvc,
    body: Annotated[CompactRequest | None, Body()] = None,
) -> CompactResult:
    """Consolidate the user's live semantic facts with the LLM into fewer, cleaner facts. Each
    original folded into a new fact is superseded (`superseded_by`, `invalid_at`, a history
    event), never deleted; facts the model leaves alone stay. 409 `COMPACTION_DISABLED` without
    an LLM, 503 `LLM_UNAVAILABLE` when the model fails (nothing is written then)."""
    return await compaction.compact(user_id, body or CompactRequest())


@user_router.get(
    "/jobs",
    response_model=UserJobs,
    summary="The write path's jobs for a user",
    responses=problem_responses(401, 404, 422, 429),
)
async def get_user_jobs(user_id: AddressedUserId, health: Health) -> UserJobs:
    """Background work on the user's threads: jobs waiting or running (with failed attempts
    so far), recent failed runs, recent extraction / turn-storage passes with what they wrote,
    and recent summary passes with the window each summarised."""
    return await health.for_user(user_id)


@admin_router.get(
    "/jobs",
    response_model=TenantJobs,
    summary="The tenant's background jobs",
    responses=problem_responses(401, 403, 429),
)
async def get_tenant_jobs(_admin: AdminPrincipal, health: Health) -> TenantJobs:
    """Admins: the tenant's queued and running jobs by kind (how many retry, the oldest), the
    first of them, and recent failed runs."""
    return await health.for_tenant()


@admin_router.post(
    "/jobs/rerun",
    response_model=RerunQueued,
    status_code=202,
    summary="Run the write path and summaries again for a user's threads",
    responses=problem_responses(401, 403, 404, 422, 429),
)
async def rerun_write_path(
    _admin: AdminPrincipal, body: RerunRequest, recovery: Recovery
) -> RerunQueued:
    """Admins: queue fresh extraction (or turn storage) and summary jobs for one thread or all
    of a user's threads with messages, e.g. after a model outage outlasted the retries. Each
    pass starts where the thread's last one ended; a rerun never writes organization memory.
    404 `NOT_FOUND` when the user has no such thread with messages."""
    result = await recovery.rerun(body.user_id, body.thread_id)
    return RerunQueued(threads=result.threads, kinds=result.kinds)
