"""`mneme admin purge-user` and `export-user`: progress, the report, the verification."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from httpx import AsyncClient
from sqlalchemy.ext.asyncio import AsyncEngine

from service.cli import main
from service.config import Settings, get_settings
from tests.admin.conftest import rows_of, seed_user


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
