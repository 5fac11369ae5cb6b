"""The load benchmark's bulk path: COPY synthetic memories straight into the memory table.

The rows skip the API (no embedding, no history events, no dedupe check: the corpus has no
duplicates by construction) and are written with `COPY … FROM STDIN (FORMAT binary)` through
asyncpg. COPY into a table under row-level security is refused to roles the policy applies to,
so this path connects as the schema owner, which the embedded bootstrap gives BYPASSRLS; the
service never does that at request time.

The memory table has no vector index of its own: an owner's vectors are sorted exactly, or, for
the owners with the most memories of a kind, read from HNSW indexes of their own. A load into
the benchmark's own throwaway database is followed by what a service process with the owner
role does in the background after it: the largest owners' indexes are built
(`build_owner_graphs`). A database the benchmark was pointed at gets no index from it.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy.ext.asyncio import AsyncEngine

from benchmarks.corpus import Corpus, MemoryRow, noisy_vectors
from benchmarks.rawsql import asyncpg_connection
from service.config import Settings
from service.memories.owner_index_names import OWNER_INDEX_PREFIX
from service.memories.owner_indexes import OwnerIndexes
from service.memories.postings import COMMON_LEXEME_DOCUMENTS, INSERT_POSTINGS_SQL

MEMORY_COLUMNS = (
    "tenant_id",
    "id",
    "scope",
    "user_id",
    "kind",
    "category",
    "text",
    "embedding",
    "embedding_model",
    "confidence",
    "lifecycle",
    "needs_review",
    "event_at",
    "created_at",
    "updated_at",
)
# Users per COPY statement (one transaction each).
USERS_PER_CHUNK = 40
# Rows of one large owner per COPY statement.
OWNER_ROWS_PER_COPY = 10_000

OWNER_PRIVILEGES_SQL = "SELECT rolbypassrls OR rolsuper FROM pg_roles WHERE rolname = current_user"
"""Whether the connected role escapes row-level security (COPY needs that)."""
RELATION_SIZES_SQL = """
SELECT c.relname AS name, pg_relation_size(c.oid) AS bytes
  FROM pg_class c
 WHERE c.oid = 'memory'::regclass
    OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = 'memory'::regclass)
 ORDER BY c.relname
"""
"""The memory table and each of its indexes, in bytes."""


class BulkLoadRefused(RuntimeError):
    """The owner connection cannot bypass row-level security, so COPY would be refused."""


@dataclass
class BulkStep:
    """One growth of the corpus to `total_rows`."""

    user_memories: int
    total_rows: int
    rows_added: int
    tenants_added: int
    users_added: int
    copy_seconds: float = 0.0
    vacuum_analyze_seconds: float = 0.0
    owner_index_seconds: float = 0.0
    """How long the owners' own vector indexes took to build after the load
    (`build_owner_graphs`); 0 where none are built."""
    owner_indexes_built: int = 0
    """How many owner indexes the table has after the load: built, rebuilt or kept."""
    relation_bytes: dict[str, int] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return self.copy_seconds + self.vacuum_analyze_seconds + self.owner_index_seconds

    @property
    def owner_index_bytes(self) -> int:
        """The owners' own vector indexes, in bytes."""
        return sum(
            size
            for name, size in self.relation_bytes.items()
            if name.startswith(OWNER_INDEX_PREFIX)
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "user_memories": self.user_memories,
            "total_rows": self.total_rows,
            "rows_added": self.rows_added,
            "tenants_added": self.tenants_added,
            "users_added": self.users_added,
            "copy_seconds": self.copy_seconds,
            "copy_rows_per_second": _rate(self.rows_added, self.copy_seconds),
            "vacuum_analyze_seconds": self.vacuum_analyze_seconds,
            "owner_index_seconds": self.owner_index_seconds,
            "owner_indexes_built": self.owner_indexes_built,
            "owner_index_bytes": self.owner_index_bytes,
            "seconds": self.seconds,
            "rows_per_second_with_owner_graphs": _rate(self.rows_added, self.seconds),
            "relation_bytes": self.relation_bytes,
        }


def _rate(rows: int, seconds: float) -> float | None:
    return rows / seconds if seconds > 0 else None


def vector_payloads(vectors: npt.NDArray[np.float32]) -> list[bytes]:
    """pgvector's binary wire format (dims, unused, big-endian float4s) for each row."""
    header = struct.pack(">HH", vectors.shape[1], 0)
    big_endian = vectors.astype(">f4")
    return [header + row.tobytes() for row in big_endian]


@dataclass(frozen=True)
class BulkSettings:
    connections: int
    vector_noise: float
    embedding_model: str


WRITE_MISSING_POSTINGS_SQL = (
    """
    CREATE TEMPORARY TABLE memory_without_postings ON COMMIT DROP AS
    SELECT m.tenant_id, m.id FROM memory m
     WHERE NOT EXISTS (SELECT 1 FROM memory_posting p
                        WHERE p.tenant_id = m.tenant_id AND p.memory_id = m.id)
    """,
    "ANALYZE memory_without_postings",
    INSERT_POSTINGS_SQL  # noqa: S608 - module constants
    + " WHERE (m.tenant_id, m.id) IN (SELECT tenant_id, id FROM memory_without_postings)",
)
"""The postings of every memory that has none (`INSERT_POSTINGS_SQL` for the rows COPY
loaded), in one transaction. The memories are found before any posting is written: an insert
that tested each memory against `memory_posting` itself would scan, for every memory, the
postings it has already written (a sequential scan is what the planner takes for a table it
has seen empty, as the first load's is): quadratic, a first load of 168,070 memories was still
writing them after 13 minutes. The temporary table is analyzed so the insert joins it by
hashing, not by a scan of it for every memory."""

COUNT_EVERY_OWNER_SQL = (
    "DELETE FROM memory_owner_stats",
    "DELETE FROM memory_lexeme_stats",
    """
    INSERT INTO memory_owner_stats (tenant_id, user_id, documents, total_length, refreshed_at)
    SELECT tenant_id, user_id, count(*), coalesce(sum(tsv_length), 0), now()
      FROM memory
     WHERE lifecycle <> 'superseded' AND (expires_at IS NULL OR expires_at > now())
     GROUP BY tenant_id, user_id
    """,
    """
    INSERT INTO memory_lexeme_stats (tenant_id, user_id, lexeme, documents)
    SELECT tenant_id, CASE WHEN owner_key = 'org:' THEN NULL ELSE substr(owner_key, 6) END,
           lexeme, count(*)
      FROM memory_posting
     GROUP BY tenant_id, owner_key, lexeme
    HAVING count(*) >= $1
    """,
)
"""Every owner's search statistics at once (`PostingsRepository.refresh_statistics`, which the
service's background job runs per owner), for a database loaded by COPY."""


class MemoryTable:
    """The memory table as the bulk paths write it: owner connections, COPY streams, tenants
    deleted."""

    def __init__(self, owner_engine: AsyncEngine, settings: BulkSettings) -> None:
        self._engine = owner_engine
        self._settings = settings

    @property
    def owner_engine(self) -> AsyncEngine:
        """The owner role's engine the table is loaded through."""
        return self._engine

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Any]:
        """A raw asyncpg connection of the owner engine, with vectors sent as bytes. It is
        closed afterwards, never handed back to the pool with this codec and timeout."""
        async with self._engine.connect() as connection:
            try:
                driver = await asyncpg_connection(connection)
                # Loads take minutes, far beyond the service's timeout.
                await driver.execute("SET statement_timeout = 0")
                await driver.set_type_codec(
                    "vector", encoder=bytes, decoder=bytes, format="binary", schema="public"
                )
                yield driver
            finally:
                await connection.invalidate()

    async def check_privileges(self) -> None:
        async with self.connection() as connection:
            if not await connection.fetchval(OWNER_PRIVILEGES_SQL):
                raise BulkLoadRefused(
                    "the owner role has no BYPASSRLS, so COPY into the memory table (under "
                    "row-level security) would be refused"
                )

    async def copy_chunks(
        self,
        chunks: Sequence[Callable[[], list[tuple[Any, ...]]]],
        columns: Sequence[str],
        progress: Callable[[int], object],
    ) -> None:
        """COPY each chunk's records (made off the event loop, one chunk per transaction) on
        the configured number of connections."""
        queue: asyncio.Queue[list[tuple[Any, ...]] | None] = asyncio.Queue(
            maxsize=self._settings.connections
        )

        async def produce() -> None:
            for make_records in chunks:
                # Generated in a thread so COPY streams keep flowing meanwhile.
                records = await asyncio.to_thread(make_records)
                await queue.put(records)
            for _ in range(self._settings.connections):
                await queue.put(None)

        async def consume() -> None:
            async with self.connection() as connection:
                await connection.execute("SET synchronous_commit = off")
                while (records := await queue.get()) is not None:
                    await connection.copy_records_to_table(
                        "memory", records=records, columns=list(columns)
                    )
                    progress(len(records))

        async with asyncio.TaskGroup() as group:
            group.create_task(produce())
            for _ in range(self._settings.connections):
                group.create_task(consume())

    async def vacuum_analyze(self) -> None:
        """Write the search's postings and statistics of what COPY loaded (the service's write
        path and its background recount do that for what it stores), then vacuum and analyse."""
        async with self.connection() as connection:
            async with connection.transaction():
                for statement in WRITE_MISSING_POSTINGS_SQL:
                    await connection.execute(statement)
            async with connection.transaction():
                *clear_and_count_owners, count_lexemes = COUNT_EVERY_OWNER_SQL
                for statement in clear_and_count_owners:
                    await connection.execute(statement)
                await connection.execute(count_lexemes, COMMON_LEXEME_DOCUMENTS)
            # Sets hint bits and the visibility map now rather than during the measurements.
            await connection.execute("VACUUM (ANALYZE) memory")
            await connection.execute(
                "VACUUM (ANALYZE) memory_posting, memory_owner_stats, memory_lexeme_stats"
            )
            await connection.execute("ANALYZE tenant, user_account")

    async def delete_tenants(self, tenants: Sequence[str]) -> None:
        """Delete whole tenants; their users, memories and history go with them (cascade)."""
        async with self.connection() as connection:
            await connection.execute("DELETE FROM tenant WHERE id = ANY($1::text[])", list(tenants))

    async def relation_sizes(self) -> dict[str, int]:
        async with self.connection() as connection:
            return {row["name"]: row["bytes"] for row in await connection.fetch(RELATION_SIZES_SQL)}


class BulkLoader(MemoryTable):
    """Grows the corpus user by user; remembers how far it got."""

    def __init__(
        self,
        owner_engine: AsyncEngine,
        corpus: Corpus,
        pool_vectors: npt.NDArray[np.float32],
        settings: BulkSettings,
    ) -> None:
        super().__init__(owner_engine, settings)
        self._corpus = corpus
        self._pool_vectors = pool_vectors
        self.users_loaded = 0
        self.tenants_loaded = 0
        self.rows_loaded = 0

    def derived_vectors(self, rows: Sequence[MemoryRow], key: str) -> npt.NDArray[np.float32]:
        """The vectors the bulk path stores for one owner's rows (`key` names the owner)."""
        base = self._pool_vectors[[row.pool_index for row in rows]]
        return noisy_vectors(base, self._settings.vector_noise, key, self._corpus.shape.seed)

    def owner_records(self, rows: Sequence[MemoryRow], key: str) -> list[tuple[Any, ...]]:
        """COPY records for one owner's rows."""
        payloads = vector_payloads(self.derived_vectors(rows, key))
        model = self._settings.embedding_model
        return [
            (
                row.tenant_id,
                row.id,
                "user" if row.user_id is not None else "org",
                row.user_id,
                row.kind,
                row.category,
                row.text,
                payload,
                model,
                row.confidence,
                row.lifecycle,
                row.lifecycle == "proposed",
                row.event_at,
                row.created_at,
                row.created_at,
            )
            for row, payload in zip(rows, payloads, strict=True)
        ]

    def _chunks(self, users: range, tenants: range) -> list[tuple[range, range]]:
        """Consecutive user ranges, each with the tenants that first appear in it."""
        chunks = []
        per_tenant = self._corpus.shape.users_per_tenant
        for start in range(users.start, users.stop, USERS_PER_CHUNK):
            chunk = range(start, min(start + USERS_PER_CHUNK, users.stop))
            first = max(tenants.start, -(-chunk.start // per_tenant))
            last = min(tenants.stop, (chunk.stop - 1) // per_tenant + 1)
            chunks.append((chunk, range(first, max(first, last))))
        return chunks

    def _chunk_records(self, users: range, tenants: range) -> list[tuple[Any, ...]]:
        records: list[tuple[Any, ...]] = []
        for tenant in tenants:
            records += self.owner_records(self._corpus.org_rows(tenant), f"org-{tenant}")
        for user in users:
            records += self.owner_records(self._corpus.user_rows(user), f"user-{user}")
        return records

    async def grow_to(
        self, user_memories: int, progress: Callable[[int], object] = lambda _: None
    ) -> BulkStep:
        """Add users (and their tenants) until the corpus holds `user_memories` user memories,
        then vacuum and analyse (`build_owner_graphs` builds the owners' indexes after it)."""
        shape = self._corpus.shape
        users_wanted = shape.users_for(user_memories)
        tenants_wanted = shape.tenants_for(users_wanted)
        if users_wanted < self.users_loaded:
            raise ValueError("the corpus only grows; give sizes in increasing order")
        users = range(self.users_loaded, users_wanted)
        tenants = range(self.tenants_loaded, tenants_wanted)
        step = BulkStep(
            user_memories=user_memories,
            total_rows=shape.total_rows(user_memories),
            rows_added=shape.total_rows(user_memories) - self.rows_loaded,
            tenants_added=len(tenants),
            users_added=len(users),
        )

        started = time.perf_counter()
        await self._insert_owners(users, tenants)
        await self._copy(self._chunks(users, tenants), progress)
        step.copy_seconds = time.perf_counter() - started

        started = time.perf_counter()
        await self.vacuum_analyze()
        step.vacuum_analyze_seconds = time.perf_counter() - started

        self.users_loaded, self.tenants_loaded = users_wanted, tenants_wanted
        self.rows_loaded = step.total_rows
        step.relation_bytes = await self.relation_sizes()
        return step

    async def add_owner(
        self,
        tenant_id: str,
        user_id: str,
        rows: Sequence[MemoryRow],
        progress: Callable[[int], object] = lambda _: None,
    ) -> float:
        """COPY one user's rows (with a tenant of its own) outside the corpus's shape, and
        return the seconds that took. Call this right before a `grow_to`: its vacuum and
        analysis write the user's postings and statistics with everyone else's."""
        started = time.perf_counter()
        key = f"heavy-{tenant_id}-{user_id}"
        async with self.connection() as connection:
            await connection.execute("SET synchronous_commit = off")
            async with connection.transaction():
                await connection.execute("INSERT INTO tenant (id) VALUES ($1)", tenant_id)
                await connection.execute(
                    "INSERT INTO user_account (tenant_id, id) VALUES ($1, $2)", tenant_id, user_id
                )
            for start in range(0, len(rows), OWNER_ROWS_PER_COPY):
                chunk = rows[start : start + OWNER_ROWS_PER_COPY]
                records = await asyncio.to_thread(self.owner_records, chunk, f"{key}-{start}")
                await connection.copy_records_to_table(
                    "memory", records=records, columns=MEMORY_COLUMNS
                )
                progress(len(chunk))
        return time.perf_counter() - started

    async def _insert_owners(self, users: range, tenants: range) -> None:
        shape = self._corpus.shape
        async with self.connection() as connection, connection.transaction():
            await connection.copy_records_to_table(
                "tenant", records=[(shape.tenant_id(t),) for t in tenants], columns=["id"]
            )
            await connection.copy_records_to_table(
                "user_account",
                records=[(shape.owner_of(u), shape.user_id(u)) for u in users],
                columns=["tenant_id", "id"],
            )

    async def _copy(
        self, chunks: list[tuple[range, range]], progress: Callable[[int], object]
    ) -> None:
        await self.copy_chunks(
            [partial(self._chunk_records, users, tenants) for users, tenants in chunks],
            MEMORY_COLUMNS,
            progress,
        )


async def build_owner_graphs(table: MemoryTable, settings: Settings, step: BulkStep) -> None:
    """What a service process with the owner role does in the background after a load into
    the benchmark's own database: the owners with the most memories of a kind get HNSW indexes
    of their own (`OwnerIndexes.refresh`, as `settings` configure them), timed into `step`
    with how many the table then has, and the table's and its indexes' sizes read again."""
    started = time.perf_counter()
    report = await OwnerIndexes.configured(table.owner_engine, settings).refresh()
    step.owner_index_seconds = time.perf_counter() - started
    step.owner_indexes_built = len(report.built) + len(report.rebuilt) + len(report.kept)
    step.relation_bytes = await table.relation_sizes()
