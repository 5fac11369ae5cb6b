"""An operator's model file names its vectors after its profile and its content, in the API,
the change's status and the metrics; a database whose vectors carry the profile's name alone
(as earlier releases named them) keeps being served by the file under that name."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import text

from service.cli import main
from service.config import Settings, get_settings
from service.embedded_postgres import EmbeddedCluster
from service.memories import reembed
from service.observability import DOMAIN_METRICS
from service.providers import EmbedderConfig, build_embedder
from tests.conftest import bearer, database_of_its_own, new_tenant
from tests.fixtures.factories import remember_all
from tests.fixtures.model_files import operator_model_file
from tests.memories.model_change import (
    assert_one_model,
    owner_engine_for,
    running_app,
    search_memories,
)

PROFILE = "multilingual-e5-small"
TEXTS = ["Lena lives in Lisbon and cycles to work", "Lena prefers tea over coffee"]


@pytest.fixture(scope="module")
def operator_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return operator_model_file(tmp_path_factory.mktemp("model"))


async def _served_by_the_file(cluster: EmbeddedCluster, model: tuple[Path, str]) -> Settings:
    path, sha256 = model
    return await database_of_its_own(
        cluster,
        embedding_local_model_path=path,
        embedding_local_model_sha256=sha256,
        embedding_profile=PROFILE,
    )


async def test_a_model_file_names_its_vectors_by_its_profile_and_content_everywhere(
    cluster: EmbeddedCluster, operator_model: tuple[Path, str]
) -> None:
    settings = await _served_by_the_file(cluster, operator_model)
    name = f"{PROFILE}+file-{operator_model[1][:12]}"
    headers = bearer(settings, new_tenant(), "lena")
    async with running_app(settings) as (_, client), owner_engine_for(settings) as owner:
        (memory,) = await remember_all(client, headers, {"text": TEXTS[0]})
        assert memory["embedding_model"] == name
        [hit] = (await search_memories(client, headers, TEXTS[0], limit=1))["hits"]
        assert hit["memory"]["embedding_model"] == name
        assert (await reembed.status(owner)).lines()[0] == f"live column: embedding ({name})"
    for purpose in ("document", "query"):
        count = DOMAIN_METRICS.registry.get_sample_value(
            "mneme_embedding_duration_seconds_count", {"purpose": purpose, "model": name}
        )
        assert count is not None and count >= 1


async def _named_as_earlier_releases_did(
    cluster: EmbeddedCluster, model: tuple[Path, str]
) -> tuple[Settings, str]:
    """A database the file served, `TEXTS[0]` written for "lena" of a new tenant (returned), its
    vectors and live column then named as earlier releases named them: by the profile alone."""
    settings = await _served_by_the_file(cluster, model)
    tenant = new_tenant()
    async with running_app(settings) as (_, client):
        await remember_all(client, bearer(settings, tenant, "lena"), {"text": TEXTS[0]})
    async with owner_engine_for(settings) as owner, owner.begin() as connection:
        await connection.execute(text("UPDATE memory SET embedding_model = :m"), {"m": PROFILE})
        await connection.execute(
            text("UPDATE embedding_column SET model = :m WHERE status = 'live'"), {"m": PROFILE}
        )
    return settings, tenant


async def test_vectors_named_by_the_profile_alone_stay_served_by_the_file_under_that_name(
    cluster: EmbeddedCluster, operator_model: tuple[Path, str], caplog: pytest.LogCaptureFixture
) -> None:
    settings, tenant = await _named_as_earlier_releases_did(cluster, operator_model)
    headers = bearer(settings, tenant, "lena")
    path, sha256 = operator_model
    the_file = build_embedder(
        EmbedderConfig(local_model_path=path, local_model_sha256=sha256, profile=PROFILE)
    )
    try:
        async with running_app(settings) as (_, client):
            (memory,) = await remember_all(client, headers, {"text": TEXTS[1]})
            assert memory["embedding_model"] == PROFILE
            for said in TEXTS:
                found = await search_memories(client, headers, said, limit=2)
                assert found["hits"][0]["memory"]["text"] == said
                # Every vector compared is the file's, under the column's name for it.
                assert await assert_one_model(found, said, {PROFILE: the_file}) == PROFILE
    finally:
        await the_file.aclose()
    # The file runs for the column: nothing to warn about.
    assert "serves no column" not in caplog.text
    assert "not those of the configured model" not in caplog.text


def test_the_commands_fill_and_keep_a_column_named_by_the_profile_alone(
    cluster: EmbeddedCluster,
    operator_model: tuple[Path, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings, _ = asyncio.run(_named_as_earlier_releases_did(cluster, operator_model))
    assert settings.database_url is not None and settings.migration_database_url is not None
    path, sha256 = operator_model
    for variable, value in {
        "MNEME_DATABASE_URL": settings.database_url.get_secret_value(),
        "MNEME_MIGRATION_DATABASE_URL": settings.migration_database_url.get_secret_value(),
        "MNEME_EMBEDDING_LOCAL_MODEL_PATH": str(path),
        "MNEME_EMBEDDING_LOCAL_MODEL_SHA256": sha256,
        "MNEME_EMBEDDING_PROFILE": PROFILE,
    }.items():
        monkeypatch.setenv(variable, value)
    get_settings.cache_clear()
    try:
        # In place, with the file, under the name the column records.
        assert main(["reembed"]) == 0
        assert f"with {PROFILE}\n" in capsys.readouterr().out
        # The configured file is the live column's model: there is nothing to change to.
        assert main(["reembed", "start"]) == 2
        assert "no new model to change to" in capsys.readouterr().err
    finally:
        get_settings.cache_clear()
