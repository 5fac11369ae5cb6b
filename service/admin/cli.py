"""`mneme admin …`: what an operator does from a terminal, each the admin API's own use case.

Every command runs through the services the REST routes call (`AdminService`,
`UserLifecycle`, `WritePathRecovery`), each operation in one transaction scoped to the tenant
and held to its row-level security, acting as the operator (`service.operator`). Exit status:
0 done; 1 refused or failed (the message names the problem's code, as the API would); 2 bad
usage, or a purge not confirmed.

Only the parser is built at start-up: each command imports what it runs, so `mneme token`
and `mneme --help` stay light.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, BinaryIO, Literal

from service.auth.principal import TENANT_ID_MAX
from service.extraction.cli import rerun_extraction

if TYPE_CHECKING:
    from service.admin.service import AdminService, UserLifecycle
    from service.memories.vector_columns import VectorColumns
    from service.operator import OperatorConnection

# The API's page sizes (`service.kit.pagination`, which loads the web framework: the parser
# of every command is built at start-up, so it does not import it; a test keeps them equal).
PAGE_SIZE_DEFAULT = 50
PAGE_SIZE_MAX = 200
TIME_HELP = "an ISO 8601 time with a UTC offset, e.g. 2026-12-01T00:00:00Z"


def add_admin_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `mneme admin …` and its commands."""
    admin = commands.add_parser(
        "admin",
        help="operator commands: users, export and import, purge, the audit trail, jobs",
        description="Operator commands, run against the configured database as the runtime "
        "role (under the tenant's row-level security) and recorded in the audit trail as "
        "cli:<login name>.",
    )
    actions = admin.add_subparsers(dest="admin_command", required=True, metavar="COMMAND")

    users = actions.add_parser(
        "list-users", help="the tenant's users with their counts, in id order"
    )
    _tenant_option(users)
    _page_options(users, "users")
    users.add_argument(
        "--active-after",
        type=_time,
        help=f"only users last active at or after this time ({TIME_HELP})",
    )
    users.add_argument(
        "--active-before",
        type=_time,
        help=f"only users last active before this time, or never active ({TIME_HELP})",
    )

    show = actions.add_parser("show-user", help="one user of the tenant with its counts")
    _user_options(show)

    export = actions.add_parser(
        "export-user", help="write everything stored about a user as NDJSON (the API's export)"
    )
    _user_options(export)
    export.add_argument(
        "--output", "-o", default="-", help="file to write (default: standard output)"
    )

    restore = actions.add_parser(
        "import-user",
        help="restore a user from an export, all or nothing (the user must hold nothing yet)",
    )
    _user_options(restore, user_help="the user to restore (the export's own user)")
    restore.add_argument(
        "--input", "-i", default="-", help="the export to read (default: standard input)"
    )

    purge = actions.add_parser(
        "purge-user", help="delete everything stored about a user and verify nothing is left"
    )
    _user_options(purge)
    _purge_options(purge, "the user's id")

    purge_tenant = actions.add_parser(
        "purge-tenant",
        help="delete every row of a tenant and its queued jobs, and verify nothing is left",
    )
    _tenant_option(purge_tenant, "the tenant to purge")
    _purge_options(purge_tenant, "the tenant's id")

    audit = actions.add_parser("audit", help="the tenant's audit trail, newest first")
    _tenant_option(audit)
    _page_options(audit, "entries")
    audit.add_argument("--actor", help="only entries of this actor (e.g. root, cli:alice)")
    audit.add_argument(
        "--action",
        help="only this action (admin.user_purge), or a prefix ending in '.' (admin.)",
    )
    audit.add_argument("--target-type", help="only entries about this kind of target (user)")
    audit.add_argument("--target-id", help="only entries about this target (a user's id)")
    audit.add_argument(
        "--since", type=_time, help=f"only entries at or after this time ({TIME_HELP})"
    )
    audit.add_argument("--until", type=_time, help=f"only entries before this time ({TIME_HELP})")

    rerun = actions.add_parser(
        "rerun-extraction",
        aliases=["rerun-jobs"],
        help="queue fresh extraction (or turn storage) and summary jobs for a user's threads",
    )
    _user_options(rerun, "the user whose threads to process")
    rerun.add_argument(
        "--thread",
        type=uuid.UUID,
        default=None,
        help="only this thread (default: all the user's threads with messages, at most 500)",
    )


def _tenant_option(
    parser: argparse.ArgumentParser, help_text: str = "the tenant to act in"
) -> None:
    parser.add_argument(
        "--tenant", required=True, type=_identifier(TENANT_ID_MAX, "a tenant id"), help=help_text
    )


def _user_options(parser: argparse.ArgumentParser, user_help: str = "the user's id") -> None:
    _tenant_option(parser, "the tenant the user belongs to")
    parser.add_argument("--user", required=True, type=_user_id, help=user_help)


def _page_options(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--limit",
        type=_page_size,
        default=PAGE_SIZE_DEFAULT,
        help=f"{what} per page, 1 to {PAGE_SIZE_MAX} (default {PAGE_SIZE_DEFAULT})",
    )
    parser.add_argument("--cursor", help="the page after this cursor (printed after a page)")
    parser.add_argument("--all", action="store_true", help="follow the cursor to the last page")
    parser.add_argument(
        "--json", action="store_true", help=f"one JSON object per line, as the API's {what}"
    )


def _purge_options(parser: argparse.ArgumentParser, typed: str) -> None:
    parser.add_argument(
        "--yes",
        "-y",
        action="store_true",
        help=f"purge without asking for {typed} to be typed as confirmation",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print what a purge would delete (or redact), per table, and change nothing",
    )


def _identifier(max_length: int, what: str) -> Callable[[str], str]:
    """An argument type: an id the API could address (else a usage error)."""

    def check(value: str) -> str:
        from service.kit.types import identifier_rule, is_valid_identifier

        if not is_valid_identifier(value, max_length):
            raise argparse.ArgumentTypeError(
                f"{value!r} is not {what} ({identifier_rule(max_length)})"
            )
        return value

    return check


def _user_id(value: str) -> str:
    """An argument type: an id a user may have (else a usage error). Not `me`, which the API
    reads as the caller: a user of that id could not be addressed by any credential."""
    from service.kit.types import is_valid_user_id, user_id_rule

    if not is_valid_user_id(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a user id ({user_id_rule()})")
    return value


def _time(value: str) -> datetime:
    """An argument type: a time as the API's `Timestamp` takes it."""
    from service.kit.types import parse_timestamp

    try:
        return parse_timestamp(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc} ({TIME_HELP})") from None


def _page_size(value: str) -> int:
    try:
        size = int(value)
    except ValueError:
        size = 0
    if not 1 <= size <= PAGE_SIZE_MAX:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a whole number from 1 to {PAGE_SIZE_MAX}"
        )
    return size


async def run_admin(args: argparse.Namespace) -> int:
    """Run the parsed `mneme admin` command; its exit status."""
    from service.errors import DomainError
    from service.operator import operator_connection

    command = COMMANDS[args.admin_command]
    try:
        async with operator_connection(args.tenant) as connection:
            return await command(connection, args)
    except DomainError as exc:
        sys.stderr.write(f"\nmneme admin {args.admin_command}: {exc.code}: {exc.detail}\n")
        return 1
    except FileRefused as exc:
        sys.stderr.write(f"mneme admin {args.admin_command}: {exc}\n")
        return 2


class FileRefused(Exception):
    """A file an option names that cannot be opened: a bad option, said in one line."""


def _open(path: str, mode: Literal["rb", "wb"]) -> BinaryIO:
    """The file an option names, opened (`FileRefused` when it cannot be: missing, a directory,
    not permitted)."""
    try:
        return open(path, mode)
    except OSError as exc:
        action = "read" if mode == "rb" else "write"
        raise FileRefused(f"cannot {action} {path}: {exc.strerror or exc}") from None


async def _vector_columns(connection: OperatorConnection) -> VectorColumns:
    """The vector columns as the service sees them (an import stores each vector where its
    model's column is), read before the command's transaction takes the one connection."""
    from service.memories.vector_columns import VectorColumns
    from service.providers import build_embedder, embedder_config_from_settings

    # The configured embedder names the first column's model; nothing is embedded here.
    columns = VectorColumns(build_embedder(embedder_config_from_settings(connection.settings)))
    await columns.refresh(connection.engine)
    return columns


def _admin_service(
    connection: OperatorConnection, session: Any, vector_columns: VectorColumns
) -> AdminService:
    """The admin API's service, on `session`'s transaction, acting as the operator."""
    from service.admin.service import AdminService

    return AdminService.acting_as(
        session,
        connection.operator,
        profile_max_bytes=connection.settings.profile_max_bytes,
        vector_columns=vector_columns,
    )


def _lifecycle(connection: OperatorConnection) -> UserLifecycle:
    from service.admin.service import UserLifecycle

    return UserLifecycle(connection.sessionmaker, connection.operator)


async def _in_transaction(
    connection: OperatorConnection,
    work: Callable[[AdminService], Awaitable[Any]],
    vector_columns: VectorColumns | None = None,
) -> Any:
    """`work` on the admin service in one tenant-scoped transaction, committed at the end
    (`vector_columns`: as already read by a command that runs several transactions)."""
    from service.db import tenant_transaction

    if vector_columns is None:
        vector_columns = await _vector_columns(connection)
    async with tenant_transaction(
        connection.sessionmaker, connection.operator.tenant_id
    ) as session:
        return await work(_admin_service(connection, session, vector_columns))


async def _pages(
    connection: OperatorConnection,
    args: argparse.Namespace,
    read: Callable[[AdminService, str | None], Awaitable[Any]],
) -> int:
    """Print the page at `--cursor` (every page from there with `--all`), each read in its own
    transaction; tells the next page's cursor when there is one left."""
    cursor: str | None = args.cursor
    vector_columns = await _vector_columns(connection)
    while True:
        page = await _in_transaction(connection, _page_after(read, cursor), vector_columns)
        for item in page.items:
            sys.stdout.write((item.model_dump_json() if args.json else _row(item)) + "\n")
        cursor = page.next_cursor
        if cursor is None:
            return 0
        if not args.all:
            sys.stderr.write(f"more: pass --cursor {cursor} (or --all)\n")
            return 0


def _page_after(
    read: Callable[[AdminService, str | None], Awaitable[Any]], cursor: str | None
) -> Callable[[AdminService], Awaitable[Any]]:
    return lambda admin: read(admin, cursor)


def _row(item: Any) -> str:
    """One line of a listing, for reading at a terminal."""
    from service.admin.schemas import AuditEntryRead, UserOverview

    if isinstance(item, UserOverview):
        active = item.last_active_at.isoformat() if item.last_active_at else "never"
        memories = item.memories
        return (
            f"{item.id}\tmemories {memories.semantic} semantic, {memories.episodic} episodic, "
            f"{memories.procedural} procedural\tthreads {item.threads}\t"
            f"messages {item.messages}\tlast active {active}"
        )
    assert isinstance(item, AuditEntryRead)
    target = item.target_type + (f":{item.target_id}" if item.target_id else "")
    detail = json.dumps(item.detail, separators=(",", ":"), sort_keys=True)
    return (
        f"{item.created_at.isoformat()}\t{item.actor_kind}:{item.actor_id}\t{item.action}\t"
        f"{target}\t{detail}"
    )


async def _list_users(connection: OperatorConnection, args: argparse.Namespace) -> int:
    return await _pages(
        connection,
        args,
        lambda admin, cursor: admin.list_users(
            cursor=cursor,
            limit=args.limit,
            active_after=args.active_after,
            active_before=args.active_before,
        ),
    )


async def _audit(connection: OperatorConnection, args: argparse.Namespace) -> int:
    return await _pages(
        connection,
        args,
        lambda admin, cursor: admin.audit(
            cursor=cursor,
            limit=args.limit,
            actor_id=args.actor,
            action=args.action,
            target_type=args.target_type,
            target_id=args.target_id,
            since=args.since,
            until=args.until,
        ),
    )


async def _show_user(connection: OperatorConnection, args: argparse.Namespace) -> int:
    user = await _in_transaction(connection, lambda admin: admin.get_user(args.user))
    sys.stdout.write(user.model_dump_json(indent=2) + "\n")
    return 0


async def _import_user(connection: OperatorConnection, args: argparse.Namespace) -> int:
    """The API's import, fed the file's lines as they are read; all or nothing."""
    source = sys.stdin.buffer if args.input == "-" else _open(args.input, "rb")
    try:
        report = await _in_transaction(
            connection, lambda admin: admin.import_user(args.user, _lines(source))
        )
    finally:
        if source is not sys.stdin.buffer:
            source.close()
    sys.stdout.write(report.model_dump_json(indent=2) + "\n")
    return 0


async def _lines(source: BinaryIO) -> AsyncIterator[bytes]:
    """The file's lines without their newline, as the API splits a request body."""
    for line in source:
        yield line.removesuffix(b"\n")


async def _export_user(connection: OperatorConnection, args: argparse.Namespace) -> int:
    # The export first: one the API would refuse (an unknown user) leaves the file untouched,
    # which may hold an earlier export.
    export = await _lifecycle(connection).open_export(args.user)
    written: dict[str, int] = {}
    try:
        output = sys.stdout.buffer if args.output == "-" else _open(args.output, "wb")
    except FileRefused:
        await export.discard()
        raise
    lines = export.lines()
    try:
        try:
            async for line in lines:
                output.write(line)
                kind = json.loads(line)["type"]
                written[kind] = written.get(kind, 0) + 1
                if sum(written.values()) % 500 == 0:
                    _progress("export-user")("records", sum(written.values()) - 1)
        finally:
            # The snapshot ends now, not when the abandoned reader is collected.
            await lines.aclose()
            if output is not sys.stdout.buffer:
                output.close()
    except OSError as exc:
        # A full disk, a closed pipe: what was written is a part of the export only (its
        # `admin.user_export` audit entry stays: those records did leave the database).
        where = "standard output" if args.output == "-" else args.output
        sys.stderr.write(
            f"\nmneme admin export-user: cannot write {where}: {exc.strerror or exc}; "
            "what it holds is not a whole export\n"
        )
        return 1
    written.pop("header", None)
    declared = {kind: count for kind, count in export.counts.items() if count}
    sys.stderr.write(f"\nexported {sum(written.values())} records: {json.dumps(written)}\n")
    if written != declared:
        sys.stderr.write(f"mneme admin: the header announced {json.dumps(declared)}\n")
        return 1
    return 0


async def _purge_user(connection: OperatorConnection, args: argparse.Namespace) -> int:
    lifecycle = _lifecycle(connection)
    if args.dry_run or not args.yes:
        stored = await lifecycle.purge_preview(args.user)
        if args.dry_run:
            sys.stdout.write(json.dumps(stored, indent=2) + "\n")
            return 0
        about = f"everything stored about user {args.user!r} in tenant {args.tenant!r}"
        if not _confirmed("purge-user", about, "user's id", args.user, stored):
            return 2
    report = await lifecycle.purge_user(args.user, on_progress=_progress("purge-user"))
    return _purge_report(report)


async def _purge_tenant(connection: OperatorConnection, args: argparse.Namespace) -> int:
    lifecycle = _lifecycle(connection)
    if args.dry_run or not args.yes:
        stored = await lifecycle.purge_tenant_preview()
        if args.dry_run:
            sys.stdout.write(json.dumps(stored, indent=2) + "\n")
            return 0
        about = f"every row of tenant {args.tenant!r}, its audit trail included"
        if not _confirmed("purge-tenant", about, "tenant's id", args.tenant, stored):
            return 2
    # The operator confirmed above (or with --yes): the service's own confirmation is the id.
    report = await lifecycle.purge_tenant(args.tenant, on_progress=_progress("purge-tenant"))
    return _purge_report(report)


def _purge_report(report: Any) -> int:
    sys.stderr.write("\n")
    sys.stdout.write(report.model_dump_json(indent=2) + "\n")
    if not report.verified:
        sys.stderr.write("mneme admin: rows are left after the purge (see remaining)\n")
        return 1
    return 0


def _progress(command: str) -> Callable[[str, int], None]:
    """A progress line on standard error, rewritten as each table is done."""

    def show(table: str, count: int) -> None:
        sys.stderr.write(f"\r\033[K{command}: {table} {count}")
        sys.stderr.flush()

    return show


def _confirmed(command: str, about: str, name: str, expected: str, stored: dict[str, int]) -> bool:
    """Ask the operator to confirm a purge by typing the id it purges: it cannot be undone.
    Without a terminal to ask on, the purge needs `--yes`."""
    if not sys.stdin.isatty():
        sys.stderr.write(f"mneme admin: {command} asks for confirmation; pass --yes to skip it\n")
        return False
    rows = ", ".join(f"{table} {count}" for table, count in stored.items() if count) or "no rows"
    sys.stderr.write(f"This deletes {about} ({rows}); it cannot be undone.\n")
    sys.stderr.write(f"Type the {name} to confirm: ")
    sys.stderr.flush()
    if sys.stdin.readline().strip() != expected:
        sys.stderr.write("mneme admin: not confirmed; nothing was purged\n")
        return False
    return True


Command = Callable[["OperatorConnection", argparse.Namespace], Awaitable[int]]

COMMANDS: dict[str, Command] = {
    "list-users": _list_users,
    "show-user": _show_user,
    "export-user": _export_user,
    "import-user": _import_user,
    "purge-user": _purge_user,
    "purge-tenant": _purge_tenant,
    "audit": _audit,
    "rerun-extraction": rerun_extraction,
    "rerun-jobs": rerun_extraction,
}
