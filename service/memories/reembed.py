"""Re-embedding: fill the live vector column, or change the embedding model without downtime.

`reembed` fills the live column where a vector is missing (the embedder was down when the memory
was written) or carries another model's (an import): those rows are not found by vector in the
meantime either way, so filling them in place mixes nothing.

Changing the model goes through the other vector column (`service.memories.vector_columns`):

1. `start` claims the free column for the new model (its name and dimension), and has the
   database refuse a vector of another size in it from then on (a CHECK constraint: the column
   has no dimension of its own, and a wrong-sized vector would fail its index build).
2. `run` embeds every memory into it in (tenant, id) order, one committed batch at a time, so a
   run that is killed resumes where it stopped: finished rows no longer match. Then it marks
   the column filled and, when given the owners' indexes to keep, builds the largest owners'
   own graphs on it (`service.memories.owner_indexes`: expression indexes over the cast to the
   new dimension, built concurrently), and switches each tenant whose memories all carry the
   new vector, one tenant per transaction that checks it. The table has no graph of its own on
   either column: every other owner's vectors are sorted exactly. Searches of a tenant read the old
   column until that switch, the new one after it. With `follow` it keeps going (memories
   written meanwhile whose new vector a service process could not make) until the change
   finishes.
3. `finish` makes the new column the live one once every tenant has switched (first building
   on it the partial index of the memories that lack a vector, which the embedding backfill
   reads), waits until every service process has seen it, and drops the old column's vectors
   (the column is emptied by dropping and adding it again, which is instant, and so are its
   indexes).

Nothing here relies on a trigger (Citus refuses them on distributed tables); the DDL is plain
`ALTER TABLE` (a named CHECK added NOT VALID, then validated) and `CREATE INDEX CONCURRENTLY`,
which Citus propagates to every shard. Every step runs as the owner role, which must be
allowed to bypass row-level security (it reads every tenant's memories). A step waits
`settle_seconds` (longer than the service's refresh of the state) before relying on a change it
made being seen.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from service.memories.index_builds import create_index_concurrently, sees_all_tenants
from service.memories.owner_indexes import OwnerIndexes
from service.memories.vector_columns import COLUMN_NAMES, load_state
from service.providers import Embedder

logger = logging.getLogger("mneme.reembed")

COLUMN_TYPE_DIMS_SQL = text(
    "SELECT atttypmod FROM pg_attribute "
    "WHERE attrelid = 'memory'::regclass AND attname = :column AND NOT attisdropped"
)
"""The dimension of a vector column's type (-1: the type has none)."""

# The statements below name a vector column: one of `COLUMN_NAMES`, never input.


def _missing_filter(column: str) -> str:
    return f"({column} IS NULL OR {column}_model IS DISTINCT FROM :model)"


def _count_missing_sql(column: str) -> str:
    return f"SELECT count(*) FROM memory WHERE {_missing_filter(column)}"  # noqa: S608


def _next_batch_sql(column: str) -> str:
    """The next rows that lack the model's vector, in (tenant, id) order after the given key."""
    return f"""
    SELECT tenant_id, id, text FROM memory
     WHERE {_missing_filter(column)} AND (tenant_id, id) > (:after_tenant, CAST(:after_id AS uuid))
     ORDER BY tenant_id, id
     LIMIT :batch_size
    """  # noqa: S608


def _store_sql(column: str) -> str:
    """Store a vector unless the text changed since it was read: the vector would be stale
    (the write that changed the text stored its own, or cleared the column for the next pass)."""
    return f"""
    UPDATE memory SET {column} = CAST(:vector AS vector), {column}_model = :model
     WHERE tenant_id = :tenant_id AND id = :id AND text = :text
    """  # noqa: S608


class ReembedRefused(RuntimeError):
    """The step cannot be done as things stand (role, models, state); the message says why."""


@dataclass
class ReembedReport:
    total: int
    embedded: int


@dataclass
class ChangeStatus:
    """Where a change of the embedding model stands."""

    live_column: str
    live_model: str | None
    """The model the database records for the live column; else, before any service process
    has served it, the model most of its vectors came from (None: it holds none)."""
    filling_column: str | None
    filling_model: str | None
    memories_total: int
    memories_embedded: int
    memories_missing: int
    filled: bool
    # Tenants with memories, and those of them that read the new column.
    tenants: int
    tenants_switched: int
    retiring_column: str | None
    live_model_recorded: bool = True

    def lines(self) -> list[str]:
        """The status as the command prints it."""
        if self.live_model is None:
            model = "no model yet: the first service process to start records its own"
        elif not self.live_model_recorded:
            model = f"{self.live_model}, as its vectors say: the first service process records it"
        else:
            model = self.live_model
        live = f"live column: {self.live_column} ({model})"
        if self.filling_column is None:
            lines = [live, "no change of model under way"]
        else:
            lines = [
                live,
                f"filling: {self.filling_column} with {self.filling_model}",
                f"memories: {self.memories_embedded} embedded this change, "
                f"{self.memories_missing} still missing the new vector",
                f"fill: {'reached its end' if self.filled else 'under way'}",
                f"tenants: {self.tenants_switched} of {self.tenants} read the new column",
            ]
        if self.retiring_column is not None:
            lines.append(f"retiring: {self.retiring_column} (`mneme reembed finish` drops it)")
        return lines


async def _require_owner(connection: AsyncConnection) -> None:
    if not await sees_all_tenants(connection):
        raise ReembedRefused(
            "the migration role cannot bypass row-level security, so it cannot see every "
            "tenant's memories; grant it BYPASSRLS or use a superuser URL for this command"
        )


async def _type_dims(connection: AsyncConnection, column: str) -> int:
    return int((await connection.execute(COLUMN_TYPE_DIMS_SQL, {"column": column})).scalar_one())


async def _embed_missing(
    owner_engine: AsyncEngine,
    embedder: Embedder,
    column: str,
    *,
    batch_size: int,
    on_progress: Callable[[int], None] | None,
    count_progress: bool,
) -> int:
    """Embed every memory whose `column` lacks `embedder`'s vector; returns how many."""
    embedded = 0
    after: tuple[str, str] = ("", "00000000-0000-0000-0000-000000000000")
    while True:
        async with owner_engine.connect() as connection:
            rows = (
                await connection.execute(
                    text(_next_batch_sql(column)),
                    {
                        "model": embedder.model_name,
                        "after_tenant": after[0],
                        "after_id": after[1],
                        "batch_size": batch_size,
                    },
                )
            ).all()
        if not rows:
            return embedded
        vectors = await embedder.embed([row.text for row in rows])
        async with owner_engine.begin() as connection:
            await connection.execute(
                text(_store_sql(column)),
                [
                    {
                        "vector": str(list(vector)),
                        "model": embedder.model_name,
                        "tenant_id": row.tenant_id,
                        "id": row.id,
                        "text": row.text,
                    }
                    for row, vector in zip(rows, vectors, strict=True)
                ],
            )
            if count_progress:
                await connection.execute(
                    text(
                        "UPDATE embedding_column SET memories_embedded = memories_embedded + :n "
                        "WHERE name = :column"
                    ),
                    {"n": len(rows), "column": column},
                )
        embedded += len(rows)
        after = (rows[-1].tenant_id, str(rows[-1].id))
        if on_progress is not None:
            on_progress(len(rows))


async def reembed(
    owner_engine: AsyncEngine,
    embedder: Embedder,
    *,
    batch_size: int = 64,
    on_progress: Callable[[int], None] | None = None,
) -> ReembedReport:
    """Fill the live column where a memory lacks `embedder`'s vector, in place (the live
    column must hold `embedder`'s model: another model goes through `start`)."""
    state = await load_state(owner_engine)
    live = state.column("live")
    column = "embedding" if live is None else live.name
    if live is not None and live.model is not None and live.model != embedder.model_name:
        # Rewriting them in place would leave searches comparing two models' vectors until
        # the last row is done.
        raise ReembedRefused(
            f"the live vector column holds {live.model}'s vectors, not {embedder.model_name}'s; "
            "configure that model, or change models with `mneme reembed start`"
        )
    async with owner_engine.connect() as connection:
        await _require_owner(connection)
        type_dims = await _type_dims(connection, column)
        dims = type_dims if type_dims > 0 else (live.dims if live is not None else None)
        if dims is not None and dims != embedder.dims:
            raise ReembedRefused(
                f"memory.{column} holds {dims}-dimensional vectors but the embedder produces "
                f"{embedder.dims}; change models with `mneme reembed start` instead"
            )
        total = (
            await connection.execute(
                text(_count_missing_sql(column)), {"model": embedder.model_name}
            )
        ).scalar_one()
    embedded = await _embed_missing(
        owner_engine,
        embedder,
        column,
        batch_size=batch_size,
        on_progress=on_progress,
        count_progress=False,
    )
    return ReembedReport(total=total, embedded=embedded)


MOST_STORED_MODEL_SQL = text(
    "SELECT embedding_model FROM memory WHERE embedding_model IS NOT NULL "
    "GROUP BY 1 ORDER BY count(*) DESC LIMIT 1"
)
"""The model most vectors of the first column came from."""


async def live_model(owner_engine: AsyncEngine, configured: Embedder) -> str:
    """The model of the live column's vectors. The column as first migrated records none (it
    holds the configured model's): its vectors say which model they came from, so a change is
    right even when the settings already name the new model as the configured one."""
    state = await load_state(owner_engine)
    live = state.column("live")
    if live is not None and live.model is not None:
        return live.model
    async with owner_engine.connect() as connection:
        stored = (await connection.execute(MOST_STORED_MODEL_SQL)).scalar_one_or_none()
    return configured.model_name if stored is None else str(stored)


async def start(
    owner_engine: AsyncEngine, configured: Embedder, new: Embedder, *, lock_timeout_ms: int = 2000
) -> str:
    """Claim the free vector column for `new`'s model (its vectors' size enforced from now on),
    and record the live column's model if it had none recorded; returns the claimed column's
    name. Starting the change that is already under way changes nothing."""
    state = await load_state(owner_engine)
    if state.column("retiring") is not None:
        raise ReembedRefused(
            "the last change of model has not finished dropping its old column; run "
            "`mneme reembed finish` first"
        )
    filling = state.column("filling")
    if filling is not None:
        if filling.model == new.model_name:
            return filling.name
        raise ReembedRefused(
            f"a change to {filling.model} is under way; finish it first (`mneme reembed status`)"
        )
    current = await live_model(owner_engine, configured)
    if new.model_name == current:
        raise ReembedRefused(f"the live vector column already holds {new.model_name}'s vectors")
    used = {column.name for column in state.columns}
    free = next(name for name in COLUMN_NAMES if name not in used)
    async with owner_engine.connect() as connection:
        await _require_owner(connection)
        if await _type_dims(connection, free) > 0:
            raise ReembedRefused(f"memory.{free} has a fixed dimension; it cannot take any model")
    live = state.column("live")
    # `finish` builds it; this keeps it for a live column whose change finished without it.
    await _build_unembedded_index(owner_engine, "embedding" if live is None else live.name)
    # Before any process learns of the column (from the row inserted below) and writes to it.
    await _enforce_dims(owner_engine, free, new.dims, lock_timeout_ms)
    async with owner_engine.begin() as connection:
        missing = (
            await connection.execute(text(_count_missing_sql(free)), {"model": new.model_name})
        ).scalar_one()
        # From now on every process reads the live column's model from here, whatever it is
        # configured with.
        await connection.execute(
            text(
                "UPDATE embedding_column SET model = :model WHERE status = 'live' AND model IS NULL"
            ),
            {"model": current},
        )
        await connection.execute(
            text(
                "INSERT INTO embedding_column (name, model, dims, status, memories_total) "
                "VALUES (:name, :model, :dims, 'filling', :total)"
            ),
            {"name": free, "model": new.model_name, "dims": new.dims, "total": missing},
        )
    return free


def _unembedded_index_name(column: str) -> str:
    # The first column's keeps the name the initial migration gave it.
    return "ix_memory_unembedded" if column == "embedding" else f"ix_memory_{column}_unembedded"


async def _create_index_concurrently(owner_engine: AsyncEngine, name: str, definition: str) -> None:
    async with owner_engine.connect() as connection:
        autocommit = await connection.execution_options(isolation_level="AUTOCOMMIT")
        await create_index_concurrently(autocommit, name, definition)


async def _mark_filled(owner_engine: AsyncEngine, column: str) -> None:
    """Record that the fill of `column` reached its end (`ColumnState.filled`)."""
    async with owner_engine.begin() as connection:
        await connection.execute(
            text("UPDATE embedding_column SET filled = true WHERE name = :column"),
            {"column": column},
        )


async def _build_unembedded_index(owner_engine: AsyncEngine, column: str) -> None:
    """The partial index of the memories with no vector in `column`, which the embedding
    backfill looks them up by while `column` is live: the initial migration's, for a column
    that becomes live (dropping a column drops its own)."""
    await _create_index_concurrently(
        owner_engine, _unembedded_index_name(column), f"(tenant_id, id) WHERE {column} IS NULL"
    )


TENANTS_SQL = text("SELECT DISTINCT tenant_id FROM memory ORDER BY 1")
SWITCH_TENANT_SQL = text(
    "INSERT INTO embedding_column_tenant (tenant_id, column_name) VALUES (:tenant_id, :column) "
    "ON CONFLICT (tenant_id) DO NOTHING"
)


def _tenant_lacks_sql(column: str) -> str:
    return (
        "SELECT EXISTS (SELECT 1 FROM memory WHERE tenant_id = :tenant_id "  # noqa: S608
        f"AND {_missing_filter(column)})"
    )


async def _switch_complete_tenants(owner_engine: AsyncEngine, column: str, model: str) -> int:
    """Switch every tenant whose memories all carry the new vector, each in the transaction
    that checks it; returns how many switched now. (The memories and the switches live apart
    on Citus, distributed and on the coordinator: the check and the switch are two statements,
    never a join.) A memory written after the check carries both vectors, made by the service,
    which knows of the change since before any switch."""
    switched_already = (await load_state(owner_engine)).switched
    async with owner_engine.connect() as connection:
        tenants = [
            tenant_id
            for tenant_id in (await connection.execute(TENANTS_SQL)).scalars()
            if tenant_id not in switched_already
        ]
    lacks = text(_tenant_lacks_sql(column))
    switched = 0
    for tenant_id in tenants:
        async with owner_engine.begin() as connection:
            incomplete = (
                await connection.execute(lacks, {"tenant_id": tenant_id, "model": model})
            ).scalar_one()
            if not incomplete:
                await connection.execute(
                    SWITCH_TENANT_SQL, {"tenant_id": tenant_id, "column": column}
                )
                switched += 1
    return switched


async def status(owner_engine: AsyncEngine) -> ChangeStatus:
    """Where the change of model stands (counted now, across tenants)."""
    state = await load_state(owner_engine)
    live, filling, retiring = (state.column(s) for s in ("live", "filling", "retiring"))
    missing = 0
    tenants: list[str] = []
    async with owner_engine.connect() as connection:
        await _require_owner(connection)
        if filling is not None:
            missing = (
                await connection.execute(
                    text(_count_missing_sql(filling.name)), {"model": filling.model}
                )
            ).scalar_one()
            tenants = list((await connection.execute(TENANTS_SQL)).scalars())
        live_model = None if live is None else live.model
        if live_model is None:
            live_model = (await connection.execute(MOST_STORED_MODEL_SQL)).scalar_one_or_none()
    return ChangeStatus(
        live_column="embedding" if live is None else live.name,
        live_model=live_model,
        live_model_recorded=live is not None and live.model is not None,
        filling_column=None if filling is None else filling.name,
        filling_model=None if filling is None else filling.model,
        memories_total=0 if filling is None else filling.memories_total,
        memories_embedded=0 if filling is None else filling.memories_embedded,
        memories_missing=missing,
        filled=filling is not None and filling.filled,
        tenants=len(tenants),
        tenants_switched=sum(1 for tenant_id in tenants if tenant_id in state.switched),
        retiring_column=None if retiring is None else retiring.name,
    )


async def run(
    owner_engine: AsyncEngine,
    new: Embedder,
    *,
    batch_size: int = 64,
    settle_seconds: float,
    follow: bool = False,
    poll_seconds: float = 1.0,
    on_progress: Callable[[int], None] | None = None,
    owner_indexes: OwnerIndexes | None = None,
) -> ChangeStatus:
    """Fill the column being filled with `new`'s vectors (and, with `owner_indexes`, build the
    largest owners' graphs on it), switch each tenant whose memories are complete;
    with `follow`, keep at it until the change finishes."""
    owners_indexed = False
    while True:
        state = await load_state(owner_engine)
        filling = state.column("filling")
        if filling is None:
            if follow:
                return await status(owner_engine)
            raise ReembedRefused("no change of model is under way (`mneme reembed start`)")
        if filling.model != new.model_name or filling.dims is None:  # dims: set by `start`
            raise ReembedRefused(
                f"the column being filled is for {filling.model}, but the embedder given is "
                f"{new.model_name}'s"
            )
        if new.dims != filling.dims:
            raise ReembedRefused(
                f"the column being filled takes {filling.dims}-dimensional vectors of "
                f"{filling.model}, but the embedder given makes {new.dims}; configure the "
                f"model with dims {filling.dims}"
            )
        async with owner_engine.begin() as connection:
            await _require_owner(connection)
            missing = (
                await connection.execute(
                    text(_count_missing_sql(filling.name)), {"model": new.model_name}
                )
            ).scalar_one()
            await connection.execute(
                text(
                    "UPDATE embedding_column SET memories_total = memories_embedded + :missing "
                    "WHERE name = :column"
                ),
                {"missing": missing, "column": filling.name},
            )
        await _embed_missing(
            owner_engine,
            new,
            filling.name,
            batch_size=batch_size,
            on_progress=on_progress,
            count_progress=True,
        )
        if not filling.filled:
            await _mark_filled(owner_engine, filling.name)
        if owner_indexes is not None and not owners_indexed:
            # Before a tenant switches: its large owners' searches on the new column walk
            # graphs of their own from the switch on, as they did on the old one, instead of
            # sorting every vector of theirs until the next refresh.
            logger.info("building the largest owners' HNSW indexes on memory.%s", filling.name)
            await owner_indexes.refresh()
            owners_indexed = True
        # Every service process must know the change is under way (and so embed new memories
        # for both columns, and read the tenant's column by the state) before a tenant
        # switches.
        waited, _ = await _column_age(owner_engine, filling.name)
        if waited < settle_seconds:
            await asyncio.sleep(settle_seconds - waited)
        await _switch_complete_tenants(owner_engine, filling.name, new.model_name)
        current = await status(owner_engine)
        complete = current.memories_missing == 0 and current.tenants_switched >= current.tenants
        if complete and not follow:
            return current
        await asyncio.sleep(poll_seconds)


COLUMN_AGE_SQL = text(
    "SELECT extract(epoch FROM now() - started_at) AS since_started, "
    "extract(epoch FROM now() - changed_at) AS since_changed "
    "FROM embedding_column WHERE name = :column"
)
"""How long ago a column's change started and its state last changed, by the database's clock
(the one the service processes' refreshes are measured against)."""


async def _column_age(owner_engine: AsyncEngine, column: str) -> tuple[float, float]:
    """Seconds since `column`'s change started, and since its state last changed."""
    async with owner_engine.connect() as connection:
        row = (await connection.execute(COLUMN_AGE_SQL, {"column": column})).one()
        return float(row.since_started), float(row.since_changed)


async def finish(
    owner_engine: AsyncEngine,
    new: Embedder | None,
    *,
    batch_size: int = 64,
    settle_seconds: float,
    lock_timeout_ms: int = 2000,
) -> str:
    """Make the filled column the live one once every tenant reads it, then drop the old
    column's vectors; returns the live column's name. Resumes a finish that was interrupted."""
    state = await load_state(owner_engine)
    filling = state.column("filling")
    if filling is not None:
        if new is None or new.model_name != filling.model:
            raise ReembedRefused(
                f"finishing needs {filling.model}'s embedder (for memories written since the "
                "last pass); configure it as MNEME_EMBEDDING_* or MNEME_EMBEDDING_SECOND"
            )
        current = await run(owner_engine, new, batch_size=batch_size, settle_seconds=settle_seconds)
        if current.memories_missing or current.tenants_switched < current.tenants:
            raise ReembedRefused(
                f"{current.memories_missing} memories still lack the new vector and "
                f"{current.tenants - current.tenants_switched} tenants have not switched"
            )
        # Built while the column is all but filled (the index is small), before it is live.
        await _build_unembedded_index(owner_engine, filling.name)
        async with owner_engine.begin() as connection:
            await connection.execute(
                text(
                    "UPDATE embedding_column SET status = CASE status WHEN 'live' THEN "
                    "'retiring' ELSE 'live' END, changed_at = now() "
                    "WHERE status IN ('live', 'filling')"
                )
            )
            await connection.execute(text("DELETE FROM embedding_column_tenant"))
            if state.column("live") is None:
                # The column as first migrated has no row: it retires now.
                await connection.execute(
                    text(
                        "INSERT INTO embedding_column (name, status) "
                        "VALUES ('embedding', 'retiring')"
                    )
                )
        state = await load_state(owner_engine)
    retiring = state.column("retiring")
    live = state.column("live")
    if retiring is None:
        raise ReembedRefused("no change of model to finish (`mneme reembed status`)")
    live_name = "embedding" if live is None else live.name
    # Again for a finish interrupted before the index was built (it is kept if it is there).
    await _build_unembedded_index(owner_engine, live_name)
    # Until every service process has seen the new live column, one may still write the old.
    _, waited = await _column_age(owner_engine, retiring.name)
    if waited < settle_seconds:
        await asyncio.sleep(settle_seconds - waited)
    await _empty_column(owner_engine, retiring.name, lock_timeout_ms)
    return live_name


LOCK_NOT_AVAILABLE = "55P03"


def _sqlstate(error: DBAPIError) -> str | None:
    code = getattr(error.orig, "sqlstate", None) or getattr(error.orig, "pgcode", None)
    return None if code is None else str(code)


async def _alter_memory(
    owner_engine: AsyncEngine,
    work: Callable[[AsyncConnection], Awaitable[None]],
    what: str,
    lock_timeout_ms: int,
    attempts: int = 30,
) -> None:
    """Run `work` (an ALTER of memory, and what goes with it) in a transaction of its own.

    The ALTER waits for the transactions reading memory, and every new statement on memory
    would queue behind it: it gives up after `lock_timeout_ms` and tries again instead."""
    for attempt in range(attempts):
        try:
            async with owner_engine.begin() as connection:
                await connection.execute(text(f"SET LOCAL lock_timeout = {int(lock_timeout_ms)}"))
                await work(connection)
            return
        except DBAPIError as error:
            if _sqlstate(error) != LOCK_NOT_AVAILABLE or attempt == attempts - 1:
                raise
            logger.info("memory is busy; %s again in a moment", what)
            await asyncio.sleep(1.0)


async def _empty_column(owner_engine: AsyncEngine, column: str, lock_timeout_ms: int) -> None:
    """Drop the column (with its indexes and its size's constraint) and add it again, empty and
    without a dimension."""

    async def drop_and_add(connection: AsyncConnection) -> None:
        await connection.execute(
            text(
                f"ALTER TABLE memory DROP COLUMN {column}, DROP COLUMN {column}_model, "
                f"ADD COLUMN {column} vector, ADD COLUMN {column}_model text"
            )
        )
        await connection.execute(
            text("DELETE FROM embedding_column WHERE name = :column"), {"column": column}
        )

    await _alter_memory(owner_engine, drop_and_add, f"dropping memory.{column}", lock_timeout_ms)


def _dims_constraint_name(column: str) -> str:
    return f"ck_memory_{column}_dims"


CHECK_VIOLATION = "23514"


async def _enforce_dims(
    owner_engine: AsyncEngine, column: str, dims: int, lock_timeout_ms: int
) -> None:
    """Make the database refuse a vector of another size than `dims` in `column`: its type has
    no dimension, and only its index's cast to `dims` would refuse one — by failing the index
    build. Added NOT VALID (a brief lock, no scan), then validated (a scan that lets writes
    go on); a constraint of an earlier, abandoned start is replaced."""
    name = _dims_constraint_name(column)

    async def replace(connection: AsyncConnection) -> None:
        # Two statements: Citus takes no ADD CONSTRAINT beside another subcommand.
        await connection.execute(text(f"ALTER TABLE memory DROP CONSTRAINT IF EXISTS {name}"))
        await connection.execute(
            text(
                f"ALTER TABLE memory ADD CONSTRAINT {name} "
                f"CHECK (vector_dims({column}) = {int(dims)}) NOT VALID"
            )
        )

    await _alter_memory(owner_engine, replace, f"constraining memory.{column}", lock_timeout_ms)
    try:
        async with owner_engine.begin() as connection:
            await connection.execute(text(f"ALTER TABLE memory VALIDATE CONSTRAINT {name}"))
    except DBAPIError as error:
        if _sqlstate(error) != CHECK_VIOLATION:
            raise
        raise ReembedRefused(
            f"memory.{column} holds vectors of another size than {dims}, though no change of "
            "model uses it; empty it first"
        ) from None
