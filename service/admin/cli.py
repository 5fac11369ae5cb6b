"""`mneme admin …`: the operator's commands (purge and export a user, re-run the write path)."""

from __future__ import annotations

import argparse
import sys

from service.config import get_settings
from service.extraction.cli import add_rerun_parser, rerun_extraction


def add_admin_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `mneme admin …`: purge or export a user, re-run the write path."""
    admin = commands.add_parser(
        "admin", help="operator commands: purge or export a user, re-run the write path"
    )
    actions = admin.add_subparsers(dest="admin_command", required=True)
    add_rerun_parser(actions)
    purge = actions.add_parser(
        "purge-user", help="delete everything stored about a user and verify nothing is left"
    )
    export = actions.add_parser("export-user", help="write a user's export (NDJSON)")
    for action in (purge, export):
        action.add_argument("--tenant", required=True, help="the tenant the user belongs to")
        action.add_argument("--user", required=True, help="the user's id")
    purge.add_argument(
        "--yes", "-y", action="store_true", help="purge without asking for confirmation"
    )
    purge.add_argument(
        "--dry-run",
        action="store_true",
        help="print what a purge would delete or redact, per table, and change nothing",
    )
    export.add_argument(
        "--output", "-o", default="-", help="file to write (default: standard output)"
    )


async def run_admin(args: argparse.Namespace) -> int:
    if args.admin_command == "rerun-extraction":
        return await rerun_extraction(args)
    return await _user_lifecycle(args)


async def _user_lifecycle(args: argparse.Namespace) -> int:
    """Purge or export a user as the runtime role (under the tenant's row-level security),
    acting as the operator: `cli:<login name>` in the audit trail."""
    import getpass
    import json

    from service.admin.service import UserLifecycle
    from service.auth.principal import Principal
    from service.db import create_engine, create_sessionmaker, open_database_target
    from service.errors import DomainError
    from service.kit.types import is_valid_identifier

    if not (is_valid_identifier(args.tenant, 128) and is_valid_identifier(args.user)):
        sys.stderr.write("mneme admin: --tenant and --user must be valid ids\n")
        return 2
    settings = get_settings()
    target = await open_database_target(settings)
    engine = create_engine(target.urls.runtime, settings, pool_size=1, max_overflow=0)
    operator = Principal(
        tenant_id=args.tenant,
        subject=f"cli:{getpass.getuser()}",
        kind="service",
        credential="api_key",
        is_admin=True,
    )
    lifecycle = UserLifecycle(create_sessionmaker(engine), operator)

    def progress(table: str, count: int) -> None:
        sys.stderr.write(f"\r\033[K{args.admin_command}: {table} {count}")
        sys.stderr.flush()

    try:
        if args.admin_command == "purge-user":
            if args.dry_run or not args.yes:
                stored = await lifecycle.purge_preview(args.user)
                if args.dry_run:
                    sys.stdout.write(json.dumps(stored, indent=2) + "\n")
                    return 0
                if not _confirmed(args.tenant, args.user, stored):
                    return 2
            report = await lifecycle.purge_user(args.user, on_progress=progress)
            sys.stderr.write("\n")
            sys.stdout.write(report.model_dump_json(indent=2) + "\n")
            if not report.verified:
                sys.stderr.write("mneme admin: rows are left after the purge (see remaining)\n")
                return 1
            return 0
        export = await lifecycle.open_export(args.user)
        written: dict[str, int] = {}
        # A command line process has nothing else to run while it writes.
        output = sys.stdout.buffer if args.output == "-" else open(args.output, "wb")  # noqa: ASYNC230, SIM115
        try:
            async for line in export.lines():
                output.write(line)
                kind = json.loads(line)["type"]
                written[kind] = written.get(kind, 0) + 1
                if sum(written.values()) % 500 == 0:
                    progress("records", sum(written.values()) - 1)
        finally:
            if output is not sys.stdout.buffer:
                output.close()
        written.pop("header", None)
        declared = {kind: count for kind, count in export.counts.items() if count}
        sys.stderr.write(f"\nexported {sum(written.values())} records: {json.dumps(written)}\n")
        if written != declared:
            sys.stderr.write(f"mneme admin: the header announced {json.dumps(declared)}\n")
            return 1
        return 0
    except DomainError as exc:
        sys.stderr.write(f"\nmneme admin: {exc.detail}\n")
        return 1
    finally:
        await engine.dispose()
        target.close()


def _confirmed(tenant: str, user: str, stored: dict[str, int]) -> bool:
    """Ask the operator to confirm a purge by typing the user's id: it cannot be undone.
    Without a terminal to ask on, the purge needs `--yes`."""
    if not sys.stdin.isatty():
        sys.stderr.write("mneme admin: purge-user asks for confirmation; pass --yes to skip it\n")
        return False
    rows = ", ".join(f"{table} {count}" for table, count in stored.items() if count) or "no rows"
    sys.stderr.write(
        f"This deletes everything stored about user {user!r} in tenant {tenant!r} ({rows}); "
        "it cannot be undone.\n"
    )
    sys.stderr.write("Type the user's id to confirm: ")
    sys.stderr.flush()
    if sys.stdin.readline().strip() != user:
        sys.stderr.write("mneme admin: not confirmed; nothing was purged\n")
        return False
    return True
