"""pgvector's scan settings are the service's, on every connection it opens, and a user who owns
most of the memories still gets the exact nearest neighbours from the filtered HNSW path; and no
connection of the service compiles its plans with JIT."""

from __future__ import annotations

from sqlalchemy import text

from service.config import Settings
from service.db import create_engine, create_sessionmaker, tenant_transaction
from tests.conftest import new_tenant


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
