"""Changing the embedding model without downtime: the second vector column is filled, each
tenant switches once complete, the old column is dropped; searches compare with one model's
vectors throughout, and memories written meanwhile carry both models' vectors."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import SecretStr
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from service.auth.owner import Owner
from service.cli import main
from service.config import Settings, get_settings
from service.embedded_postgres import EmbeddedCluster
from service.memories import reembed
from service.memories.owner_index_names import OWNER_INDEX_PREFIX, owner_index_name
from service.memories.owner_indexes import OwnerIndexes
from service.memories.vector_columns import VectorColumns
from service.observability import DOMAIN_METRICS
from service.providers import build_embedder, second_embedder_config
from tests.conftest import bearer, new_tenant
from tests.fixtures.factories import remember_all
from tests.fixtures.openai_server import API_KEY, EMBEDDING_MODEL, FakeOpenAIServer
from tests.memories.large_owners import BUILD_FROM, TABLE_GRAPHS_SQL, USER, large_owner
from tests.memories.model_change import (
    NEW_DIMS,
    ServerVectors,
    assert_cosines_of,
    assert_one_model,
    own_database,
    owner_engine_for,
    running_app,
    search_memories,
    second_model,
)
from tests.memories.test_bounded_search import owners_found

SETTLE = 0.5
TEXTS = [
    "Lena lives in Lisbon and cycles to work",
    "Lena's sister Ana is a nurse in Porto",
    "Lena is allergic to peanuts",
    "The team meets every Tuesday at ten",
    "Lena prefers tea over coffee",
    "Lena adopted a grey cat called Miso",
]


async def _column_models(owner: AsyncEngine, tenant: str) -> list[tuple[str | None, str | None]]:
    async with owner.connect() as connection:
        rows = await connection.execute(
            text(
                "SELECT embedding_model, embedding_alt_model FROM memory "
                "WHERE tenant_id = :t ORDER BY text"
            ),
            {"t": tenant},
        )
        return [(row[0], row[1]) for row in rows]


async def test_a_change_of_model_switches_each_tenant_whole_and_drops_the_old_column(
    cluster: EmbeddedCluster, embeddings_server: FakeOpenAIServer
) -> None:
    settings: Settings = await own_database(cluster, embeddings_server.base_url)
    async with running_app(settings) as (app, client), owner_engine_for(settings) as owner:
        columns: VectorColumns = app.state.mneme.vector_columns
        old = columns.configured
        second = second_embedder_config(settings)
        assert second is not None
        new = build_embedder(second)
        embedders = {old.model_name: old, new.model_name: new}
        early, late = new_tenant(), new_tenant()
        early_user, late_user = bearer(settings, early, "lena"), bearer(settings, late, "lena")
        await remember_all(client, early_user, *({"text": t} for t in TEXTS))
        await remember_all(client, late_user, *({"text": t} for t in TEXTS))

        assert await reembed.start(owner, old, new) == "embedding_alt"
        await columns.refresh(app.state.mneme.engine)
        # Still the old model everywhere until a tenant switches.
        query = "Where does Lena live?"
        assert await assert_one_model(
            await search_memories(client, early_user, query, limit=4), query, embedders
        ) == (old.model_name)
        # A memory written now carries both models' vectors.
        await remember_all(client, early_user, {"text": "Lena runs a marathon in May"})
        assert (old.model_name, new.model_name) in await _column_models(owner, early)

        # With the new model's server down, a write still succeeds, without the new vector;
        # the process's backfill tries once (no retries here) and leaves it to `run`.
        backfill = app.state.mneme.embedding_backfill
        delays, backfill.retry_delays = backfill.retry_delays, ()
        embeddings_server.mode = "fail"
        try:
            await remember_all(client, late_user, {"text": "Lena sings in a choir"})
            await app.state.mneme.background.drain()
        finally:
            embeddings_server.mode = "summarize"
            backfill.retry_delays = delays
        assert (old.model_name, None) in await _column_models(owner, late)

        current = await reembed.run(owner, new, batch_size=4, settle_seconds=SETTLE)
        assert (current.memories_missing, current.tenants_switched, current.tenants) == (0, 2, 2)
        assert current.filled
        assert (old.model_name, None) not in await _column_models(owner, late)
        # The table keeps no graph of its own on the new column either: these owners are
        # small, and their vectors are sorted exactly.
        assert await _table_graphs(owner) == []
        await columns.refresh(app.state.mneme.engine)
        # The new column's progress, as every service process publishes it.
        embedded = DOMAIN_METRICS.registry.get_sample_value(
            "mneme_reembed_memories", {"model": new.model_name, "state": "embedded"}
        )
        # The memory written meanwhile had its new vector already; the one written while the
        # new model's server was down had not.
        assert embedded == len(TEXTS) * 2 + 1
        for headers in (early_user, late_user):
            answered = await search_memories(client, headers, query, limit=4)
            assert await assert_one_model(answered, query, embedders) == new.model_name
        # The context block embeds its question for the tenant's column too.
        block = await client.post("/v1/users/me/context", headers=early_user, json={"query": query})
        assert block.status_code == 200, block.text
        [facts] = [s for s in block.json()["sections"] if s["name"] == "facts"]
        await assert_cosines_of(facts["items"], query, new)

        # A changed text gets both models' vectors again (the old ones would be stale).
        memory_id = answered["hits"][0]["memory"]["id"]
        changed = await client.patch(
            f"/v1/users/me/memories/{memory_id}",
            headers=late_user,
            json={"text": "Lena moved to Madrid last spring"},
        )
        assert changed.status_code == 200, changed.text
        # Both columns have the new text's vectors; the tenant reads the new model's.
        assert changed.json()["embedding_model"] == new.model_name
        assert (old.model_name, new.model_name) in await _column_models(owner, late)

        assert await reembed.finish(owner, new, settle_seconds=SETTLE) == "embedding_alt"
        await columns.refresh(app.state.mneme.engine)
        assert columns.live().name == "embedding_alt"
        assert (
            DOMAIN_METRICS.registry.get_sample_value(
                "mneme_reembed_memories", {"model": new.model_name, "state": "embedded"}
            )
            is None
        )
        async with owner.connect() as connection:
            state = (
                await connection.execute(text("SELECT name, model, status FROM embedding_column"))
            ).all()
            leftovers = (
                await connection.execute(
                    text("SELECT count(*) FROM memory WHERE embedding IS NOT NULL")
                )
            ).scalar_one()
            typmod = (
                await connection.execute(
                    text(
                        "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'memory'::regclass "
                        "AND attname = 'embedding' AND NOT attisdropped"
                    )
                )
            ).scalar_one()
        assert [tuple(row) for row in state] == [("embedding_alt", new.model_name, "live")]
        assert (leftovers, typmod) == (0, -1)

        # After the change: searches and writes use the new model alone.
        await remember_all(client, late_user, {"text": "Lena learns the cello"})
        assert set(await _column_models(owner, late)) == {(None, new.model_name)}
        moved = "Which city did Lena move to?"
        found = await search_memories(client, late_user, moved, limit=4)
        assert await assert_one_model(found, moved, embedders) == new.model_name
        assert found["hits"][0]["memory"]["text"] == "Lena moved to Madrid last spring"
        listed = await client.get("/v1/users/me/memories", headers=late_user)
        assert {item["embedding_model"] for item in listed.json()["items"]} == {new.model_name}


async def test_a_memory_names_the_model_its_searches_compare_before_and_after_the_switch(
    cluster: EmbeddedCluster, embeddings_server: FakeOpenAIServer
) -> None:
    settings = await own_database(cluster, embeddings_server.base_url)
    second = second_embedder_config(settings)
    assert second is not None
    new = build_embedder(second)
    tenant = new_tenant()
    headers = bearer(settings, tenant, "lena")
    said = "Lena runs a marathon in May"
    async with running_app(settings) as (app, client), owner_engine_for(settings) as owner:
        columns: VectorColumns = app.state.mneme.vector_columns
        old = columns.configured
        await remember_all(client, headers, *({"text": t} for t in TEXTS))
        await reembed.start(owner, old, new)
        await columns.refresh(app.state.mneme.engine)

        async def shown(model: str) -> None:
            """The memory names `model` wherever it is shown, as its search hit does."""
            fetched = await client.get(f"/v1/users/me/memories/{created['id']}", headers=headers)
            assert fetched.json()["embedding_model"] == model
            listed = await client.get("/v1/users/me/memories", headers=headers)
            assert {item["embedding_model"] for item in listed.json()["items"]} == {model}
            [hit] = (await search_memories(client, headers, said, limit=1))["hits"]
            assert (hit["memory"]["id"], hit["memory"]["embedding_model"]) == (created["id"], model)
            assert hit["scores"]["vector_cosine"] is not None

        # Written with both models' vectors while the tenant still reads the old column: it
        # names the old model, which its searches compare, wherever it is shown.
        answered = await client.post("/v1/users/me/memories", headers=headers, json={"text": said})
        assert answered.status_code == 201, answered.text
        created = answered.json()
        stored = await _column_models(owner, tenant)
        assert sorted(stored, key=str) == sorted(
            [(old.model_name, new.model_name), *[(old.model_name, None)] * len(TEXTS)], key=str
        )
        assert created["embedding_model"] == old.model_name
        await shown(old.model_name)
        # One state, one tag: the answer's, a read's and the one a write is checked against.
        fetched = await client.get(f"/v1/users/me/memories/{created['id']}", headers=headers)
        assert fetched.headers["etag"] == answered.headers["etag"]

        await reembed.run(owner, new, batch_size=4, settle_seconds=SETTLE)
        await columns.refresh(app.state.mneme.engine)
        await shown(new.model_name)
    await new.aclose()


def _fused(response: dict[str, Any]) -> list[tuple[str, float]]:
    """The hits in their order, each with its fused score (to six places)."""
    return [
        (hit["memory"]["id"], round(hit["scores"]["fused_score"], 6)) for hit in response["hits"]
    ]


async def test_a_search_fuses_with_the_weight_of_the_model_it_compares_on_every_replica(
    cluster: EmbeddedCluster, embeddings_server: FakeOpenAIServer
) -> None:
    settings = await own_database(cluster, embeddings_server.base_url)
    # The new model's profile weighs BM25 otherwise than the packaged MiniLM's (0.5).
    weight = 0.8
    during = settings.model_copy(
        update={
            "embedding_second": {
                **second_model(embeddings_server.base_url),
                "lexical_weight": weight,
            }
        }
    )
    # A replica restarted for the last step: the new model configured, no second one.
    after = settings.model_copy(
        update={
            "embedding_second": None,
            "embedding_provider": "openai",
            "embedding_openai_base_url": embeddings_server.base_url,
            "embedding_openai_api_key": SecretStr(API_KEY),
            "embedding_openai_model": EMBEDDING_MODEL,
            "embedding_openai_max_retries": 0,
            "embedding_dims": NEW_DIMS,
            "embedding_lexical_weight": weight,
        }
    )
    tenant = new_tenant()
    headers = bearer(settings, tenant, "lena")
    query = "Where does Lena live?"
    second = second_embedder_config(during)
    assert second is not None
    new = build_embedder(second)
    async with running_app(during) as (app, client), owner_engine_for(settings) as owner:
        columns: VectorColumns = app.state.mneme.vector_columns
        await remember_all(client, headers, *({"text": t} for t in TEXTS))
        await reembed.start(owner, columns.configured, new)
        await columns.refresh(app.state.mneme.engine)
        await reembed.run(owner, new, batch_size=4, settle_seconds=SETTLE)
        await columns.refresh(app.state.mneme.engine)
        assert columns.read_by(tenant).model == new.model_name

        def asking(lexical_weight: float) -> dict[str, Any]:
            return {"query": query, "limit": 4, "linear_lexical_weight": lexical_weight}

        path = "/v1/users/me/memories/search"
        named = (await client.post(path, headers=headers, json=asking(weight))).json()
        minilms = (await client.post(path, headers=headers, json=asking(0.5))).json()
        # The tenant's searches compare the new model's vectors, and take its weight, though
        # the process is configured with MiniLM ...
        unnamed = await search_memories(client, headers, query, limit=4)
        assert all(hit["scores"]["vector_cosine"] is not None for hit in unnamed["hits"])
        assert _fused(unnamed) == _fused(named)
        assert _fused(unnamed) != _fused(minilms)
        # ... as a replica configured with the new model does: both rank the search alike.
        async with running_app(after) as (_, replica):
            answered = await search_memories(replica, headers, query, limit=4)
        assert _fused(answered) == _fused(unnamed)
    await new.aclose()


async def test_starting_a_change_to_the_live_model_is_refused(
    cluster: EmbeddedCluster, embeddings_server: FakeOpenAIServer
) -> None:
    settings = await own_database(cluster, embeddings_server.base_url)
    async with running_app(settings) as (app, _client), owner_engine_for(settings) as owner:
        columns: VectorColumns = app.state.mneme.vector_columns
        with pytest.raises(reembed.ReembedRefused, match="already holds"):
            await reembed.start(owner, columns.configured, columns.configured)
        with pytest.raises(reembed.ReembedRefused, match="no change of model"):
            await reembed.finish(owner, None, settle_seconds=0)
        assert (await reembed.status(owner)).filling_column is None


def test_the_command_walks_a_change_through_start_status_and_finish(
    cluster: EmbeddedCluster,
    embeddings_server: FakeOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = asyncio.run(own_database(cluster, embeddings_server.base_url))
    assert settings.database_url is not None and settings.migration_database_url is not None
    monkeypatch.setenv("MNEME_DATABASE_URL", settings.database_url.get_secret_value())
    monkeypatch.setenv(
        "MNEME_MIGRATION_DATABASE_URL", settings.migration_database_url.get_secret_value()
    )
    monkeypatch.setenv(
        "MNEME_EMBEDDING_SECOND", json.dumps(second_model(embeddings_server.base_url))
    )
    monkeypatch.setenv("MNEME_EMBEDDING_COLUMNS_REFRESH_SECONDS", "0.1")
    get_settings.cache_clear()
    try:
        assert main(["reembed", "status"]) == 0
        assert "no change of model under way" in capsys.readouterr().out
        for _ in range(2):  # starting what is under way changes nothing
            assert main(["reembed", "start"]) == 0
            assert "embedding_alt is being filled for fake-embedding-model" in (
                capsys.readouterr().out
            )
        assert main(["reembed", "status"]) == 0
        assert "tenants: 0 of 0 read the new column" in capsys.readouterr().out
        # Filling the live column in place goes on meanwhile.
        assert main(["reembed"]) == 0
        capsys.readouterr()
        assert main(["reembed", "finish"]) == 0
        assert "memory.embedding_alt is the live vector column" in capsys.readouterr().out
        # In place, the configured model may not overwrite the live column's model's vectors.
        assert main(["reembed"]) == 2
        assert "holds fake-embedding-model's vectors" in capsys.readouterr().err
        # The configured model is now the other one: the change back goes into the emptied
        # first column, with its own cast.
        assert main(["reembed", "start"]) == 0
        assert "memory.embedding is being filled for all-MiniLM" in capsys.readouterr().out
        assert main(["reembed", "run"]) == 0
        assert "fill: reached its end" in capsys.readouterr().out
        assert main(["reembed", "finish"]) == 0
        assert "memory.embedding is the live vector column" in capsys.readouterr().out
        assert main(["reembed", "status"]) == 0
        assert "live column: embedding (all-MiniLM" in capsys.readouterr().out
    finally:
        get_settings.cache_clear()


async def _table_graphs(owner: AsyncEngine) -> list[str]:
    async with owner.connect() as connection:
        return list((await connection.execute(text(TABLE_GRAPHS_SQL))).scalars())


async def _index_valid(owner: AsyncEngine, name: str) -> bool | None:
    async with owner.connect() as connection:
        valid: bool | None = (
            await connection.execute(
                text(
                    "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                    "WHERE c.relname = :name"
                ),
                {"name": name},
            )
        ).scalar_one_or_none()
        return valid


async def test_an_index_build_left_invalid_is_built_again_and_an_interrupted_finish_resumes(
    cluster: EmbeddedCluster, embeddings_server: FakeOpenAIServer
) -> None:
    settings = await own_database(cluster, embeddings_server.base_url)
    async with running_app(settings) as (app, client), owner_engine_for(settings) as owner:
        old = app.state.mneme.vector_columns.configured
        new = ServerVectors(EMBEDDING_MODEL)
        tenant = new_tenant()
        await remember_all(client, bearer(settings, tenant, "lena"), *({"text": t} for t in TEXTS))
        await reembed.start(owner, old, new)
        # A concurrent build that failed (as a killed one does) leaves an invalid index behind,
        # which `CREATE INDEX … IF NOT EXISTS` alone would keep: here the index of the new
        # column's memories without a vector, which `finish` builds before the column goes
        # live. (This one fails on something else: its memories share a scope.)
        unembedded = "ix_memory_embedding_alt_unembedded"
        async with owner.connect() as connection:
            autocommit = await connection.execution_options(isolation_level="AUTOCOMMIT")
            with pytest.raises(DBAPIError):
                await autocommit.execute(
                    text(f"CREATE UNIQUE INDEX CONCURRENTLY {unembedded} ON memory (scope)")
                )
        assert await _index_valid(owner, unembedded) is False

        current = await reembed.run(owner, new, batch_size=4, settle_seconds=SETTLE)
        assert (current.memories_missing, current.filled) == (0, True)

        # The live column changed, but the process stopped before dropping the old one.
        async with owner.begin() as connection:
            await connection.execute(
                text(
                    "UPDATE embedding_column SET status = CASE status WHEN 'live' THEN "
                    "'retiring' ELSE 'live' END, changed_at = now()"
                )
            )
            await connection.execute(text("DELETE FROM embedding_column_tenant"))
        assert (await reembed.status(owner)).retiring_column == "embedding"
        assert await reembed.finish(owner, None, settle_seconds=SETTLE) == "embedding_alt"
        status = await reembed.status(owner)
        assert (status.live_column, status.retiring_column) == ("embedding_alt", None)
        # The interrupted finish built the invalid index again, as its definition says.
        assert await _index_valid(owner, unembedded) is True
        async with owner.connect() as connection:
            definition = (
                await connection.execute(
                    text("SELECT pg_get_indexdef(CAST(:name AS regclass))"), {"name": unembedded}
                )
            ).scalar_one()
        assert "WHERE (embedding_alt IS NULL)" in definition, definition


async def _valid_owner_indexes(owner: AsyncEngine) -> set[str]:
    async with owner.connect() as connection:
        names = await connection.execute(
            text(
                "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "WHERE i.indrelid = 'memory'::regclass AND i.indisvalid "
                "AND starts_with(c.relname, :prefix)"
            ),
            {"prefix": OWNER_INDEX_PREFIX},
        )
        return set(names.scalars())


async def test_a_large_owners_graphs_are_on_the_new_column_when_its_tenant_switches(
    cluster: EmbeddedCluster, embeddings_server: FakeOpenAIServer
) -> None:
    settings: Settings = await own_database(cluster, embeddings_server.base_url)
    async with running_app(settings) as (app, client), owner_engine_for(settings) as owner:
        tenant = new_tenant()
        await large_owner(app, client, settings, tenant)
        user = Owner.user(USER).key
        indexes = OwnerIndexes(owner, build_from=BUILD_FROM, most=100)
        await indexes.refresh()
        on_old = {owner_index_name(tenant, user, "embedding", k) for k in ("semantic", "episodic")}
        on_new = {
            owner_index_name(tenant, user, "embedding_alt", k) for k in ("semantic", "episodic")
        }
        assert on_old <= await _valid_owner_indexes(owner)
        columns: VectorColumns = app.state.mneme.vector_columns
        second = second_embedder_config(settings)
        assert second is not None
        new = build_embedder(second)
        await reembed.start(owner, columns.configured, new)
        await columns.refresh(app.state.mneme.engine)

        # While the new column is filled it has no index, and no owner gets one on it; the
        # old column's stay.
        report = await indexes.refresh()
        assert (report.built, report.dropped) == ([], [])
        assert on_old <= await _valid_owner_indexes(owner)

        current = await reembed.run(
            owner, new, batch_size=64, settle_seconds=SETTLE, owner_indexes=indexes
        )
        assert current.tenants_switched == current.tenants
        assert on_old | on_new <= await _valid_owner_indexes(owner)
        # The switched tenant's search finds the owner's graphs on the column it reads.
        await columns.refresh(app.state.mneme.engine)
        read = columns.read_by(tenant)
        assert read.name == "embedding_alt"
        found = await owners_found(app, tenant, (Owner.user(USER), Owner.org()), read)
        assert {f"semantic:{user}", f"episodic:{user}"} <= found.own_indexes
        # A refresh during the change keeps both columns' graphs.
        report = await indexes.refresh()
        assert report.dropped == [] and report.built == []
        assert report.columns == ["embedding", "embedding_alt"]

        await reembed.finish(owner, new, settle_seconds=SETTLE)
        valid = await _valid_owner_indexes(owner)
        assert on_new <= valid and not on_old & valid  # gone with the old column
        report = await indexes.refresh()
        assert report.dropped == [] and report.built == []
