"""A database that holds the first releases' default model's vectors keeps being searched and
written with that model after the upgrade, with no setting, and moves to the packaged default
(the same file with int8 products) through a change of model."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from typing import Any

import pytest
from pydantic import SecretStr
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service import db_migrations
from service.cli import main
from service.config import Settings, get_settings
from service.db import create_engine
from service.embedded_postgres import OWNER_ROLE, SUPERUSER, EmbeddedCluster, bootstrap
from service.memories import dependencies as memory_dependencies
from service.memories import reembed
from service.memories.embedding import TextVectors, embed_ahead
from service.memories.vector_columns import (
    RECORD_LIVE_MODEL_SQL,
    LiveModelUnknown,
    VectorColumns,
)
from service.providers import Embedder, EmbedderConfig, build_embedder, build_packaged_embedder
from service.providers.profiles import MINILM, MINILM_INT8_PRODUCTS
from tests.conftest import bearer, make_settings, new_tenant
from tests.fixtures.factories import remember_all
from tests.fixtures.locks import waiting_locks
from tests.memories.model_change import (
    REFRESH_SECONDS,
    assert_one_model,
    owner_engine_for,
    running_app,
    search_memories,
)

# The last revision before the live column records its model.
BEFORE_RECORDING = "20261203_0800"
SETTLE = 0.5
TEXTS = [
    "Lena lives in Lisbon and cycles to work",
    "Lena's sister Ana is a nurse in Porto",
    "Lena prefers tea over coffee",
]


async def _database(cluster: EmbeddedCluster, **overrides: Any) -> Settings:
    name = "mneme_packaged_" + uuid.uuid4().hex[:8]
    await bootstrap(cluster, name)
    return make_settings(
        cluster,
        database_url=SecretStr(cluster.url("mneme_app", name)),
        migration_database_url=SecretStr(cluster.url(OWNER_ROLE, name)),
        embedding_columns_refresh_seconds=REFRESH_SECONDS,
        **overrides,
    )


async def _migrate(settings: Settings, revision: str = "head") -> None:
    assert settings.migration_database_url is not None
    owner_url = settings.migration_database_url.get_secret_value()
    engine = create_engine(owner_url, settings, pool_size=1, max_overflow=0)
    try:
        await db_migrations.upgrade(engine, settings, revision)
    finally:
        await engine.dispose()


async def _written_before_recording(settings: Settings, *texts: str) -> str:
    """`texts` written by the user "lena" of a new tenant (returned) with the settings' model,
    into a database then left as the first releases left it: migrated up to the revision before
    the recording, the live column's model unrecorded. The memories are written by this
    release's service (on the schema it needs), and the schema taken back after."""
    await _migrate(settings)
    tenant = new_tenant()
    async with running_app(settings) as (_, client):
        headers = bearer(settings, tenant, "lena")
        written = await remember_all(client, headers, *({"text": t} for t in texts))
    assert {memory["embedding_model"] for memory in written} == {settings.embedding_profile}
    async with owner_engine_for(settings) as engine:
        await db_migrations.downgrade(engine, settings, BEFORE_RECORDING)
        async with engine.begin() as connection:
            await connection.execute(
                text("UPDATE embedding_column SET model = NULL WHERE status = 'live'")
            )
    return tenant


async def _live_column(owner: AsyncEngine) -> tuple[str, str | None]:
    async with owner.connect() as connection:
        row = (
            await connection.execute(
                text("SELECT name, model FROM embedding_column WHERE status = 'live'")
            )
        ).one()
    return row[0], row[1]


async def _first_releases_database(cluster: EmbeddedCluster) -> tuple[Settings, str]:
    """A database as the first releases left it: migrated up to the revision before the
    recording, `TEXTS` written by the user "lena" of a new tenant (returned) with their default
    model; the settings returned are the new release's defaults (which migrate at start)."""
    first_releases = await _database(cluster, migrate_on_start=False, embedding_profile=MINILM.name)
    tenant = await _written_before_recording(first_releases, *TEXTS)
    defaults = {"migrate_on_start": True, "embedding_profile": None}
    return first_releases.model_copy(update=defaults), tenant


async def test_an_upgraded_database_keeps_its_model_until_it_changes_to_the_default(
    cluster: EmbeddedCluster,
) -> None:
    upgraded, tenant = await _first_releases_database(cluster)
    headers = bearer(upgraded, tenant, "lena")
    first: Embedder = build_embedder(EmbedderConfig(profile=MINILM.name))
    default: Embedder = build_embedder(EmbedderConfig())
    embedders = {MINILM.name: first, MINILM_INT8_PRODUCTS.name: default}
    assert default.model_name == MINILM_INT8_PRODUCTS.name
    try:
        async with running_app(upgraded) as (app, client), owner_engine_for(upgraded) as owner:
            # The upgrade recorded whose vectors the live column holds ...
            assert await _live_column(owner) == ("embedding", MINILM.name)
            # ... so the service, configured with the new default, runs the first releases'
            # model for it: writes name it, questions compare with the stored vectors.
            (added,) = await remember_all(client, headers, {"text": "Lena learns the cello"})
            assert added["embedding_model"] == MINILM.name
            query = "Where does Lena live?"
            found = await search_memories(client, headers, query, limit=3)
            assert await assert_one_model(found, query, embedders) == MINILM.name
            assert found["hits"][0]["memory"]["text"] == TEXTS[0]

            # The change of model needs no second setting: the new default is configured.
            columns: VectorColumns = app.state.mneme.vector_columns
            assert await reembed.live_model(owner, default) == MINILM.name
            assert await reembed.start(owner, first, default) == "embedding_alt"
            await reembed.run(owner, default, batch_size=2, settle_seconds=SETTLE)
            assert await reembed.finish(owner, default, settle_seconds=SETTLE) == "embedding_alt"
            await columns.refresh(app.state.mneme.engine)
            assert await _live_column(owner) == ("embedding_alt", MINILM_INT8_PRODUCTS.name)
            found = await search_memories(client, headers, query, limit=3)
            assert await assert_one_model(found, query, embedders) == MINILM_INT8_PRODUCTS.name
            assert found["hits"][0]["memory"]["text"] == TEXTS[0]
            (later,) = await remember_all(client, headers, {"text": "Lena visits Ana in May"})
            assert later["embedding_model"] == MINILM_INT8_PRODUCTS.name
    finally:
        await first.aclose()
        await default.aclose()


async def test_the_upgrade_records_the_model_even_for_an_owner_held_to_row_level_security(
    cluster: EmbeddedCluster,
) -> None:
    settings = await _database(cluster, migrate_on_start=False, embedding_profile=MINILM.name)
    await _written_before_recording(settings, TEXTS[0])
    superuser = create_engine(cluster.url(SUPERUSER, "postgres"), settings, pool_size=1)
    try:
        # A table owner without BYPASSRLS sees no tenant's rows (FORCE ROW LEVEL SECURITY).
        async with superuser.begin() as connection:
            await connection.execute(text(f'ALTER ROLE "{OWNER_ROLE}" NOBYPASSRLS'))
        try:
            await _migrate(settings)
        finally:
            async with superuser.begin() as connection:
                await connection.execute(text(f'ALTER ROLE "{OWNER_ROLE}" BYPASSRLS'))
    finally:
        await superuser.dispose()
    async with owner_engine_for(settings) as owner:
        assert await _live_column(owner) == ("embedding", MINILM.name)
        async with owner.connect() as connection:
            forced = (
                await connection.execute(
                    text("SELECT relforcerowsecurity FROM pg_class WHERE relname = 'memory'")
                )
            ).scalar_one()
        # The policy was lifted for the read alone.
        assert forced is True


async def test_the_first_process_records_its_model_and_one_configured_otherwise_serves_it(
    cluster: EmbeddedCluster,
) -> None:
    settings = await _database(cluster)
    await _migrate(settings)
    async with owner_engine_for(settings) as owner:
        assert await _live_column(owner) == ("embedding", None)
    tenant = new_tenant()
    headers = bearer(settings, tenant, "lena")
    async with running_app(settings) as (_, client):
        (first,) = await remember_all(client, headers, {"text": TEXTS[0]})
    assert first["embedding_model"] == MINILM_INT8_PRODUCTS.name
    async with owner_engine_for(settings) as owner:
        assert await _live_column(owner) == ("embedding", MINILM_INT8_PRODUCTS.name)
        assert (await reembed.status(owner)).lines()[0] == (
            f"live column: embedding ({MINILM_INT8_PRODUCTS.name})"
        )

    # A process configured with the other packaged model (as the first step of a change has
    # it) writes and searches the column with the model the database records for it.
    float32 = settings.model_copy(update={"embedding_profile": MINILM.name})
    async with running_app(float32) as (_, client):
        (second,) = await remember_all(client, headers, {"text": TEXTS[1]})
        assert second["embedding_model"] == MINILM_INT8_PRODUCTS.name
        for said in TEXTS[:2]:
            [hit] = (await search_memories(client, headers, said, limit=1))["hits"]
            assert hit["memory"]["text"] == said
            assert hit["memory"]["embedding_model"] == MINILM_INT8_PRODUCTS.name
            # The question and the stored text are one text embedded by one model.
            assert hit["scores"]["vector_cosine"] == pytest.approx(1.0, abs=1e-4)
    async with owner_engine_for(settings) as owner, owner.connect() as connection:
        models = await connection.execute(
            text("SELECT DISTINCT embedding_model FROM memory WHERE tenant_id = :t"), {"t": tenant}
        )
        assert models.scalars().all() == [MINILM_INT8_PRODUCTS.name]


async def test_a_schema_that_cannot_record_the_model_refuses_the_start(
    cluster: EmbeddedCluster,
) -> None:
    settings = await _database(cluster, migrate_on_start=False)
    await _migrate(settings)
    async with owner_engine_for(settings) as owner, owner.begin() as connection:
        await connection.execute(text("DROP FUNCTION mneme_record_live_embedding_model(text)"))
    # Served regardless, it could write and compare another model's vectors in the column.
    with pytest.raises(LiveModelUnknown, match="mneme migrate"):
        async with running_app(settings):
            pass


async def test_processes_starting_together_on_a_new_database_serve_one_model(
    cluster: EmbeddedCluster,
) -> None:
    settings = await _database(cluster)
    await _migrate(settings)
    assert settings.database_url is not None
    runtime = create_engine(settings.database_url.get_secret_value(), settings, pool_size=2)

    def packaged(model: str) -> Embedder | None:
        return build_packaged_embedder(model, EmbedderConfig())

    default = VectorColumns(build_embedder(EmbedderConfig()), (), packaged)
    float32 = VectorColumns(build_embedder(EmbedderConfig(profile=MINILM.name)), (), packaged)
    try:
        async with owner_engine_for(settings) as owner, runtime.connect() as first:
            # The first start's recording, its transaction still open ...
            await first.execute(RECORD_LIVE_MODEL_SQL, {"model": MINILM_INT8_PRODUCTS.name})
            # ... holds the other start's back until it ends; that one then takes its model.
            other = asyncio.ensure_future(float32.record_live_model(runtime))
            assert await waiting_locks(owner) >= 1
            await first.commit()
            await other
        await default.record_live_model(runtime)
        for columns in (default, float32):
            assert columns.live().model == MINILM_INT8_PRODUCTS.name
            storage = columns.storage_embedder()
            assert storage.model_name == MINILM_INT8_PRODUCTS.name
            assert columns.holding(MINILM.name) is None
    finally:
        await runtime.dispose()
        for columns in (default, float32):
            await columns.configured.aclose()
            await columns.aclose()


async def _first_served_by_default(cluster: EmbeddedCluster) -> tuple[Settings, str]:
    """A new database first served by the packaged default, which recorded its model there and
    wrote `TEXTS[0]` for the user "lena" of a new tenant (returned)."""
    settings = await _database(cluster)
    await _migrate(settings)
    tenant = new_tenant()
    async with running_app(settings) as (_, client):
        await remember_all(client, bearer(settings, tenant, "lena"), {"text": TEXTS[0]})
    return settings, tenant


async def _vector_models(owner: AsyncEngine, memory_id: str) -> tuple[str | None, str | None]:
    async with owner.connect() as connection:
        row = (
            await connection.execute(
                text("SELECT embedding_model, embedding_alt_model FROM memory WHERE id = :id"),
                {"id": memory_id},
            )
        ).one()
    return row[0], row[1]


async def test_a_memory_embedded_before_a_change_starts_and_written_after_gets_both_vectors(
    cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings, tenant = await _first_served_by_default(cluster)
    headers = bearer(settings, tenant, "lena")
    # The first step of a change to the float32 run: the processes run it as configured.
    float32 = settings.model_copy(update={"embedding_profile": MINILM.name})
    embedded, release = asyncio.Event(), asyncio.Event()

    async def embedded_then_held(embedder: Embedder, texts: Iterable[str]) -> TextVectors:
        vectors = await embed_ahead(embedder, texts)
        embedded.set()
        await release.wait()
        return vectors

    monkeypatch.setattr(memory_dependencies, "embed_ahead", embedded_then_held)
    async with running_app(float32) as (app, client), owner_engine_for(settings) as owner:
        columns: VectorColumns = app.state.mneme.vector_columns
        writing = asyncio.ensure_future(remember_all(client, headers, {"text": TEXTS[1]}))
        # Its vectors are made as the columns stood before the change ...
        await embedded.wait()
        assert await reembed.start(owner, columns.configured, columns.configured) == (
            "embedding_alt"
        )
        await columns.refresh(app.state.mneme.engine)
        # ... and written once the process knows of it.
        release.set()
        (memory,) = await writing
        await app.state.mneme.background.drain()
        # The live column keeps its model's vector, and the process that wrote the memory
        # made the new column's too: nothing is left for `run`, nor lost to the search.
        assert await _vector_models(owner, memory["id"]) == (
            MINILM_INT8_PRODUCTS.name,
            MINILM.name,
        )
        [hit] = (await search_memories(client, headers, TEXTS[1], limit=1))["hits"]
        assert hit["memory"]["id"] == memory["id"]
        assert hit["scores"]["vector_cosine"] == pytest.approx(1.0, abs=1e-4)


def test_the_commands_move_an_upgraded_database_with_no_second_model(
    cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    settings, _ = asyncio.run(_first_releases_database(cluster))
    assert settings.database_url is not None and settings.migration_database_url is not None
    monkeypatch.setenv("MNEME_DATABASE_URL", settings.database_url.get_secret_value())
    monkeypatch.setenv(
        "MNEME_MIGRATION_DATABASE_URL", settings.migration_database_url.get_secret_value()
    )
    monkeypatch.setenv("MNEME_EMBEDDING_COLUMNS_REFRESH_SECONDS", "0.1")
    get_settings.cache_clear()
    try:
        asyncio.run(_migrate(settings))
        # In place, the live column is filled with the model it holds, not the configured one.
        assert main(["reembed"]) == 0
        assert f"with {MINILM.name}\n" in capsys.readouterr().out
        assert main(["reembed", "start"]) == 0
        assert f"being filled for {MINILM_INT8_PRODUCTS.name}" in capsys.readouterr().out
        assert main(["reembed", "run"]) == 0
        assert main(["reembed", "finish"]) == 0
        capsys.readouterr()
        assert main(["reembed", "status"]) == 0
        assert f"live column: embedding_alt ({MINILM_INT8_PRODUCTS.name}" in (
            capsys.readouterr().out
        )
    finally:
        get_settings.cache_clear()
