"""A service process that runs without the new model during a change (its settings lack
`MNEME_EMBEDDING_SECOND`): what its writes store, what a user of a switched tenant finds
meanwhile, and what fills them — `reembed run` (as `--follow` repeats it) before the finish,
`mneme reembed` in place after it."""

from __future__ import annotations

import uuid
from typing import Any

from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.embedded_postgres import EmbeddedCluster
from service.memories import reembed
from service.memories.vector_columns import VectorColumns
from tests.conftest import bearer, new_tenant
from tests.fixtures.factories import remember_all
from tests.fixtures.openai_server import EMBEDDING_MODEL, FakeOpenAIServer
from tests.memories.model_change import (
    ServerVectors,
    own_database,
    owner_engine_for,
    running_app,
)

SETTLE = 0.5
TEXTS = [
    "Lena lives in Lisbon and cycles to work",
    "Lena is allergic to peanuts",
    "Lena prefers tea over coffee",
]
LATE = "Lena sings in a choir on Thursdays"
AFTER = "Lena collects old maps of harbours"


async def _models_of(owner: AsyncEngine, memory_text: str) -> tuple[str | None, str | None]:
    async with owner.connect() as connection:
        row = (
            await connection.execute(
                text("SELECT embedding_model, embedding_alt_model FROM memory WHERE text = :t"),
                {"t": memory_text},
            )
        ).one()
        return row[0], row[1]


async def _id_of(owner: AsyncEngine, memory_text: str) -> uuid.UUID:
    async with owner.connect() as connection:
        memory_id: uuid.UUID = (
            await connection.execute(
                text("SELECT id FROM memory WHERE text = :t"), {"t": memory_text}
            )
        ).scalar_one()
        return memory_id


async def _cosine_of(
    client: AsyncClient, headers: dict[str, str], query: str, memory_text: str
) -> float | None:
    """The vector cosine the search gave the memory: None when it was found by its words only."""
    response = await client.post(
        "/v1/users/me/memories/search", headers=headers, json={"query": query, "limit": 10}
    )
    assert response.status_code == 200, response.text
    hits: list[dict[str, Any]] = response.json()["hits"]
    [hit] = [hit for hit in hits if hit["memory"]["text"] == memory_text]
    cosine: float | None = hit["scores"]["vector_cosine"]
    return cosine


async def test_memories_written_without_the_new_model_wait_for_the_command(
    cluster: EmbeddedCluster, embeddings_server: FakeOpenAIServer
) -> None:
    settings = await own_database(cluster, embeddings_server.base_url)
    lagging = settings.model_copy(update={"embedding_second": None})
    async with (
        running_app(settings) as (app, client),
        running_app(lagging) as (lagging_app, lagging_client),
        owner_engine_for(settings) as owner,
    ):
        columns: VectorColumns = app.state.mneme.vector_columns
        old = columns.configured
        new = ServerVectors(EMBEDDING_MODEL)
        tenant = new_tenant()
        lena = bearer(settings, tenant, "lena")
        await remember_all(client, lena, *({"text": t} for t in TEXTS))
        await reembed.start(owner, old, new)
        await reembed.run(owner, new, batch_size=4, settle_seconds=SETTLE)
        for each in (app, lagging_app):
            await each.state.mneme.vector_columns.refresh(each.state.mneme.engine)

        # The tenant has switched; a process without the new model stores the old one's only.
        await remember_all(lagging_client, lena, {"text": LATE})
        assert await _models_of(owner, LATE) == (old.model_name, None)
        assert (await reembed.status(owner)).memories_missing == 1
        # Meanwhile the tenant's searches find it by its words, not by its meaning.
        assert await _cosine_of(client, lena, "choir Thursdays", LATE) is None
        # The backfill of the process that wrote it does not: it cannot embed for the column.
        await lagging_app.state.mneme.embedding_backfill.embed_missing(
            tenant, [await _id_of(owner, LATE)]
        )
        assert await _models_of(owner, LATE) == (old.model_name, None)

        # What `run --follow` repeats every second (and `finish` does first) fills it.
        current = await reembed.run(owner, new, batch_size=4, settle_seconds=SETTLE)
        assert current.memories_missing == 0
        assert await _models_of(owner, LATE) == (old.model_name, new.model_name)
        assert await _cosine_of(client, lena, "choir Thursdays", LATE) is not None

        await reembed.finish(owner, new, settle_seconds=SETTLE)
        for each in (app, lagging_app):
            await each.state.mneme.vector_columns.refresh(each.state.mneme.engine)
        # After the finish, such a process stores no vector at all (no column holds its
        # model's), and `mneme reembed` fills the live column in place.
        await remember_all(lagging_client, lena, {"text": AFTER})
        assert await _models_of(owner, AFTER) == (None, None)
        assert await _cosine_of(client, lena, "old maps harbours", AFTER) is None
        report = await reembed.reembed(owner, new)
        assert report.embedded == 1
        assert await _models_of(owner, AFTER) == (None, new.model_name)
        assert await _cosine_of(client, lena, "old maps harbours", AFTER) is not None
