"""`mneme reembed` fills missing vectors and replaces other models' vectors, across tenants."""

from __future__ import annotations

from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.memories.reembed import reembed
from tests.conftest import as_tenant, new_tenant


async def _seed(engine: AsyncEngine, tenant: str) -> None:
    async with engine.begin() as connection:
        await as_tenant(connection, tenant)
        await connection.execute(text("INSERT INTO tenant (id) VALUES (:t)"), {"t": tenant})
        await connection.execute(
            text(
                "INSERT INTO memory (tenant_id, scope, kind, text, embedding, embedding_model) "
                "VALUES "
                "(:t, 'org', 'semantic', 'never embedded', NULL, NULL), "
                "(:t, 'org', 'semantic', 'embedded by an old model', "
                " array_fill(0.1, ARRAY[384])::vector, 'old-model')"
            ),
            {"t": tenant},
        )


async def _models(engine: AsyncEngine, tenant: str) -> list[tuple[str, str | None, bool]]:
    async with engine.begin() as connection:
        await as_tenant(connection, tenant)
        rows = (
            await connection.execute(
                text(
                    "SELECT text, embedding_model, embedding IS NOT NULL AS has_vector FROM memory "
                    "ORDER BY text"
                )
            )
        ).all()
    return [tuple(row) for row in rows]


async def test_reembed_covers_every_tenant_and_resumes_to_nothing(
    app: FastAPI, owner_engine: AsyncEngine, runtime_engine: AsyncEngine
) -> None:
    embedder = app.state.mneme.embedding_backfill.embedder
    tenants = [new_tenant(), new_tenant()]
    for tenant in tenants:
        await _seed(runtime_engine, tenant)
    progressed: list[int] = []
    report = await reembed(owner_engine, embedder, batch_size=1, on_progress=progressed.append)
    assert report.embedded >= 4 and sum(progressed) == report.embedded
    for tenant in tenants:
        assert await _models(runtime_engine, tenant) == [
            ("embedded by an old model", embedder.model_name, True),
            ("never embedded", embedder.model_name, True),
        ]
    again = await reembed(owner_engine, embedder)
    assert (again.total, again.embedded) == (0, 0)
