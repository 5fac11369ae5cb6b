"""Which vector column each tenant reads, and which model's vectors each column holds.

`memory` has two vector columns, `embedding` and `embedding_alt`. One is live: searches read
it and writes fill it. Changing the embedding model fills the other one in the background
(`mneme reembed start` / `run`, `service.memories.reembed`) while searches keep reading the
live one; a tenant switches to the new column once every memory of its carries a vector there,
and when every tenant has switched the new column becomes the live one and the old one is
emptied. Searches therefore compare a question with vectors of one model only, at every moment.

The state lives in two small global tables (`embedding_column`, `embedding_column_tenant`),
which the service reads whole every few seconds (`VectorColumns.keep_fresh`): a request never
waits for it. The command that changes the state waits for longer than that refresh before it
relies on a change (a switch, the drop of the old column), so a process that has not seen the
change yet still reads a complete column of one model.

The database, never a process's settings, says which model each column holds: the first
process to serve a database records its configured model for the live column
(`VectorColumns.record_live_model`), and a change records the new column's model when it
starts. A process configured with another model serves the column with the recorded one, or
not at all: it never stores its own vectors there, nor compares its questions with them.

Every vector the service makes is a `ModelVector`, which carries the name of its model: it is
stored in the column of that model and compared with that column only. A column that holds a
packaged model's vectors (`service.providers.profiles.PACKAGED_PROFILES`) is served by that
model whatever the settings name: the service runs it itself, so a database that holds the
first releases' default model's vectors keeps being searched with it until it changes models.

While a column is being filled, a write embeds its text for that column's model too
(`StorageEmbedder`), so memories written during the change need no second pass.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from service.db import MIGRATE_FIRST, NO_STATEMENT_LIMIT_SQL
from service.memories.telemetry import MEMORY_METRICS
from service.providers import (
    Embedder,
    EmbedderUnavailable,
    FormerlyNamed,
    computes_in_process,
    former_model_names,
    lexical_weight_of,
    load_model,
)
from service.refused_start import StartRefused

logger = logging.getLogger("mneme.vector_columns")

COLUMN_NAMES = ("embedding", "embedding_alt")
"""The two vector columns of `memory`, each with its model's name in `<column>_model`."""

VECTOR_VALUES = frozenset(value for name in COLUMN_NAMES for value in (name, f"{name}_model"))
"""The `memory` fields the vector columns are: a change's history records none of them."""

ColumnStatus = Literal["live", "filling", "retiring"]


class VectorSizeMismatch(ValueError):
    """A vector of another size than its model's column takes; the message says both."""


class ModelVector(list[float]):
    """A vector with the name of the model that made it (`Embedder.model_name`), and the same
    text's vectors by the models of columns being filled (`others`)."""

    __slots__ = ("model", "others")

    def __init__(
        self, values: Sequence[float], model: str, others: Sequence[ModelVector] = ()
    ) -> None:
        super().__init__(values)
        self.model = model
        self.others = tuple(others)


@dataclass(frozen=True, slots=True)
class VectorColumn:
    """A vector column as a statement reads it: its name, its model and, for a column whose
    type has no dimension, the dimension its index casts to."""

    name: str
    model: str
    dims: int | None = None

    @property
    def model_column(self) -> str:
        return f"{self.name}_model"

    def expression(self, alias: str | None = None) -> str:
        """The column (of `alias`, if given) as its index is built: cast to its dimension, when
        its type has none (a cast to the type's own dimension would be a no-op anyway)."""
        column = self.name if alias is None else f"{alias}.{self.name}"
        return column if self.dims is None else f"({column}::vector({self.dims}))"


@dataclass(frozen=True, slots=True)
class ColumnState:
    """One row of `embedding_column`."""

    name: str
    model: str | None
    dims: int | None
    status: ColumnStatus
    memories_total: int = 0
    memories_embedded: int = 0
    filled: bool = False
    """Whether a change of model's fill of it reached its end once (its largest owners' graphs
    are built on it from then on)."""


@dataclass(frozen=True, slots=True)
class ColumnsState:
    """Every column in use and the tenants that already read a column being filled."""

    columns: tuple[ColumnState, ...] = (ColumnState("embedding", None, None, "live"),)
    switched: Mapping[str, str] = field(default_factory=dict)

    def column(self, status: ColumnStatus) -> ColumnState | None:
        return next((c for c in self.columns if c.status == status), None)


LOAD_COLUMNS_SQL = text(
    "SELECT name, model, dims, status, memories_total, memories_embedded, filled "
    "FROM embedding_column ORDER BY name"
)
LOAD_SWITCHED_SQL = text("SELECT tenant_id, column_name FROM embedding_column_tenant")
RECORD_LIVE_MODEL_SQL = text("SELECT mneme_record_live_embedding_model(:model)")
"""Record `:model` for the live column if it records none yet (the model of a vector it holds
first, if it holds any), as the owner role (a SECURITY DEFINER function: the runtime role
may read the columns' state, not write it); the model the live column holds."""

UNDEFINED_FUNCTION = "42883"


class LiveModelUnknown(StartRefused):
    """The database cannot say which model its live vector column holds (a schema older than
    the service's): serving it could compare and store another model's vectors there."""


async def load_state(engine: AsyncEngine) -> ColumnsState:
    """The columns' state as the database holds it now."""
    async with engine.connect() as connection:
        # Read at start-up (and in the background since): not a request's statement, which a
        # busy database must not cancel at the requests' limit.
        await connection.exec_driver_sql(NO_STATEMENT_LIMIT_SQL)
        columns = (await connection.execute(LOAD_COLUMNS_SQL)).all()
        switched: dict[str, str] = {}
        if any(row.status == "filling" for row in columns):
            rows = await connection.execute(LOAD_SWITCHED_SQL)
            switched = {row.tenant_id: row.column_name for row in rows}
    return ColumnsState(
        tuple(
            ColumnState(
                row.name,
                row.model,
                row.dims,
                row.status,
                row.memories_total,
                row.memories_embedded,
                row.filled,
            )
            for row in columns
        ),
        switched,
    )


class VectorColumns:
    """The service's view of the vector columns (refreshed every few seconds) and the
    embedders it has, by model: which column a tenant reads, with which embedder, and where a
    vector of a given model is stored."""

    def __init__(
        self,
        configured: Embedder,
        others: Sequence[Embedder] = (),
        packaged: Callable[[str], Embedder | None] | None = None,
    ) -> None:
        """`packaged` builds the embedder of a packaged model by its vectors' name (None for
        another name), for a column that holds a model the settings do not name."""
        self._embedders: dict[str, Embedder] = {}
        for embedder in others:
            self._add(embedder)
        self.configured = configured
        self.configure(configured)
        self.state = ColumnsState()
        self._packaged = packaged
        self._built: list[Embedder] = []
        self._warned: set[str] = set()
        self._warned_size: set[str] = set()

    def configure(self, embedder: Embedder) -> None:
        """Make `embedder` the configured model's (`MNEME_EMBEDDING_*`)."""
        self.configured = embedder
        self._add(embedder)

    def _add(self, embedder: Embedder) -> None:
        """Run `embedder` for the columns that hold its vectors: under its name, and under a
        name earlier releases gave them (`FormerlyNamed`), which a column may still record."""
        self._embedders[embedder.model_name] = embedder
        for former in former_model_names(embedder):
            self._embedders[former] = FormerlyNamed(embedder, former)

    def runs(self, embedder: Embedder) -> bool:
        """Whether a column holds `embedder`'s vectors, under its name or a former one."""
        names = (embedder.model_name, *former_model_names(embedder))
        return any(self.holding(name) is not None for name in names)

    def _model(self, column: ColumnState) -> str:
        # Only a live column no service process has served yet records no model (the service
        # records one before it reads the state, `record_live_model`): a command reading it
        # takes it for its configured model's, as the first process to serve it will record.
        return column.model or self.configured.model_name

    def _vector_column(self, column: ColumnState) -> VectorColumn:
        return VectorColumn(column.name, self._model(column), column.dims)

    def live(self) -> VectorColumn:
        """The live column: what a tenant that has not switched reads, and where writes go."""
        live = self.state.column("live")
        if live is None:
            return VectorColumn("embedding", self.configured.model_name)
        return self._vector_column(live)

    def read_by(self, tenant_id: str) -> VectorColumn:
        """The column `tenant_id`'s searches read."""
        switched = self.state.switched.get(tenant_id)
        if switched is not None:
            for column in self.state.columns:
                if column.name == switched and column.status == "filling":
                    return self._vector_column(column)
        return self.live()

    def holding(self, model: str) -> VectorColumn | None:
        """The column that stores vectors of `model` (None: no column does, so such a
        vector is not stored, and not compared with anything)."""
        for column in self.state.columns:
            if column.status != "retiring" and self._model(column) == model:
                return self._vector_column(column)
        return None

    def column_for(self, vector: Sequence[float], tenant_id: str) -> VectorColumn | None:
        """The column `vector` compares with: the one holding its model's vectors (None: no
        column does), or for a vector that names no model, the column `tenant_id` reads."""
        if isinstance(vector, ModelVector):
            return self.holding(vector.model)
        return self.read_by(tenant_id)

    def embedder_for(self, column: VectorColumn) -> Embedder | None:
        """The embedder of the column's model, if the service runs it at the column's size.
        One configured at another size is not used (and said once): its vectors would be
        refused, and its questions would compare with none of the column's vectors."""
        # A packaged model a column needs was built when `refresh` read that column.
        embedder = self._embedders.get(column.model)
        if embedder is None or column.dims is None or embedder.dims == column.dims:
            return embedder
        if column.name not in self._warned_size:
            self._warned_size.add(column.name)
            logger.error(
                "the service runs %s at %d dimensions, but memory.%s holds its vectors at %d; "
                "it does not use that model for the column until its settings say dims %d "
                "(MNEME_EMBEDDING_* or MNEME_EMBEDDING_SECOND)",
                column.model,
                embedder.dims,
                column.name,
                column.dims,
                column.dims,
            )
        return None

    def lexical_weight(self, column: VectorColumn) -> float | None:
        """The fusion weight of BM25 the profile of `column`'s model carries, as this process
        runs that model (None: the profile carries none, or the process does not run it)."""
        embedder = self._embedders.get(column.model)
        return None if embedder is None else lexical_weight_of(embedder)

    def kept(self) -> list[tuple[VectorColumn, Embedder]]:
        """The columns this process stores vectors in, each with its model's embedder: the
        live one and one being filled, when the process runs their models at their sizes."""
        kept: list[tuple[VectorColumn, Embedder]] = []
        for column in self.state.columns:
            if column.status == "retiring":
                continue
            vector_column = self._vector_column(column)
            embedder = self.embedder_for(vector_column)
            if embedder is not None:
                kept.append((vector_column, embedder))
        return kept

    def _build_packaged(self, model: str) -> Embedder | None:
        """The packaged model named `model`, built the first time a column needs it (None: no
        packaged model is named so)."""
        embedder = None if self._packaged is None else self._packaged(model)
        if embedder is not None:
            self._embedders[model] = embedder
            self._built.append(embedder)
        return embedder

    def question_embedder(self, tenant_id: str) -> Embedder | None:
        """The embedder `tenant_id`'s questions are embedded with: its column's model's
        (None: the service does not run that model, and the tenant's searches go lexical)."""
        column = self.read_by(tenant_id)
        embedder = self.embedder_for(column)
        if embedder is None and column.model not in self._warned:
            # Once per model and process: every search of such a tenant would repeat it.
            self._warned.add(column.model)
            logger.warning(
                "the service runs no embedder for %s, the model of a vector column tenants "
                "read; their searches go lexical until it is configured (MNEME_EMBEDDING_SECOND)",
                column.model,
            )
        return embedder

    def storage_embedder(self) -> StorageEmbedder:
        """The embedder writes store vectors with: the live column's model, and the model of
        a column being filled when the service runs it."""
        live = self.live()
        embedder = self.embedder_for(live)
        if embedder is None:
            embedder = self.configured
        filling = self.state.column("filling")
        extra = None if filling is None else self.embedder_for(self._vector_column(filling))
        return StorageEmbedder(embedder, () if extra is None else (extra,))

    def stored_values(
        self, vector: Sequence[float] | None, *, clear_others: bool = True
    ) -> dict[str, Any]:
        """A write's values for the vector columns: each of `vector`'s models in its own
        column; with `clear_others`, NULL in a column it has no vector for (a new or changed
        text: another text's vector there would be stale)."""
        values: dict[str, Any] = {}
        if clear_others:
            for name in COLUMN_NAMES:
                values[name] = None
                values[f"{name}_model"] = None
        if vector is None:
            return values
        tagged = (
            vector
            if isinstance(vector, ModelVector)
            else ModelVector(vector, self.configured.model_name)
        )
        for each in (tagged, *tagged.others):
            column = self.holding(each.model)
            if column is None:
                continue
            if column.dims is not None and len(each) != column.dims:
                # The database would refuse it and fail the write: the memory is stored
                # without it, for `mneme reembed` (in place, or `run` for a column being
                # filled) to embed.
                logger.error(
                    "a %d-dimensional vector of %s was not stored: memory.%s takes %d",
                    len(each),
                    each.model,
                    column.name,
                    column.dims,
                )
                continue
            values[column.name] = list(each)
            values[column.model_column] = each.model
        return values

    def placed(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """A memory row from elsewhere (an import) with each vector in the column that holds
        its model here; a vector of a model no column holds is left out (the memory is found by
        its words until `mneme reembed` embeds it), so no search compares it with another
        model's. A vector of the column's model but of another size raises
        `VectorSizeMismatch`."""
        placed = {key: value for key, value in row.items() if key not in VECTOR_VALUES}
        for name in COLUMN_NAMES:
            placed[name] = None
            placed[f"{name}_model"] = None
        for name in COLUMN_NAMES:
            vector, model = row.get(name), row.get(f"{name}_model")
            column = None if vector is None or model is None else self.holding(str(model))
            if column is not None:
                size = _size(vector)
                if column.dims is not None and size is not None and size != column.dims:
                    raise VectorSizeMismatch(
                        f"{name} is a {size}-dimensional vector of {model}, whose column here "
                        f"({column.name}) takes {column.dims} dimensions"
                    )
                placed[column.name] = vector
                placed[column.model_column] = model
        return placed

    async def record_live_model(self, engine: AsyncEngine) -> None:
        """Read the columns' state (`refresh`) once the database records the live column's
        model: the configured one, if no process has served the database yet (nor stored a
        vector in it). Said in the log when the configured model is none of the columns'.
        Raises `LiveModelUnknown` on a schema that cannot record it."""
        try:
            async with engine.begin() as connection:
                await connection.exec_driver_sql(NO_STATEMENT_LIMIT_SQL)
                await connection.execute(
                    RECORD_LIVE_MODEL_SQL, {"model": self.configured.model_name}
                )
        except DBAPIError as error:
            if getattr(error.orig, "sqlstate", None) != UNDEFINED_FUNCTION:
                raise
            raise LiveModelUnknown(
                "the database's schema cannot say which embedding model its vectors are of "
                f"(it is older than this release's): {MIGRATE_FIRST}"
            ) from None
        await self.refresh(engine)
        if not self.runs(self.configured):
            live = self.live()
            serves = self.embedder_for(live) is not None
            logger.warning(
                "memory.%s holds the vectors of %s, as the database records, not those of the "
                "configured model %s: %s",
                live.name,
                live.model,
                self.configured.model_name,
                f"the service embeds for that column with {live.model}"
                if serves
                else "its tenants' searches go lexical and new memories get no vector until "
                f"{live.model} is configured",
            )

    async def refresh(self, engine: AsyncEngine) -> None:
        """Read the columns' state again (and publish a fill's progress as metrics); a
        packaged model a column now needs is loaded before this returns."""
        self.state = await load_state(engine)
        publish_progress(self.state, self._model)
        for column in self.state.columns:
            if column.status != "retiring" and self._model(column) not in self._embedders:
                built = self._build_packaged(self._model(column))
                if built is None:
                    continue
                try:
                    await load_model(built)
                except EmbedderUnavailable as exc:
                    # Its first text tries again; until then the column's tenants search by
                    # their words.
                    logger.error(
                        "could not load %s for memory.%s: %s", built.model_name, column.name, exc
                    )

    async def aclose(self) -> None:
        """Close the packaged models built for columns (the others' owners close them)."""
        for embedder in self._built:
            await embedder.aclose()

    async def keep_fresh(self, engine: AsyncEngine, interval: float) -> None:
        """Refresh every `interval` seconds until cancelled; a failed read keeps the last
        state (the database may be briefly unreachable) and tries again."""
        while True:
            await asyncio.sleep(interval)
            try:
                await self.refresh(engine)
            except Exception:
                logger.warning("could not read the vector columns' state", exc_info=True)


def _size(vector: Any) -> int | None:
    """The number of dimensions of a vector as an export writes it (`[0.1,0.2]`) or a list
    (None for anything else: the database refuses that as it stands)."""
    if isinstance(vector, str):
        body = vector.strip().removeprefix("[").removesuffix("]").strip()
        return 0 if not body else body.count(",") + 1
    return len(vector) if isinstance(vector, list) else None


class StorageEmbedder:
    """An `Embedder` for writes: the live column's model's vectors (`ModelVector`), each
    carrying the same text's vectors by the models of the columns being filled.

    A failure of a column being filled never fails the write: its vectors are left out, and
    `mneme reembed run` fills them."""

    def __init__(self, live: Embedder, filling: Sequence[Embedder] = ()) -> None:
        self.live = live
        self.filling = tuple(filling)
        self.model_name = live.model_name
        self.dims = live.dims
        self.computes_in_process = all(map(computes_in_process, (live, *self.filling)))

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = await self.live.embed(texts)
        others: list[list[ModelVector]] = [[] for _ in texts]
        for embedder in self.filling:
            try:
                extra = await embedder.embed(texts)
            except EmbedderUnavailable:
                logger.warning(
                    "the embedder of the column being filled (%s) is unavailable; "
                    "`mneme reembed run` fills these %d memories",
                    embedder.model_name,
                    len(texts),
                )
                continue
            for index, vector in enumerate(extra):
                others[index].append(ModelVector(vector, embedder.model_name))
        return [
            ModelVector(vector, self.model_name, others[index])
            for index, vector in enumerate(vectors)
        ]

    async def embed_query(self, query: str) -> list[float]:
        return ModelVector(await self.live.embed_query(query), self.model_name)

    async def aclose(self) -> None:
        """Nothing of its own to close: the embedders it uses are the service's."""


def publish_progress(state: ColumnsState, model_of: Callable[[ColumnState], str]) -> None:
    """`mneme_reembed_memories{model,state}` and `mneme_reembed_tenants_switched{model}` for
    the column being filled, as its state row says; withdrawn when none is."""
    filling = state.column("filling")
    if filling is None:
        MEMORY_METRICS.withdraw_reembed_progress()
        return
    MEMORY_METRICS.publish_reembed_progress(
        model_of(filling), filling.memories_embedded, filling.memories_total, len(state.switched)
    )
