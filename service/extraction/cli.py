"""`mneme admin rerun-extraction` (or `rerun-jobs`): the operator's rerun of the write path and
summaries, as `POST /v1/admin/jobs/rerun` runs it."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from service.operator import OperatorConnection


async def rerun_extraction(connection: OperatorConnection, args: argparse.Namespace) -> int:
    """Queue the rerun through the API's own use case (a user or thread without messages is
    its 404), in one tenant-scoped transaction, each queued job audited as the operator."""
    from service.db import tenant_transaction
    from service.extraction.recovery import RerunInTransaction, WritePathRecovery

    # The service's workers run what is queued here, with their model or without one; this
    # shell's settings need not say which, so they do not choose the kinds.
    recovery = WritePathRecovery.for_any_worker(connection.sessionmaker, connection.settings)
    async with tenant_transaction(connection.sessionmaker, args.tenant) as session:
        rerun = RerunInTransaction(recovery, session, connection.operator)
        result = await rerun.rerun(args.user, args.thread)
    if not result.kinds:
        sys.stderr.write(
            "mneme admin: background work is off in these settings (MNEME_JOBS_ENABLED, or "
            "MNEME_EXTRACTION_ENABLED with summaries off); nothing was queued\n"
        )
        return 2
    sys.stdout.write(
        f"queued {', '.join(result.kinds)} for {len(result.threads)} thread(s); a running "
        "service's worker picks them up (without an LLM it stores the turns and writes no "
        "summary)\n"
    )
    return 0
