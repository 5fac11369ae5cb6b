"""`mneme admin rerun-extraction` (or `rerun-jobs`): the operator's rerun of the write path and
summaries, as `POST /v1/admin/jobs/rerun` runs it."""

from __future__ import annotations

import argparse
import sys


async def rerun_extraction(args: argparse.Namespace) -> int:
    """Queue the rerun in one tenant-scoped transaction, each queued job audited as the
    operator."""
    from service.db import tenant_transaction
    from service.extraction.recovery import WritePathRecovery
    from service.operator import operator_connection
    from service.providers.llm import build_chat_model

    async with operator_connection(args.tenant) as connection:
        # The kinds of job a rerun queues follow the configured write path (LLM or not).
        chat_model = build_chat_model(connection.settings)
        try:
            recovery = WritePathRecovery(connection.sessionmaker, connection.settings, chat_model)
            async with tenant_transaction(connection.sessionmaker, args.tenant) as session:
                result = await recovery.rerun(
                    session, args.tenant, args.user, args.thread, requested_by=connection.operator
                )
        finally:
            if chat_model is not None:
                await chat_model.aclose()
    if args.thread is not None and not result.threads:
        sys.stderr.write(
            f"mneme admin: no thread {args.thread} of user {args.user} with messages\n"
        )
        return 2
    if not result.kinds:
        sys.stderr.write("mneme admin: background work is off; nothing was queued\n")
        return 2
    sys.stdout.write(
        f"queued {', '.join(result.kinds)} for {len(result.threads)} thread(s); "
        "a running service's worker picks them up\n"
    )
    return 0
