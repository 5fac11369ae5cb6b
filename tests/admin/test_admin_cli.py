"""`mneme admin …` against the real database: each command runs the admin API's use case as
the operator (`cli:<login>` in the audit trail), refuses bad input with a non-zero status and
changes nothing then."""

from __future__ import annotations

import asyncio
import getpass
import io
import json
import shlex
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi import FastAPI
from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.admin.cli import PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX
from service.admin.repository import TENANT_JOB_KINDS
from service.cli import main
from service.config import Settings, get_settings
from service.db import create_sessionmaker, tenant_transaction
from service.jobs import JobRegistry, enqueue_thread_summary
from service.jobs.sweep import enqueue_write_path_sweep
from service.kit.pagination import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, encode_cursor
from service.main import JOB_REGISTRARS
from tests.admin.conftest import rows_of, seed_user, tenant_rows
from tests.conftest import bearer, new_tenant

OPERATOR = f"cli:{getpass.getuser()}"


async def mneme(*arguments: str) -> int:
    """Run `mneme …` as a shell would (in a thread: the command runs its own event loop)."""
    return await asyncio.to_thread(main, list(arguments))


@pytest.fixture
def cli_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    assert settings.database_url is not None
    monkeypatch.setenv("MNEME_DATABASE_URL", settings.database_url.get_secret_value())
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


async def test_export_then_purge_from_the_command_line(
    cli_env: None,
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    target = tmp_path / "ada.ndjson"
    exported = ["admin", "export-user", "--tenant", tenant, "--user", "ada", "-o", str(target)]
    assert await asyncio.to_thread(main, exported) == 0
    records = [json.loads(line) for line in target.read_text().splitlines()]
    assert records[0]["type"] == "header" and len(records) > 10
    assert "exported" in capsys.readouterr().err

    purge = ["admin", "purge-user", "--tenant", tenant, "--user", "ada", "--yes"]
    assert await asyncio.to_thread(main, purge) == 0

    out, err = capsys.readouterr()
    report = json.loads(out)
    assert report["verified"] is True and report["deleted"]["memory"] == 2
    assert "purge-user: user_account 1" in err
    assert set((await rows_of(owner_engine, tenant, "ada")).values()) == {0}
    assert await asyncio.to_thread(main, purge) == 1
    assert "has nothing stored" in capsys.readouterr().err


class _Terminal(io.StringIO):
    """Standard input as an operator at a terminal types it."""

    def isatty(self) -> bool:
        return True


async def test_a_dry_run_counts_what_a_purge_would_delete_and_changes_nothing(
    cli_env: None,
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    before = await rows_of(owner_engine, tenant, "ada")
    dry_run = ["admin", "purge-user", "--tenant", tenant, "--user", "ada", "--dry-run"]
    assert await asyncio.to_thread(main, dry_run) == 0
    counts = json.loads(capsys.readouterr().out)
    assert counts["memory"] == 2 and counts["user_account"] == 1
    assert {table: counts[table] for table in before} == before
    assert await rows_of(owner_engine, tenant, "ada") == before


async def test_a_purge_without_yes_needs_the_user_id_typed_at_a_terminal(
    cli_env: None,
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    before = await rows_of(owner_engine, tenant, "ada")
    purge = ["admin", "purge-user", "--tenant", tenant, "--user", "ada"]

    monkeypatch.setattr("sys.stdin", io.StringIO("ada\n"))  # not a terminal: nobody to ask
    assert await asyncio.to_thread(main, purge) == 2
    assert "pass --yes" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin", _Terminal("y\n"))
    assert await asyncio.to_thread(main, purge) == 2
    err = capsys.readouterr().err
    assert "memory 2" in err and "nothing was purged" in err
    assert await rows_of(owner_engine, tenant, "ada") == before

    monkeypatch.setattr("sys.stdin", _Terminal("ada\n"))
    assert await asyncio.to_thread(main, purge) == 0
    assert json.loads(capsys.readouterr().out)["verified"] is True
    assert set((await rows_of(owner_engine, tenant, "ada")).values()) == {0}


async def test_list_users_pages_through_the_tenants_users_with_the_apis_counts(
    cli_env: None,
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for user in ("ada", "bob", "cy"):
        await seed_user(client, settings, owner_engine, tenant, user)
    listed = await client.get(
        "/v1/admin/users", headers=bearer(settings, tenant, "root", admin=True)
    )
    by_api = listed.json()["items"]

    assert await mneme("admin", "list-users", "--tenant", tenant, "--limit", "2", "--json") == 0
    out, err = capsys.readouterr()
    first_page = [json.loads(line) for line in out.splitlines()]
    assert [user["id"] for user in first_page] == ["ada", "bob"]
    cursor = err.split("--cursor ")[1].split()[0]
    assert await mneme("admin", "list-users", "--tenant", tenant, "--cursor", cursor, "--json") == 0
    assert [json.loads(line)["id"] for line in capsys.readouterr().out.splitlines()] == [
        "cy",
        "root",  # the admin who listed them over the API, recorded by its request
    ]

    assert (
        await mneme("admin", "list-users", "--tenant", tenant, "--limit", "1", "--all", "--json")
        == 0
    )
    assert [json.loads(line) for line in capsys.readouterr().out.splitlines()] == by_api
    assert await mneme("admin", "list-users", "--tenant", tenant) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].startswith("ada\tmemories 1 semantic, 1 episodic, 0 procedural\tthreads 2")


@pytest.mark.parametrize(
    ("command", "cursor"),
    [
        ("list-users", encode_cursor(["a\x00"])),
        ("list-users", encode_cursor(["\ud800"])),
        ("audit", encode_cursor(["2026-12-07T23:10:29+00:00\x00", str(uuid.UUID(int=1))])),
        ("audit", "not a cursor"),
    ],
)
async def test_a_forged_cursor_is_one_line_naming_the_problem_and_exits_1(
    cli_env: None,
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    capsys: pytest.CaptureFixture[str],
    command: str,
    cursor: str,
) -> None:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    capsys.readouterr()
    assert await mneme("admin", command, "--tenant", tenant, "--cursor", cursor) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.strip().splitlines() == [
        f"mneme admin {command}: VALIDATION_FAILED: The cursor is not one this API issued."
    ]


def test_the_commands_page_as_the_api_does() -> None:
    assert (PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX) == (DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)


@pytest.mark.parametrize(
    "arguments",
    [
        ["list-users", "--limit", "0"],
        ["list-users", "--limit", "201"],
        ["list-users", "--active-after", "2026-12-01T00:00:00"],
        ["audit", "--since", "yesterday"],
        ["show-user", "--user", "a/b"],
        ["purge-user", "--user", "", "--yes"],
        ["import-user", "--user", "me", "-i", "/dev/null"],
        ["export-user", "--user", "me"],
        ["show-user", "--user", "me"],
        ["purge-user", "--user", "me", "--yes"],
        ["rerun-extraction", "--user", "me"],
        ["show-user", "--user", "u" * 257],
    ],
)
async def test_bad_options_are_refused_before_anything_runs(
    cli_env: None,
    arguments: list[str],
    tenant: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    command, *options = arguments
    with pytest.raises(SystemExit) as exited:
        await mneme("admin", command, "--tenant", tenant, *options)
    assert exited.value.code == 2
    assert f"mneme admin {command}: error: argument" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("option", "value", "what"),
    [("--user", "a#b", "a user id"), ("--tenant", "a#b", "a tenant id")],
)
async def test_a_refused_id_is_told_the_rule_the_api_holds_ids_to(
    cli_env: None, capsys: pytest.CaptureFixture[str], option: str, value: str, what: str
) -> None:
    # `#` is printable and no `/`: the words must not describe a looser rule than the check.
    given = {"--tenant": "acme", "--user": "ada", option: value}
    with pytest.raises(SystemExit) as exited:
        await mneme("admin", "show-user", *(part for pair in given.items() for part in pair))
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"{value!r} is not {what} (1 to " in err
    assert "ASCII letters, digits and ._:@|+=-, starting with a letter or digit" in err


async def test_a_dry_run_of_a_purge_of_nothing_answers_as_the_purge_does(
    cli_env: None,
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    empty_tenant = new_tenant()
    before = await tenant_rows(owner_engine, tenant)
    capsys.readouterr()
    for purge in (
        ("purge-user", "--tenant", tenant, "--user", "ghost"),
        ("purge-tenant", "--tenant", empty_tenant),
    ):
        assert await mneme("admin", *purge, "--dry-run") == 1
        dry_run = capsys.readouterr()
        assert await mneme("admin", *purge, "--yes") == 1
        purged = capsys.readouterr()
        assert dry_run.out == purged.out == ""
        # The purge's last line (after its progress lines) is the problem; the dry run's only.
        assert dry_run.err.strip().splitlines() == purged.err.splitlines()[-1:]
        assert dry_run.err.strip().startswith(f"mneme admin {purge[0]}: NOT_FOUND: ")
    assert await tenant_rows(owner_engine, tenant) == before


async def test_an_export_the_disk_cannot_hold_is_one_line_and_exits_1(
    cli_env: None,
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    capsys.readouterr()
    # Every write to /dev/full fails as a full disk does (ENOSPC).
    exported = ("admin", "export-user", "--tenant", tenant, "--user", "ada", "-o", "/dev/full")
    assert await mneme(*exported) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.strip().splitlines() == [
        "mneme admin export-user: cannot write /dev/full: No space left on device; "
        "what it holds is not a whole export"
    ]
    # The user's data is untouched: an export to where it fits is whole.
    assert await mneme("admin", "export-user", "--tenant", tenant, "--user", "ada") == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert json.loads(first)["type"] == "header"


async def test_a_file_that_cannot_be_opened_is_one_line_and_nothing_is_exported_or_imported(
    cli_env: None,
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    user = ("--tenant", tenant, "--user", "ada")
    missing = tmp_path / "no such directory" / "ada.ndjson"
    capsys.readouterr()

    assert await mneme("admin", "export-user", *user, "-o", str(missing)) == 2
    assert capsys.readouterr() == (
        "",
        f"mneme admin export-user: cannot write {missing}: No such file or directory\n",
    )
    assert await mneme("admin", "export-user", *user, "-o", str(tmp_path)) == 2
    assert capsys.readouterr().err == (
        f"mneme admin export-user: cannot write {tmp_path}: Is a directory\n"
    )
    assert await mneme("admin", "purge-user", *user, "--yes") == 0
    capsys.readouterr()
    assert await mneme("admin", "import-user", *user, "-i", str(missing)) == 2
    assert capsys.readouterr() == (
        "",
        f"mneme admin import-user: cannot read {missing}: No such file or directory\n",
    )
    assert set((await rows_of(owner_engine, tenant, "ada")).values()) == {0}

    # The refused exports recorded no `admin.user_export`: nothing was exported.
    audit = ("admin", "audit", "--tenant", tenant, "--action", "admin.", "--json")
    assert await mneme(*audit) == 0
    actions = [json.loads(line)["action"] for line in capsys.readouterr().out.splitlines()]
    assert actions == ["admin.user_purge"]


async def test_show_user_answers_the_counts_or_names_the_problem(
    cli_env: None,
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    assert await mneme("admin", "show-user", "--tenant", tenant, "--user", "ada") == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["id"], shown["threads"], shown["messages"]) == ("ada", 2, 4)
    assert await mneme("admin", "show-user", "--tenant", tenant, "--user", "nobody") == 1
    assert "show-user: NOT_FOUND: User 'nobody' is not known" in capsys.readouterr().err


async def test_export_purge_and_import_restore_the_user_and_the_audit_trail_names_the_operator(
    cli_env: None,
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    before = await rows_of(owner_engine, tenant, "ada")
    saved = tmp_path / "ada.ndjson"
    user = ("--tenant", tenant, "--user", "ada")
    assert await mneme("admin", "export-user", *user, "-o", str(saved)) == 0
    assert await mneme("admin", "purge-user", *user, "--yes") == 0
    capsys.readouterr()

    assert await mneme("admin", "import-user", *user, "--input", str(saved)) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["user_id"] == "ada" and report["imported"]["memory"] == 2
    # Everything but the stored responses of replayable requests, which exports leave out.
    assert await rows_of(owner_engine, tenant, "ada") == {**before, "idempotency_record": 0}
    again = tmp_path / "again.ndjson"
    assert await mneme("admin", "export-user", *user, "-o", str(again)) == 0
    records = [json.loads(line) for line in saved.read_text().splitlines()[1:]]
    assert [json.loads(line) for line in again.read_text().splitlines()[1:]] == records

    audit = ("admin", "audit", "--tenant", tenant, "--actor", OPERATOR, "--json")
    assert await mneme(*audit, "--action", "admin.") == 0
    entries = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [entry["action"] for entry in entries] == [
        "admin.user_export",
        "admin.user_import",
        "admin.user_purge",
        "admin.user_export",
    ]
    assert {(e["actor_kind"], e["actor_id"], e["target_id"]) for e in entries} == {
        ("service", OPERATOR, "ada")
    }
    assert await mneme(*audit, "--since", "2999-01-01T00:00:00Z") == 0
    assert capsys.readouterr().out == ""


async def test_an_import_that_the_api_would_refuse_is_refused_whole(
    cli_env: None,
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    saved = tmp_path / "ada.ndjson"
    user = ("--tenant", tenant, "--user", "ada")
    assert await mneme("admin", "export-user", *user, "-o", str(saved)) == 0
    assert await mneme("admin", "import-user", *user, "-i", str(saved)) == 1
    assert "import-user: USER_NOT_EMPTY" in capsys.readouterr().err

    lines = saved.read_text().splitlines()
    memory = next(n for n, line in enumerate(lines) if json.loads(line)["type"] == "memory")
    record = json.loads(lines[memory])
    record["data"]["confidence"] = 7
    lines[memory] = json.dumps(record)
    tampered = tmp_path / "tampered.ndjson"
    tampered.write_text("\n".join(lines) + "\n")
    assert await mneme("admin", "purge-user", *user, "--yes") == 0
    capsys.readouterr()

    assert await mneme("admin", "import-user", *user, "-i", str(tampered)) == 1
    err = capsys.readouterr().err
    assert f"import-user: IMPORT_LINE_INVALID: Line {memory + 1}: memory.confidence" in err
    assert set((await rows_of(owner_engine, tenant, "ada")).values()) == {0}


@pytest.mark.parametrize("memory_id", ["not-a-uuid", None, 5])
async def test_an_import_with_a_memory_id_that_is_not_a_uuid_names_its_line_in_one_line(
    cli_env: None,
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    memory_id: object,
) -> None:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    saved = tmp_path / "ada.ndjson"
    user = ("--tenant", tenant, "--user", "ada")
    assert await mneme("admin", "export-user", *user, "-o", str(saved)) == 0
    assert await mneme("admin", "purge-user", *user, "--yes") == 0
    lines = saved.read_text().splitlines()
    memory = next(n for n, line in enumerate(lines) if json.loads(line)["type"] == "memory")
    record = json.loads(lines[memory])
    record["data"]["id"] = memory_id
    lines[memory] = json.dumps(record)
    saved.write_text("\n".join(lines) + "\n")
    capsys.readouterr()

    assert await mneme("admin", "import-user", *user, "-i", str(saved)) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"mneme admin import-user: IMPORT_LINE_INVALID: Line {memory + 1}: ")
    assert len(err.splitlines()) == 1
    assert set((await rows_of(owner_engine, tenant, "ada")).values()) == {0}


async def test_purge_tenant_counts_asks_then_leaves_nothing_of_that_tenant_alone(
    cli_env: None,
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    other_tenant = new_tenant()
    await seed_user(client, settings, owner_engine, tenant, "ada")
    await seed_user(client, settings, owner_engine, tenant, "bob")
    await seed_user(client, settings, owner_engine, other_tenant, "ada")
    before, twin_before = (
        await tenant_rows(owner_engine, tenant),
        await tenant_rows(owner_engine, other_tenant),
    )
    purge = ("admin", "purge-tenant", "--tenant", tenant)

    assert await mneme(*purge, "--dry-run") == 0
    counts = json.loads(capsys.readouterr().out)
    assert {table: counts[table] for table in before} == before
    assert counts["user_account"] == 2
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{tenant}\n"))  # not a terminal
    assert await mneme(*purge) == 2
    assert "pass --yes" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin", _Terminal(f"{other_tenant}\n"))
    assert await mneme(*purge) == 2
    err = capsys.readouterr().err
    assert "Type the tenant's id" in err and "nothing was purged" in err
    assert await tenant_rows(owner_engine, tenant) == before

    monkeypatch.setattr("sys.stdin", _Terminal(f"{tenant}\n"))
    assert await mneme(*purge) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verified"] is True and report["deleted"]["user_account"] == 2
    assert set((await tenant_rows(owner_engine, tenant)).values()) == {0}
    assert await tenant_rows(owner_engine, other_tenant) == twin_before
    assert await mneme(*purge, "--yes") == 1
    assert "purge-tenant: NOT_FOUND" in capsys.readouterr().err


TENANT_JOBS_SQL = text(
    "SELECT entrypoint FROM pgqueuer "
    "WHERE convert_from(payload, 'UTF8')::jsonb ->> 'tenant_id' = :tenant_id"
)


async def test_purge_tenant_drops_and_counts_every_queued_job_of_the_tenant(
    cli_env: None,
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    runtime_engine: AsyncEngine,
    tenant: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A job that gave up schedules the tenant's sweep, which is no user's: the report said no
    # job was left while the sweep stayed queued, naming the purged tenant.
    seeded = await seed_user(client, settings, owner_engine, tenant, "ada")
    async with tenant_transaction(create_sessionmaker(runtime_engine), tenant) as session:
        await enqueue_write_path_sweep(session, tenant, delay=timedelta(hours=1))
        await enqueue_thread_summary(session, tenant, uuid.UUID(seeded.thread_ids[0]))
    purge = ("admin", "purge-tenant", "--tenant", tenant)
    capsys.readouterr()

    assert await mneme(*purge, "--dry-run") == 0
    assert json.loads(capsys.readouterr().out)["pgqueuer"] == 2
    assert await mneme(*purge, "--yes") == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["deleted"]["pgqueuer"], report["remaining"]["pgqueuer"]) == (2, 0)
    async with owner_engine.connect() as connection:
        left = await connection.execute(TENANT_JOBS_SQL, {"tenant_id": tenant})
        assert list(left.scalars()) == []


async def test_purge_tenant_knows_every_kind_of_job_the_service_queues(app: FastAPI) -> None:
    registry = JobRegistry()
    for register in JOB_REGISTRARS:
        register(registry, app.state.mneme)
    assert set(registry.handlers) == set(TENANT_JOB_KINDS)


async def test_a_rerun_queues_the_users_thread_jobs_and_names_the_operator(
    cli_env: None,
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    seeded = await seed_user(client, settings, owner_engine, tenant, "ada")
    rerun = ("admin", "rerun-jobs", "--tenant", tenant, "--user", "ada")
    assert await mneme(*rerun, "--thread", seeded.thread_ids[0]) == 0
    assert "for 1 thread(s)" in capsys.readouterr().out

    assert await mneme("admin", "audit", "--tenant", tenant, "--action", "job.requeued") == 0
    entries = capsys.readouterr().out.splitlines()
    assert all(
        f"\tservice:{OPERATOR}\tjob.requeued\tthread:{seeded.thread_ids[0]}\t" in entry
        for entry in entries
    )
    # The kinds every worker runs as its own (whatever this shell knows of the service's model).
    kinds = sorted(json.loads(entry.split("\t")[-1])["kind"] for entry in entries)
    assert kinds == ["memory_extraction", "thread_summary"]
    with pytest.raises(SystemExit):
        await mneme(*rerun, "--thread", "not-a-uuid")


ADMIN_DOC = Path(__file__).resolve().parents[2] / "docs" / "admin.md"


def documented_session() -> list[list[str]]:
    """The `mneme admin` command lines of the terminal session in docs/admin.md, in order."""
    section = ADMIN_DOC.read_text().split("## From a terminal", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return [shlex.split(line)[1:] for line in block.splitlines() if line.startswith("mneme ")]


async def test_the_terminal_session_in_the_admin_docs_runs_as_written(
    cli_env: None,
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    before = await rows_of(owner_engine, tenant, "ada")
    monkeypatch.chdir(tmp_path)
    session = documented_session()
    assert {arguments[1] for arguments in session} >= {
        "list-users",
        "show-user",
        "export-user",
        "import-user",
        "purge-user",
        "purge-tenant",
        "audit",
        "rerun-jobs",
    }
    for arguments in session:
        command = [tenant if word == "acme" else word for word in arguments]
        assert await mneme(*command) == 0, (command, capsys.readouterr().err)
    # The session restored what it purged (but the stored responses exports leave out), and
    # its rerun recorded a `job.requeued` entry for each kind queued on the user's two threads.
    assert await rows_of(owner_engine, tenant, "ada") == {
        **before,
        "idempotency_record": 0,
        "audit_log": before["audit_log"] + 4,
    }
