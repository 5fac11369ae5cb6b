"""The memories domain's job handlers, registered at start-up."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from service.accounts.repository import AccountRepository
from service.auth.owner import Owner
from service.db import tenant_transaction
from service.jobs import SEARCH_STATISTICS_JOB, JobHandler, JobRegistry
from service.memories.postings import PostingsRepository, growth, recounts
from service.state import AppState

logger = logging.getLogger("mneme.memories.jobs")


def register_jobs(jobs: JobRegistry, state: AppState) -> None:
    """Recounts of owners' search statistics, queued by the searches and writes that need them."""
    jobs.handle(SEARCH_STATISTICS_JOB, search_statistics_job(state))


def search_statistics_job(state: AppState) -> JobHandler:
    """The handler of `SEARCH_STATISTICS_JOB`: one transaction in the owner's tenant. Where this
    process keeps the owners' vector indexes, an owner the recount finds large enough for one
    it lacks has them built now rather than at the keeper's next turn (minutes away)."""

    async def handle(payload: Mapping[str, str]) -> None:
        tenant_id, user_id = payload["tenant_id"], payload.get("user_id")
        owner = Owner.org() if user_id is None else Owner.user(user_id)
        async with tenant_transaction(state.sessionmaker, tenant_id) as session:
            # The owner's statistics are its data: written after its write locks, as every
            # write to it, so a purge never meets a recount half-way.
            await AccountRepository(session, tenant_id).hold_owner_writes(owner)
            documents = await PostingsRepository(session, tenant_id).refresh_statistics(owner)
        recounts.done(tenant_id, owner)
        growth.counted(tenant_id, owner, documents)
        if state.owner_indexes is None:
            return
        try:
            await state.owner_indexes.build_soon_if_wanted(tenant_id, owner, documents)
        except Exception:
            # The recount stands; the keeper's turn builds what is missing.
            logger.exception("could not check the owner's vector indexes after its recount")

    return handle
