"""`mneme admin rerun-extraction`: queue an operator's rerun of the write path and summaries."""

from __future__ import annotations

import argparse
import sys
import uuid
from typing import Any

from service.config import get_settings


def add_rerun_parser(actions: Any) -> None:
    """Add `rerun-extraction` to `mneme admin`'s subcommands."""
    rerun = actions.add_parser(
        "rerun-extraction",
        help="queue fresh extraction (or turn storage) and summary jobs for a user's threads",
    )
    rerun.add_argument("--tenant", required=True)
    rerun.add_argument("--user", required=True, help="the user whose threads to process")
    rerun.add_argument("--thread", type=uuid.UUID, default=None, help="only this thread")


async def rerun_extraction(args: argparse.Namespace) -> int:
    from service.db import (
        create_engine,
        create_sessionmaker,
        open_database_target,
        tenant_transaction,
    )
    from service.extraction.recovery import WritePathRecovery
    from service.providers.llm import build_chat_model

    settings = get_settings()
    target = await open_database_target(settings)
    engine = create_engine(target.urls.runtime, settings, pool_size=1, max_overflow=0)
    chat_model = build_chat_model(settings)
    try:
        sessionmaker = create_sessionmaker(engine)
        recovery = WritePathRecovery(sessionmaker, settings, chat_model)
        async with tenant_transaction(sessionmaker, args.tenant) as session:
            result = await recovery.rerun(session, args.tenant, args.user, args.thread)
    finally:
        if chat_model is not None:
            await chat_model.aclose()
        await engine.dispose()
        target.close()
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
