"""pgvector's scan settings are the service's, on every connection it opens, and a user who owns
most of the memories still gets the exact nearest neighbours from the filtered HNSW path; and no
connection of the service compiles its plans with JIT."""

from __future__ import annotations

import numpy as np
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.auth.owner import Owner
from service.config import Settings
from service.db import create_engine, create_sessionmaker, tenant_transaction
from service.memories.filters import MemoryFilter
from service.memories.fusion import FusionRepository
from tests.conftest import new_tenant
from tests.search_params import search_params


async def test_every_connection_carries_the_configured_vector_scan_settings(
    settings: Settings,
) -> None:
    assert settings.database_url is not None
    configured = settings.model_copy(
        update={
            "hnsw_iterative_scan": "relaxed_order",
            "hnsw_max_scan_tuples": 1234,
            "hnsw_ef_search": 77,
        }
    )
    engine = create_engine(settings.database_url.get_secret_value(), configured, pool_size=1)
    try:
        async with engine.connect() as connection:
            # The hnsw.* settings are pgvector's once its library is loaded in the session.
            await connection.execute(text("SELECT '[1]'::vector <=> '[1]'::vector"))
            shown = [
                (await connection.execute(text(f"SHOW {name}"))).scalar_one()
                for name in ("hnsw.iterative_scan", "hnsw.max_scan_tuples", "hnsw.ef_search")
            ]
    finally:
        await engine.dispose()
    assert shown == ["relaxed_order", "1234", "77"]


async def test_a_single_server_transaction_keeps_the_connections_candidate_list(
    settings: Settings,
) -> None:
    """Only where the server distributes queries does a BEGIN carry the settings (with the owners'
    graphs' candidate list) for its workers; on one server a transaction runs with the
    connection's own, and a search sets the owners' list for its statement alone."""
    assert settings.database_url is not None
    configured = settings.model_copy(
        update={"hnsw_ef_search": 77, "owner_vector_index_ef_search": 234}
    )
    engine = create_engine(settings.database_url.get_secret_value(), configured, pool_size=1)
    try:
        async with tenant_transaction(create_sessionmaker(engine), new_tenant()) as session:
            await session.execute(text("SELECT '[1]'::vector <=> '[1]'::vector"))
            shown = (await session.execute(text("SHOW hnsw.ef_search"))).scalar_one()
    finally:
        await engine.dispose()
    assert shown == "77"


async def test_no_connection_of_the_service_compiles_its_statements_with_jit(
    settings: Settings,
) -> None:
    """The server's default is on (where its build has JIT); a search of a large owner planned
    for its values is estimated past `jit_above_cost` and would compile on every execution."""
    assert settings.database_url is not None
    engine = create_engine(settings.database_url.get_secret_value(), settings, pool_size=1)
    try:
        async with engine.connect() as connection:
            shown = (await connection.execute(text("SHOW jit"))).scalar_one()
            default = (
                await connection.execute(
                    text("SELECT boot_val FROM pg_settings WHERE name = 'jit'")
                )
            ).scalar_one()
    finally:
        await engine.dispose()
    assert (default, shown) == ("on", "off")


async def test_a_user_owning_most_memories_gets_the_exact_nearest_from_the_hnsw_path(
    app: FastAPI, runtime_engine: AsyncEngine
) -> None:
    """With the service's scan settings, the filtered HNSW path (what the planner takes for an
    owner with a large share of the table) returns the exact scan's top 10 on a corpus small
    enough to check."""
    embedder = app.state.mneme.embedding_backfill.embedder
    tenant = new_tenant()
    rng = np.random.default_rng(11)
    topics = ["travel", "food", "work", "music", "sport", "family", "health", "money"]
    texts = [
        f"{rng.choice(topics)} note {i}: " + " ".join(rng.choice(topics, 6)) for i in range(240)
    ]
    vectors = await embedder.embed(texts)
    sessionmaker = create_sessionmaker(runtime_engine)
    async with tenant_transaction(sessionmaker, tenant) as session:
        await session.execute(text("INSERT INTO tenant (id) VALUES (:t)"), {"t": tenant})
        for owner in ("heavy", "light"):
            await session.execute(
                text("INSERT INTO user_account (tenant_id, id) VALUES (:t, :u)"),
                {"t": tenant, "u": owner},
            )
        for index, (memory_text, vector) in enumerate(zip(texts, vectors, strict=True)):
            await session.execute(
                text(
                    "INSERT INTO memory (tenant_id, scope, user_id, kind, text, embedding) "
                    "VALUES (:t, 'user', :u, 'semantic', :text, CAST(:v AS vector))"
                ),
                {
                    "t": tenant,
                    "u": "light" if index % 6 == 0 else "heavy",
                    "text": memory_text,
                    "v": str(vector),
                },
            )
    query = await embedder.embed_query("music and sport")
    params = search_params(
        MemoryFilter.build([Owner.user("heavy"), Owner.org()]),
        "music and sport",
        query_embedding=query,
        use_lexical=False,
        use_vector=True,
        pool=10,
        neighbour_weight=0.0,
        thread_weight=0.0,
        speaker_weight=0.0,
        date_weight=0.0,
    )
    async with tenant_transaction(sessionmaker, tenant) as session:
        # Only the HNSW index yields rows in distance order without a sort.
        await session.execute(text("SET LOCAL enable_sort = off"))
        await session.execute(text("SET LOCAL enable_seqscan = off"))
        via_index = await FusionRepository(session, tenant).search(params)
        plan = "\n".join(
            (
                await session.execute(
                    text(
                        "EXPLAIN SELECT id FROM memory WHERE tenant_id = :t AND ("
                        "(scope = 'user' AND user_id = 'heavy') OR scope = 'org') "
                        "ORDER BY embedding <=> CAST(:v AS vector) LIMIT 10"
                    ),
                    {"t": tenant, "v": str(query)},
                )
            ).scalars()
        )
    async with tenant_transaction(sessionmaker, tenant) as session:
        exact = (
            (
                await session.execute(
                    text(
                        "SELECT id FROM memory WHERE user_id = 'heavy' "
                        "ORDER BY (embedding <=> CAST(:v AS vector)) + 0, id LIMIT 10"
                    ),
                    {"v": str(query)},
                )
            )
            .scalars()
            .all()
        )
    assert "ix_memory_embedding_hnsw" in plan
    assert len(exact) == 10
    assert [row.memory.id for row in via_index] == list(exact)
