"""`mneme reembed start` claims a column only for a model that runs, and a start while another
change is under way says so: a change no process can run is never started, and one under way
is completed (no step abandons it)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from service.cli import main
from service.config import Settings, get_settings
from service.embedded_postgres import EmbeddedCluster
from tests.fixtures.model_files import operator_model_file
from tests.memories.model_change import own_database

# The change here goes to a model file of the operator's: no embeddings server is asked.
NO_SERVER = "http://127.0.0.1:9/v1"
E5 = "multilingual-e5-small"


def _configure(
    monkeypatch: pytest.MonkeyPatch, settings: Settings, second: dict[str, Any] | None
) -> None:
    """The environment of `mneme reembed` on `settings`' database, with `second` as
    MNEME_EMBEDDING_SECOND (None: unset)."""
    assert settings.database_url is not None and settings.migration_database_url is not None
    monkeypatch.setenv("MNEME_DATABASE_URL", settings.database_url.get_secret_value())
    monkeypatch.setenv(
        "MNEME_MIGRATION_DATABASE_URL", settings.migration_database_url.get_secret_value()
    )
    if second is None:
        monkeypatch.delenv("MNEME_EMBEDDING_SECOND", raising=False)
    else:
        monkeypatch.setenv("MNEME_EMBEDDING_SECOND", json.dumps(second))
    get_settings.cache_clear()


@pytest.fixture
def fresh_settings() -> Iterator[None]:
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


@pytest.mark.usefixtures("fresh_settings")
def test_start_refuses_a_second_model_file_it_cannot_use_and_claims_nothing(
    cluster: EmbeddedCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = asyncio.run(own_database(cluster, NO_SERVER))
    model, sha256 = operator_model_file(tmp_path)
    capsys.readouterr()  # what the database's own preparation logged
    pinned_elsewhere = {"local_model_path": str(model), "local_model_sha256": "0" * 64}
    _configure(monkeypatch, settings, {**pinned_elsewhere, "profile": E5})
    assert main(["reembed", "start"]) == 2
    assert capsys.readouterr() == (
        "",
        "mneme reembed start: MNEME_EMBEDDING_SECOND: local_model_sha256: the embedding model "
        f"{model} has sha256 {sha256}, not the configured {'0' * 64}; vectors of another model "
        "would not compare with those stored\n",
    )
    assert main(["reembed", "status"]) == 0
    assert "no change of model under way" in capsys.readouterr().out


@pytest.mark.usefixtures("fresh_settings")
def test_start_while_a_change_to_another_model_is_under_way_says_how_to_complete_it(
    cluster: EmbeddedCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = asyncio.run(own_database(cluster, NO_SERVER))
    model, sha256 = operator_model_file(tmp_path)
    capsys.readouterr()  # what the database's own preparation logged
    _configure(
        monkeypatch,
        settings,
        {"local_model_path": str(model), "local_model_sha256": sha256, "profile": E5},
    )
    # An operator's model file is named by its profile and its content.
    e5_file = f"{E5}+file-{sha256[:12]}"
    assert main(["reembed", "start"]) == 0
    assert f"memory.embedding_alt is being filled for {e5_file}" in capsys.readouterr().out
    under_way = (
        f"a change of model to {e5_file} is under way (memory.embedding_alt is being filled), and "
        f"the settings name no embedder of {e5_file}: configure it as MNEME_EMBEDDING_SECOND (or "
        "MNEME_EMBEDDING_*) and complete the change with `mneme reembed run` and `mneme "
        "reembed finish`; no step abandons a change (docs/embedding-models.md, A change "
        "started by mistake)"
    )
    # Without the second model, or with another one in its place.
    for second in (None, {"profile": "bge-small-en-v1.5"}):
        _configure(monkeypatch, settings, second)
        for step in ("start", "run"):
            assert main(["reembed", step]) == 2
            assert capsys.readouterr() == ("", f"mneme reembed {step}: {under_way}\n")
    assert main(["reembed", "status"]) == 0
    assert f"filling: embedding_alt with {e5_file}" in capsys.readouterr().out
