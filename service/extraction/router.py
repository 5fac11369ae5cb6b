"""HTTP routes of the write path: compaction, and the health of its background jobs."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends

from service.dependencies import AddressedUserId, AdminPrincipal, CurrentPrincipal, Session, State
from service.errors import problem_responses
from service.extraction.compaction import CompactionService
from service.extraction.health import WritePathHealth
from service.extraction.repository import ExtractionRepository
from service.extraction.schemas import CompactRequest, CompactResult, TenantJobs, UserJobs
from service.jobs.status import JobStatusRepository
from service.memories.dependencies import MemoryWriterSvc

user_router = APIRouter(prefix="/v1/users/{user_id}", tags=["memories"])
admin_router = APIRouter(prefix="/v1/admin", tags=["admin"])


def get_compaction_service(memories: MemoryWriterSvc, state: State) -> CompactionService:
    return CompactionService(
        memories, state.chat_model, state.embedding_backfill.embedder, state.settings
    )


CompactionSvc = Annotated[CompactionService, Depends(get_compaction_service)]


def get_health(session: Session, principal: CurrentPrincipal, state: State) -> WritePathHealth:
    # The tenant is the principal's: pgqueuer's tables are shared and have no row-level security.
    return WritePathHealth(
        JobStatusRepository(session, principal.tenant_id),
        ExtractionRepository(session, principal.tenant_id),
        state.settings,
        state.chat_model,
    )


Health = Annotated[WritePathHealth, Depends(get_health)]


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
    so far), recent failed runs, and recent extraction / turn-storage passes with what they
    wrote."""
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
