"""The memories domain's job handlers, registered at start-up."""

from __future__ import annotations

from collections.abc import Mapping

from service.auth.owner import Owner
from service.db import tenant_transaction
from service.jobs import SEARCH_STATISTICS_JOB, JobHandler, JobRegistry
from service.memories.postings import PostingsRepository, recounts
from service.state import AppState


def register_jobs(jobs: JobRegistry, state: AppState) -> None:
    """Recounts of owners' search statistics, queued by the searches that need them."""
    jobs.handle(SEARCH_STATISTICS_JOB, search_statistics_job(state))


def search_statistics_job(state: AppState) -> JobHandler:
    """The handler of `SEARCH_STATISTICS_JOB`: one transaction in the owner's tenant."""

    async def handle(payload: Mapping[str, str]) -> None:
        user_id = payload.get("user_id")
        owner = Owner.org() if user_id is None else Owner.user(user_id)
        async with tenant_transaction(state.sessionmaker, payload["tenant_id"]) as session:
            await PostingsRepository(session, payload["tenant_id"]).refresh_statistics(owner)
        recounts.done(payload["tenant_id"], owner)

    return handle
