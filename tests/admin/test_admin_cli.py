"""`mneme admin purge-user` and `export-user`: progress, the report, the verification."""

from __future__ import annotations

import asyncio
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

    purge = ["admin", "purge-user", "--tenant", tenant, "--user", "ada"]
    assert await asyncio.to_thread(main, purge) == 0

    out, err = capsys.readouterr()
    report = json.loads(out)
    assert report["verified"] is True and report["deleted"]["memory"] == 2
    assert "purge-user: user_account 1" in err
    assert set((await rows_of(owner_engine, tenant, "ada")).values()) == {0}
    assert await asyncio.to_thread(main, purge) == 1
    assert "has nothing stored" in capsys.readouterr().err
