"""Database access: engine and session factories, the tenant-scoped transaction, ORM base.

Every statement the API runs goes through `tenant_transaction`, which sets
`app.tenant_id` for that transaction only. Row-level security (FORCE'd on every tenant
table) turns that setting into the only rows the statement can see or write.

The setting is made by `SET LOCAL app.tenant_id = '<tenant>'`, sent in the same simple query as
the transaction's BEGIN (one round trip for both; see `ScopedBeginConnection`). `SET LOCAL`
(unlike `set_config(..., true)`, a function call Citus cannot see into) is forwarded by Citus
to every worker the transaction touches when `citus.propagate_set_commands = 'local'`; it is
transaction-scoped, so PgBouncer in transaction mode can hand the connection to another client
after COMMIT without leaking the tenant. `SET` takes no bind parameters, so the value is a
literal: it is built only from a tenant id that matches the identifier whitelist, and quoted as
Postgres' `quote_literal` would.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol, cast

import asyncpg
from asyncpg.exceptions import ConnectionDoesNotExistError
from sqlalchemy import BindParameter, Connection, MetaData, event, text
from sqlalchemy.engine import Dialect, make_url
from sqlalchemy.engine.interfaces import AdaptedConnection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ClauseElement

from service.auth.principal import TENANT_ID_MAX
from service.config import Settings
from service.embedded_postgres import (
    EMBEDDED_IS_FOR_DEV,
    OWNER_ROLE,
    EmbeddedCluster,
    bootstrap,
    start_cluster,
)
from service.kit.types import is_valid_identifier
from service.refused_start import StartRefused

logger = logging.getLogger("mneme.db")

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


RUNTIME_ROLE_PRIVILEGES_SQL = text(
    """
    SELECT r.rolsuper, r.rolbypassrls,
           (SELECT count(*) FROM pg_tables t
             WHERE t.schemaname = 'public' AND t.tableowner = current_user) AS owned_tables,
           to_regclass('alembic_version') IS NOT NULL AS migrated
      FROM pg_roles r
     WHERE r.rolname = current_user
    """
)
"""The runtime role's dangerous attributes (any of them would let a query escape RLS), and
whether the database holds a schema of the service's at all (any revision: one older or newer
than the code's is served, and `/readyz` says so, as a rolling release needs)."""

SERVER_SOFTWARE_SQL = text(
    """
    SELECT current_setting('server_version_num')::int AS server_version_num,
           current_setting('server_version') AS server_version,
           coalesce((SELECT extversion FROM pg_extension WHERE extname = 'vector'),
                    (SELECT default_version FROM pg_available_extensions
                      WHERE name = 'vector')) AS pgvector_version
    """
)
"""The server's PostgreSQL version and the pgvector the database has: the one created in it, or
before the migrations create it, the one the server would install."""

MINIMUM_SERVER_VERSION_NUM = 160000
"""PostgreSQL 16: the search statement takes a value of each group with `any_value()`, which
older servers lack (every search there would fail)."""

MINIMUM_PGVECTOR_VERSION = (0, 8, 0)
"""pgvector 0.8: filtered searches walk the HNSW graph on until enough rows pass
(`hnsw.iterative_scan`); an older pgvector drops that setting with a warning, and a search
filtered to one owner returns a few of the graph's nearest rows instead of the owner's."""


@dataclass(frozen=True)
class DatabaseUrls:
    """Where the service connects at runtime (RLS-bound role) and where migrations run, and
    where each URL comes from (a setting's name), for the operator to fix when it fails."""

    runtime: str
    owner: str
    runtime_source: str = "MNEME_DATABASE_URL"
    owner_source: str = "MNEME_DATABASE_URL"


def as_async_url(url: str) -> str:
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url[len(prefix) :]
    return url


@dataclass
class DatabaseTarget:
    urls: DatabaseUrls
    cluster: EmbeddedCluster | None

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()


async def open_command_engine(
    settings: Settings, *, as_owner: bool = True
) -> tuple[DatabaseTarget, AsyncEngine]:
    """The database a command works on (the embedded one started when none is configured) and
    a one-connection engine of its owner role (`as_owner`) or its runtime role, connected: a
    database the command cannot reach stops it before it starts (`DatabaseUnreachable`), not
    in its middle. The caller disposes of the engine and closes the target."""
    target = await open_database_target(settings)
    urls = target.urls
    url, source = (
        (urls.owner, urls.owner_source) if as_owner else (urls.runtime, urls.runtime_source)
    )
    engine = create_engine(url, settings, pool_size=1, max_overflow=0)
    try:
        # The connection opened here stays in the pool for the command's first statement.
        async with reaching(url, source, runtime_role=not as_owner), engine.connect():
            pass
    except BaseException:
        await engine.dispose()
        target.close()
        raise
    return target, engine


async def open_database_target(settings: Settings) -> DatabaseTarget:
    """Resolve connection URLs; without a configured URL, start and bootstrap the embedded one."""
    if settings.database_url is not None:
        runtime = as_async_url(settings.database_url.get_secret_value())
        owner_secret = settings.migration_database_url or settings.database_url
        owner = as_async_url(owner_secret.get_secret_value())
        owner_source = (
            "MNEME_DATABASE_URL"
            if settings.migration_database_url is None
            else "MNEME_MIGRATION_DATABASE_URL"
        )
        urls = DatabaseUrls(runtime=runtime, owner=owner, owner_source=owner_source)
        return DatabaseTarget(urls=urls, cluster=None)
    if not settings.is_dev:
        raise StartRefused(EMBEDDED_IS_FOR_DEV)

    cluster = await asyncio.to_thread(
        start_cluster, settings.data_dir, settings.embedded_shared_buffers_mb
    )
    await bootstrap(cluster)
    urls = DatabaseUrls(
        runtime=cluster.url(settings.db_runtime_role),
        owner=cluster.url(OWNER_ROLE),
        runtime_source="the embedded database",
        owner_source="the embedded database",
    )
    return DatabaseTarget(urls=urls, cluster=cluster)


class InvalidTenantId(ValueError):
    """A tenant id outside the identifier whitelist never reaches a SQL text."""


def quote_literal(value: str) -> str:
    """`value` as a standard-conforming SQL string literal, as Postgres' `quote_literal`.

    Refuses backslashes and NUL outright instead of emitting an `E'...'` literal: the
    literal must mean the same whatever `standard_conforming_strings` says.
    """
    if "\\" in value or "\x00" in value:
        raise InvalidTenantId("backslash and NUL are not allowed in a SQL literal here")
    return "'" + value.replace("'", "''") + "'"


def escaped_literal(value: str) -> str:
    """`value` as a PostgreSQL escape string literal (`E'…'`, quotes doubled, backslashes
    escaped): in an escape string a backslash is an escape whatever the server's
    `standard_conforming_strings`, so the quoting cannot be read back differently."""
    # A NUL cannot be in a PostgreSQL string: refuse it rather than let the driver cut the SQL.
    if "\x00" in value:
        raise ValueError("a SQL string literal cannot hold a NUL character")
    return "E'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def set_tenant_sql(tenant_id: str) -> str:
    """The statement that scopes the current transaction to `tenant_id`."""
    if not is_valid_identifier(tenant_id, TENANT_ID_MAX):
        raise InvalidTenantId(f"not a valid tenant id: {tenant_id[:40]!r}")
    return "SET LOCAL app.tenant_id = " + quote_literal(tenant_id)


_ENDS_TRANSACTION = re.compile(
    r"\s*(?:BEGIN\b|START\s+TRANSACTION\b|(?:COMMIT|END|ROLLBACK|ABORT)\s*;?\s*$)", re.IGNORECASE
)
"""A simple query that ends the transaction or opens another: `COMMIT`, `ROLLBACK` (not
`ROLLBACK TO SAVEPOINT`, after which the transaction goes on), `BEGIN`."""


class ScopedBeginConnection(asyncpg.Connection):  # type: ignore[misc]  # asyncpg is untyped
    """An asyncpg connection whose transactions spend no round trip on `SET LOCAL` alone.

    `SET LOCAL` lasts only inside a transaction, so sent as a statement of its own it is one
    more round trip after BEGIN on every request. A simple query may hold several statements,
    which PostgreSQL runs in order: "BEGIN; SET LOCAL ...;" opens the transaction already
    scoped, in one round trip (`send_with_next_begin`). And settings a statement made for
    itself are restored only if the transaction goes on (`restore_before_next_statement`).
    Passed to asyncpg as its `connection_class` (by `create_engine`).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._with_next_begin: str | None = None
        self._before_next_statement: str | None = None
        self.begun_with: str | None = None
        """The command tag of the last statement sent with the latest BEGIN ("SELECT 1")."""
        self.distributes: bool | None = None
        """Whether the server distributes queries (Citus), asked once the connection is made
        (`_set_up_new_connections`; None until then): it refuses a distributed query inside a
        query of several statements ("cannot execute a distributed query from a query on a
        shard")."""
        self.owner_texts = StatementShelf()
        """The search statements with owners written in (a text per large owner and filter
        shape), kept apart from the driver's cache (`fetch_search`): at most
        `MNEME_DB_OWNER_STATEMENT_CACHE_SIZE`, set when the pool makes the connection."""
        self.search_shapes = StatementShelf()
        """The search statements every owner shares (a text per filter shape), kept apart from
        the driver's cache (`fetch_search`): at most `MNEME_DB_SEARCH_STATEMENT_CACHE_SIZE`."""
        self.forwarded: str | None = None
        """Where the server distributes queries: the settings its workers must share with the
        connection, as `SET LOCAL` statements sent in every BEGIN's query (set when the pool
        makes it; see `forwarded_settings_sql`)."""

    def send_with_next_begin(self, statements: str) -> None:
        """Send `statements` (trusted SQL, no parameters) in the same query as the next BEGIN."""
        self._with_next_begin = statements

    def restore_before_next_statement(self, statements: str) -> None:
        """Send `statements` (trusted `SET LOCAL` SQL restoring settings, no parameters) before
        the transaction's next statement, or never if the transaction ends first.

        A `SET LOCAL` ends with its transaction, and after a search the request's transaction
        usually just commits: restoring the settings then is a round trip for nothing. The
        next statement pays it, whichever way it goes: a simple query carries it in the same
        query; a statement of SQLAlchemy's (the engine event `create_engine` registers) or one
        on the driver connection (`transaction_driver`) is preceded by it. COMMIT, ROLLBACK
        and the next BEGIN drop it (a ROLLBACK TO SAVEPOINT does not).
        """
        self._before_next_statement = statements

    @property
    def owes_settings(self) -> bool:
        return self._before_next_statement is not None

    async def restore_owed_settings(self) -> None:
        """Send the settings `restore_before_next_statement` left owed, now."""
        statements, self._before_next_statement = self._before_next_statement, None
        if statements is not None:
            await super().execute(statements)

    async def fetch_search(
        self, query: str, *args: Any, owners_written: bool
    ) -> list[asyncpg.Record]:
        """`fetch`, for a search statement: prepared and kept apart from the connection's
        statement cache, on the shelf of its kind (`owner_texts` when it has owners written
        in, else `search_shapes`), each shelf bounded.

        A search statement holds its plan in the backend's memory (2.7 MB for a search, 5 for a
        context's sections), so what a connection holds must not grow with the number of large
        owners (a text each) nor with the filter shapes its clients use (81 texts among the
        combinations of one search's filters): in the driver's cache of 100 they could hold
        hundreds of megabytes a connection. And on one shelf a rotation of large owners' texts
        would push out the texts every other search shares, each then planned again, 7 to 15
        ms."""
        shelf = self.owner_texts if owners_written else self.search_shapes
        if not self._query_loggers:
            return await shelf.fetch(self, query, *args)
        # asyncpg's query loggers (`add_query_logger`) see what its connection's own methods
        # run, not a statement prepared apart: logged here the same way, they see every search.
        with self._time_and_log(query, args, None):
            return await shelf.fetch(self, query, *args)

    # The signature is asyncpg's own, `timeout` included.
    async def execute(self, query: str, *args: Any, timeout: float | None = None) -> str:  # noqa: ASYNC109
        owed, self._before_next_statement = self._before_next_statement, None
        if owed is not None and not _ENDS_TRANSACTION.match(query):
            if args:
                await super().execute(owed)
            else:
                query = f"{owed}; {query}"
        statements, forwarded = self._with_next_begin, self.forwarded
        # Only a BEGIN carries anything, and only on a connection that has something to send
        # with it: every other statement skips the test of its text.
        begins = (
            (statements is not None or forwarded is not None)
            and not args
            and query.startswith("BEGIN")
        )
        if begins and forwarded is not None:
            # Recorded by the coordinator and sent with each worker's own BEGIN when the
            # transaction first reaches it: no round trip of its own.
            query = f"{query.rstrip(';')}; {forwarded};"
        with_begin = begins and statements is not None
        if with_begin:
            self._with_next_begin = None
            query = f"{query.rstrip(';')}; {statements};"
        status: str = await super().execute(query, *args, timeout=timeout)
        if with_begin:
            self.begun_with = status
        return status


KEPT_APART_IDLE_SECONDS = 300.0
"""How long a `StatementShelf` keeps a statement no search has used: as long as asyncpg keeps
one in the connection's statement cache (its default lifetime)."""


class StatementShelf:
    """Statements of one kind a connection keeps prepared apart from its driver's statement
    cache: at most `size` (0: none kept, each prepared for its run), least recently used first
    out, none unused for `KEPT_APART_IDLE_SECONDS`. asyncpg's own cache is a single LRU that
    cannot be split by kind; a statement made by its public `prepare()` stays out of it, and
    dropping the last reference to one closes it on the server."""

    def __init__(self, size: int = 0) -> None:
        self.size = size
        self._kept: OrderedDict[str, tuple[Any, float]] = OrderedDict()

    async def fetch(self, connection: asyncpg.Connection, query: str, *args: Any) -> list[Any]:
        now = time.monotonic()
        kept = self._kept.pop(query, None)
        # Each statement dropped here is closed on the server by asyncpg as the connection
        # prepares its next one (below, or the next statement it has not prepared yet).
        while self._kept and (
            len(self._kept) >= self.size
            or next(iter(self._kept.values()))[1] < now - KEPT_APART_IDLE_SECONDS
        ):
            self._kept.popitem(last=False)
        statement = kept[0] if kept is not None else await connection.prepare(query)
        if self.size:
            self._kept[query] = (statement, now)
        try:
            records: list[Any] = await statement.fetch(*args)
        except asyncpg.exceptions.InvalidCachedStatementError:
            # A change of the tables' schema: the next use prepares the text again.
            self._kept.pop(query, None)
            raise
        return records


async def fetch_search(
    driver: Driver, query: str, *args: Any, owners_written: bool
) -> list[Mapping[str, Any]]:
    """`ScopedBeginConnection.fetch_search` on the pool's connections; a plain `fetch` on any
    other driver (the benchmarks' own, which record what is sent)."""
    if isinstance(driver, ScopedBeginConnection):
        return await driver.fetch_search(query, *args, owners_written=owners_written)
    return await driver.fetch(query, *args)


DISTRIBUTES_SQL = "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')"
"""Whether the server distributes queries (Citus)."""

_distributes: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
"""The answer of `DISTRIBUTES_SQL` per driver connection that is not a `ScopedBeginConnection`
(the benchmarks' own), for as long as it lives."""


async def distributes_queries(driver: Any) -> bool:
    """Whether the server behind the asyncpg connection `driver` distributes queries, asked
    once per connection: when the pool made it (`ScopedBeginConnection.distributes`), or on
    the first call."""
    if isinstance(driver, ScopedBeginConnection) and driver.distributes is not None:
        return driver.distributes
    answer = _distributes.get(driver)
    if answer is None:
        answer = bool(await driver.fetchval(DISTRIBUTES_SQL))
        _distributes[driver] = answer
    return answer


NO_STATEMENT_LIMIT_SQL = "SET LOCAL statement_timeout = 0"
"""For the rest of the transaction, statements run for as long as they take: work that is not a
request's (the service's start-up checks, migrations), which the requests' limit must not fail."""

NEW_CONNECTION_SQL = (
    f"SELECT set_config('statement_timeout', $1, false) IS NOT NULL, ({DISTRIBUTES_SQL})"
)
"""A new connection's statement limit for everything it runs from then on, and whether its
server distributes queries (Citus), in one round trip."""


FORWARDED_SETTINGS = ("jit", "hnsw.iterative_scan", "hnsw.max_scan_tuples", "hnsw.ef_search")
"""The service's start-up parameters that decide how a worker runs a search statement: no JIT
compilation, and how pgvector walks a vector index."""


def owner_walk_list(least: int, vector_candidates: int) -> int:
    """The HNSW candidate list (`hnsw.ef_search`) of a walk of an owner's own graph: twice the
    vector candidates it is to bring, and never less than `least`
    (MNEME_OWNER_VECTOR_INDEX_EF_SEARCH)."""
    return max(least, 2 * vector_candidates)


def forwarded_settings_sql(server_settings: Mapping[str, str], ef_search: int) -> str:
    """The `FORWARDED_SETTINGS` of a connection's `server_settings` as `SET LOCAL` statements,
    for a server that distributes queries (Citus): it does not pass a connection's start-up
    parameters on to its workers, which would otherwise run each search as their own
    configuration says (JIT compiling a large owner's plans, 245-420 ms a search where the
    server has JIT; a filtered walk without iterative scans), but it forwards each `SET LOCAL`
    of a transaction (`citus.propagate_set_commands = 'local'`, which the tenant setting needs
    too). The walk's candidate list is `ef_search`, the owners' own graphs' (the only vector
    indexes a search reads)."""
    values = {**server_settings, "hnsw.ef_search": str(ef_search)}
    return "; ".join(
        f"SET LOCAL {name} = {quote_literal(values[name])}" for name in FORWARDED_SETTINGS
    )


def _set_up_new_connections(
    statement_timeout_ms: int, owner_texts: int, search_shapes: int, forwarded: str
) -> Callable[[Any, Any], None]:
    """The pool's `connect` listener: each new connection gets the statement limit and the
    number of search statements of each kind it keeps apart (`ScopedBeginConnection.fetch_search`),
    and is asked whether its server distributes queries (if so, it sends `forwarded` with every
    BEGIN).

    It runs after SQLAlchemy's own first queries on the engine's first connection (its dialect's
    set-up, a `connect` listener registered when the engine is made), which the limit therefore
    does not bind: sent with the connection's start-up parameters, it cancelled them on a loaded
    machine and the service failed to start (at 300 ms on two busy cores)."""

    def set_up(dbapi_connection: Any, _record: Any) -> None:
        driver = getattr(dbapi_connection, "driver_connection", None)
        if driver is None or not isinstance(dbapi_connection, AdaptedConnection):
            return
        row = dbapi_connection.run_async(
            lambda new: new.fetchrow(NEW_CONNECTION_SQL, str(statement_timeout_ms))
        )
        if isinstance(driver, ScopedBeginConnection):
            driver.distributes = bool(row[1])
            driver.owner_texts.size = owner_texts
            driver.search_shapes.size = search_shapes
            driver.forwarded = forwarded if driver.distributes else None

    return set_up


def _restore_owed_settings_first(
    connection: Connection, _cursor: Any, _statement: str, *_: Any
) -> None:
    """Before SQLAlchemy sends a statement: the settings its transaction owes
    (`ScopedBeginConnection.restore_before_next_statement`) go first."""
    adapted = connection.connection.dbapi_connection
    driver = getattr(adapted, "driver_connection", None)
    owing = isinstance(driver, ScopedBeginConnection) and driver.owes_settings
    if owing and isinstance(adapted, AdaptedConnection):
        adapted.run_async(lambda owed: owed.restore_owed_settings())


async def set_tenant(
    connection: AsyncConnection, tenant_id: str, *, also: str | None = None
) -> str | None:
    """Scope `connection`'s transaction to `tenant_id`; with `also` (trusted SQL of literals,
    no parameters), run that statement too and return its command tag ("SELECT 1").

    In a transaction SQLAlchemy has begun but not yet sent (the driver sends BEGIN just before
    the first statement), the setting goes in BEGIN's own query, sent now: one round trip for
    both, and for `also` with them (but where the server distributes queries, which it refuses
    among the statements of one query: `ScopedBeginConnection.distributes`). In one already
    under way, each is a statement of its own.
    Never straight to asyncpg outside SQLAlchemy's transaction: `SET LOCAL` outside a
    transaction is a no-op.
    """
    statement = set_tenant_sql(tenant_id)
    raw = await connection.get_raw_connection()
    driver = raw.driver_connection
    adapted = raw.dbapi_connection
    if (
        connection.in_transaction()
        and isinstance(driver, ScopedBeginConnection)
        and getattr(adapted, "_transaction", False) is None
    ):
        together = also is not None and driver.distributes is False
        with_begin = f"{statement}; {also}" if together else statement
        driver.send_with_next_begin(with_begin)
        await _send_begin(connection, adapted, with_begin)
        if together:
            return driver.begun_with
    else:
        await connection.exec_driver_sql(statement)
    if also is None:
        return None
    tag: str = await (await transaction_driver(connection)).execute(also)
    return tag


async def _send_begin(connection: AsyncConnection, adapted: Any, statement: str) -> None:
    """Send the BEGIN of `connection`'s transaction now, with `statement` in the same query.

    The begin is the one SQLAlchemy's asyncpg adapter sends before a transaction's first
    statement (`_start_transaction`: the adapter keeps the asyncpg transaction it commits or
    rolls back later), called ahead of that statement. An error is handled as SQLAlchemy does
    for a statement's: a connection found closed is invalidated, so the pool never hands it out
    again, and the error reaches the caller as a `DBAPIError` that says so.
    """
    try:
        await adapted._start_transaction()
    except connection.dialect.loaded_dbapi.Error as error:
        closed = connection.dialect.is_disconnect(error, adapted, None)
        # A failed BEGIN leaves the driver's transaction state unusable either way.
        await connection.invalidate(error)
        raise DBAPIError.instance(
            f"BEGIN; {statement}",
            None,
            error,
            connection.dialect.loaded_dbapi.Error,
            connection_invalidated=closed,
            dialect=connection.dialect,
        ) from error


class Driver(Protocol):
    """The part of an asyncpg connection the service runs statements on directly."""

    async def execute(self, query: str, *args: Any) -> str: ...

    async def fetch(self, query: str, *args: Any) -> list[Mapping[str, Any]]: ...

    async def fetchval(self, query: str, *args: Any) -> Any: ...


Conversion = Callable[[Any], Any] | None
"""What SQLAlchemy does to a bound value before the driver sends it (None: nothing)."""


@dataclass(frozen=True)
class DriverStatement:
    """A SQLAlchemy statement compiled for the driver once: its SQL text with positional
    parameters and, for each, its name and the conversion SQLAlchemy applies to its value.
    Run on `transaction_driver` for statements whose cost through SQLAlchemy's execution
    layer is a measurable part of a request (see there)."""

    sql: str
    parameters: tuple[tuple[str, Conversion], ...]

    @classmethod
    def compile(cls, statement: ClauseElement, dialect: Dialect) -> DriverStatement:
        compiled = statement.compile(dialect=dialect)
        if not isinstance(compiled, SQLCompiler):
            raise TypeError(f"{type(compiled).__name__} is not a SQL statement compiler")
        return cls(
            compiled.string,
            tuple(
                (name, compiled.binds[name].type.dialect_impl(dialect).bind_processor(dialect))
                for name in compiled.positiontup or ()
            ),
        )

    def arguments(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(
            value if convert is None else convert(value)
            for name, convert in self.parameters
            for value in (values[name],)
        )


_STATEMENTS_KEPT = 1024
"""How many texts `compiled_once` keeps compiled: one per statement shape (the fusion
statement's: one per filter shape, and per large owner written in), which a client cannot vary
without bound (the values are bound, not written in). Full, it starts again empty."""

_driver_statements: dict[tuple[str, str], DriverStatement] = {}


def compiled_once(
    sql: str, dialect: Dialect, statement: Callable[[], ClauseElement]
) -> DriverStatement:
    """The driver's compilation of `statement()` (a statement whose text is `sql`), made on
    its first use and kept by its text: building and compiling a statement costs more CPU
    than running a small one."""
    key = (dialect.name, sql)
    compiled = _driver_statements.get(key)
    if compiled is None:
        if len(_driver_statements) >= _STATEMENTS_KEPT:
            _driver_statements.clear()
        compiled = DriverStatement.compile(statement(), dialect)
        _driver_statements[key] = compiled
    return compiled


async def fetch_on_driver(
    session: AsyncSession, sql: str, binds: Sequence[BindParameter[Any]]
) -> list[Mapping[str, Any]]:
    """The rows of `sql` (its `:name` parameters bound by `binds`) from the driver, in the
    session's transaction: for a small read on a hot path, where SQLAlchemy's execution and
    its ORM cost ten times the statement (~0.4 ms of CPU against ~0.04 for a row by its key).
    The session's pending changes are not written first (the read is not the session's)."""
    connection = await session.connection()
    statement = compiled_once(sql, connection.dialect, lambda: text(sql).bindparams(*binds))
    driver = await transaction_driver(connection)
    return await driver.fetch(
        statement.sql, *statement.arguments({bind.key: bind.value for bind in binds})
    )


async def transaction_driver(connection: AsyncConnection) -> Driver:
    """The asyncpg connection under `connection`, inside the transaction `connection` has begun.

    For statements whose cost through SQLAlchemy's execution layer (execution context, cursor
    adaptation, result wrapping: ~1 ms of CPU a search) is a measurable part of the request, and
    for libraries that speak asyncpg themselves. What runs on it joins the session's transaction:
    the tenant setting applies, and it commits or rolls back with the session. Its errors are
    the driver's own (`asyncpg.PostgresError`), which `db_outage` handles like SQLAlchemy's.
    """
    raw = await connection.get_raw_connection()
    driver = raw.driver_connection
    if driver is not None and driver.is_closed():
        # Lost since the transaction's last statement: an outage like any other (a 503).
        raise ConnectionDoesNotExistError("the database connection was closed")
    # SQLAlchemy begins the asyncpg transaction lazily, on the first statement; a statement sent
    # before it would run outside the transaction, without the tenant setting.
    if driver is None or not driver.is_in_transaction():
        raise RuntimeError("the driver connection is used only inside a begun transaction")
    if isinstance(driver, ScopedBeginConnection):
        # Its statements bypass `execute` and SQLAlchemy's events: what is owed goes now.
        await driver.restore_owed_settings()
    return cast(Driver, driver)


CLIENT_WAIT_MARGIN_SECONDS = 5.0
"""How much longer than the server's statement limit the service waits for the answer to a
command before it gives up on the server: room for the server's own cancellation (SQLSTATE
57014, answered `503 DATABASE_TIMEOUT`) to arrive first from a loaded server over a slow
network, so that the client never cuts short a statement the server would still have ended
itself."""


def client_command_timeout(settings: Settings) -> float | None:
    """The client's own limit on each command a request or a background job sends (asyncpg's
    `command_timeout`): the statement limit and `CLIENT_WAIT_MARGIN_SECONDS`; None (no limit)
    where statements have none (`MNEME_DB_STATEMENT_TIMEOUT_MS=0`).

    The statement limit is enforced by Postgres, so it never fires when Postgres does not
    answer at all (its host frozen, a network partition that drops packets without resetting
    connections): without a limit of the client's own, every request would wait for as long
    as that lasts, holding its connection. Past this one the driver gives up on the command
    (it asks the server to cancel it, and closes the connection if that fails too) and the
    request answers `503 DATABASE_UNAVAILABLE`."""
    if settings.db_statement_timeout_ms == 0:
        return None
    return settings.db_statement_timeout_ms / 1000 + CLIENT_WAIT_MARGIN_SECONDS


def asyncpg_client_limits(settings: Settings) -> dict[str, float | None]:
    """The driver's own limits for a pool the service opens with asyncpg directly (the job
    worker's, the retention scheduler's), as every engine of requests and jobs has them: a
    server that stops answering ends their commands too, instead of holding them (and the
    service's stop) for as long as it lasts."""
    return {
        "timeout": settings.db_connect_timeout_seconds,
        "command_timeout": client_command_timeout(settings),
    }


def create_engine(
    url: str,
    settings: Settings,
    *,
    command_timeout: float | None = None,
    connect_timeout: float | None = None,
    **overrides: Any,
) -> AsyncEngine:
    """An engine of `url` (SQLAlchemy's `overrides` on top of the service's options).

    Every connection it opens gives up after `connect_timeout` seconds
    (`MNEME_DB_CONNECT_TIMEOUT_SECONDS` by default), and each command after `command_timeout`
    (None: never). Engines that serve requests or jobs pass `client_command_timeout`; the
    owner's engines, whose index builds and migrations lift the statement limit for minutes,
    pass none."""
    options: dict[str, Any] = {
        "pool_size": settings.db_pool_size,
        "max_overflow": settings.db_max_overflow,
        "pool_timeout": settings.db_pool_timeout_seconds,
        "pool_pre_ping": settings.db_pool_pre_ping,
        # The connection returned last is handed out first: a connection keeps the plans of
        # the statements it ran (prepared, see `statement_cache_size`), so a steady load runs
        # on the few connections that hold them, where taking each pooled connection in turn
        # planned every statement again on each one and kept a copy of each plan on all.
        "pool_use_lifo": True,
        "connect_args": {
            # The tenant setting goes in the same query as BEGIN (`set_tenant`).
            "connection_class": ScopedBeginConnection,
            # asyncpg's own limits on opening a connection and on each command, which hold
            # when the server does not answer at all (its statement limit then cannot).
            "timeout": connect_timeout or settings.db_connect_timeout_seconds,
            "command_timeout": command_timeout,
            # asyncpg keeps a statement prepared (and so planned once) only up to 15 KiB of
            # text by default; the fusion statement run on the driver connection is ~15 KiB for
            # one search and ~21 KiB for the context's three sections, which would then be
            # parsed and planned again on every call. The cache stays bounded by its count
            # (`db_statement_cache_size` statements a connection, least recently used first
            # out): each kept search statement holds its plan in the database backend's memory
            # (~2.7 MB; docs/operating.md § Owner vector indexes).
            "max_cacheable_statement_size": 0,
            "statement_cache_size": settings.db_statement_cache_size,
            "server_settings": {
                "application_name": "mneme",
                # The statement limit is set once the connection is made (see
                # `_set_up_new_connections`), not here.
                # pgvector ≥0.8: keep scanning the HNSW graph until enough rows pass the
                # tenant/user filter instead of post-filtering (docs/benchmarks.md, the heavy
                # user, for the choice of order and limits).
                "hnsw.iterative_scan": settings.hnsw_iterative_scan,
                "hnsw.max_scan_tuples": str(settings.hnsw_max_scan_tuples),
                "hnsw.ef_search": str(settings.hnsw_ef_search),
                # No JIT compilation: a plan whose estimated cost passes `jit_above_cost`
                # (100,000) compiles its expressions on every execution, and the search
                # statement's custom plans for an owner of 100,000 memories are estimated at
                # 130,000-240,000 (every plan on Citus, whose workers plan each statement for
                # its values): 245-420 ms
                # of compiling for a statement that runs in 35-100 ms (docs/benchmarks.md).
                "jit": "off",
            },
        },
    }
    options.update(overrides)
    engine = create_async_engine(url, **options)
    event.listen(engine.sync_engine, "before_cursor_execute", _restore_owed_settings_first)
    # Every search there gets the list a walk of the whole candidate pool needs (RRF's, or a
    # vector-mode search's): the workers are given it with BEGIN, before any search says what
    # it needs.
    forwarded = forwarded_settings_sql(
        options["connect_args"]["server_settings"],
        owner_walk_list(settings.owner_vector_index_ef_search, settings.search_candidate_pool),
    )
    event.listen(
        engine.sync_engine,
        "connect",
        _set_up_new_connections(
            settings.db_statement_timeout_ms,
            settings.db_owner_statement_cache_size,
            settings.db_search_statement_cache_size,
            forwarded,
        ),
    )
    return engine


def create_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    # expire_on_commit=False: responses are built from objects after the commit.
    return async_sessionmaker(engine, expire_on_commit=False, autoflush=False)


@asynccontextmanager
async def tenant_transaction(
    sessionmaker: async_sessionmaker[AsyncSession],
    tenant_id: str,
    *,
    with_begin: str | None = None,
) -> AsyncIterator[AsyncSession]:
    """One transaction scoped to `tenant_id`; commits on success, rolls back on error. With
    `with_begin` (a statement of literals, `set_tenant`'s `also`), that statement runs first,
    in BEGIN's own query where it can, and its command tag is `begun_with(session)`."""
    async with sessionmaker() as session:
        session.info[BEGUN_WITH] = await _begin_scoped(session, tenant_id, with_begin)
        try:
            yield session
        except BaseException:
            await session.rollback()
            raise
        await session.commit()


BEGUN_WITH = "mneme.begun_with"
"""The session's `info` key of the command tag of `tenant_transaction`'s `with_begin`."""


def begun_with(session: AsyncSession) -> str | None:
    """The command tag of the statement `tenant_transaction` ran with the session's BEGIN."""
    tag: str | None = session.info.get(BEGUN_WITH)
    return tag


async def _begin_scoped(
    session: AsyncSession, tenant_id: str, also: str | None = None
) -> str | None:
    """Begin `session`'s transaction and scope it to `tenant_id`, on a live connection.

    The pool hands out connections without pinging them first (`db_pool_pre_ping`), so one may
    have been closed by the server since it was last used (a restart, an idle timeout). Its
    first statement then fails as a disconnect, and SQLAlchemy discards it and every connection
    pooled before the failure. Nothing has run in the transaction yet, so it is begun once more,
    on a new connection; if that fails too, the database is down and the error propagates (a
    503 `DATABASE_UNAVAILABLE`).
    """
    try:
        return await set_tenant(await session.connection(), tenant_id, also=also)
    except DBAPIError as error:
        if not error.connection_invalidated:
            raise
        await session.rollback()
        return await set_tenant(await session.connection(), tenant_id, also=also)


class PrivilegedRuntimeRole(StartRefused):
    """The runtime role could bypass row-level security; refusing to serve."""


class UnsupportedServer(StartRefused):
    """The database server is older than the service's statements need, or lacks pgvector
    (or has one too old); refusing to migrate or serve."""


class UnmigratedDatabase(StartRefused):
    """The database holds no schema of the service's: it was never migrated."""


class DatabaseUnreachable(StartRefused):
    """The service could not connect to a database it was pointed at (`reaching`)."""


UNAVAILABLE_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "53300"})
"""SQLSTATEs that mean "the server cannot serve you now", whatever the statement was, besides
class 08 (connection exceptions): admin or crash shutdown, starting up or shutting down, too many
connections."""

NOT_ACCEPTED_STATE_CLASSES = ("28", "3D")
"""SQLSTATE classes a server answers a connection it will not take for what it was asked: a
role or password it does not accept, a database that does not exist."""


def is_unavailable_state(state: str | None) -> bool:
    """Whether `state` says the server cannot be reached or cannot serve now (an outage), not
    that a statement was wrong."""
    return state is not None and (state.startswith("08") or state in UNAVAILABLE_SQLSTATES)


def server_error_of(error: BaseException | None) -> BaseException | None:
    """The error the server sent, found along `error`'s causes (SQLAlchemy wraps the driver's
    error, which wraps asyncpg's): the first that carries a SQLSTATE."""
    while error is not None:
        if isinstance(getattr(error, "sqlstate", None), str):
            return error
        error = error.__cause__
    return None


def raised_by_driver(error: BaseException) -> bool:
    """Whether `error` was raised inside asyncpg (a socket error of its connect, say)."""
    trace = error.__traceback__
    while trace is not None:
        if str(trace.tb_frame.f_globals.get("__name__", "")).startswith("asyncpg"):
            return True
        trace = trace.tb_next
    return False


def connection_failure(error: BaseException) -> str | None:
    """What prevented a connection, in the words of the network or the server, or None when
    `error` is not a failure to connect (a statement's own error)."""
    if isinstance(error, OSError):
        # Refused, a name that does not resolve, timed out: what asyncpg's connect raises. The
        # same classes raised by anything else (a file that is missing) are not about the
        # database.
        if not raised_by_driver(error):
            return None
        return error.strerror or str(error) or type(error).__name__
    refused = server_error_of(error)
    if refused is None:
        return None
    state: str = getattr(refused, "sqlstate", "")
    if is_unavailable_state(state) or state.startswith(NOT_ACCEPTED_STATE_CLASSES):
        return str(refused)
    return None


def shown_url(url: str) -> str:
    """`url` as a message may show it: its password hidden, in the URL's credentials or in a
    query parameter (libpq takes `password` and `sslpassword` there too), and the driver left
    out."""
    parsed = make_url(url)
    query = "&".join(
        f"{name}={'***' if 'password' in name.lower() else value}"
        for name, value in parsed.query.items()
    )
    bare = parsed.set(drivername="postgresql", query={}).render_as_string(hide_password=True)
    return f"{bare}?{query}" if query else bare


MIGRATE_FIRST = (
    "run `mneme migrate` as the owner role (MNEME_MIGRATION_DATABASE_URL) first, or start with "
    "MNEME_MIGRATE_ON_START=true"
)
"""What to do about a database that holds no schema of the service's yet."""

ROLE_NOT_ACCEPTED_STATE = "28000"
"""The SQLSTATE of a connection refused for its role: one the server does not know, or one no
`pg_hba.conf` entry lets in (a wrong password has its own, 28P01)."""


@asynccontextmanager
async def reaching(url: str, source: str, *, runtime_role: bool = False) -> AsyncIterator[None]:
    """Inside, a failure to connect to `url` (taken from `source`, a setting's name) is raised
    as `DatabaseUnreachable`: the URL without its password, where it comes from and what the
    network or the server said. Every other error passes through unchanged.

    `runtime_role`: the URL's role is the service's runtime role, which the first migration
    creates; a refusal of that role then also says what to run, since a database never migrated
    (the service started with `MNEME_MIGRATE_ON_START=false` on a new one) has no such role."""
    try:
        yield
    except (OSError, DBAPIError, asyncpg.PostgresError) as error:
        reason = connection_failure(error)
        if reason is None:
            raise
        advice = (
            "check the URL and that the server is up and accepts the role (see "
            "docs/configuration.md § Database)"
        )
        refused = server_error_of(error)
        if runtime_role and getattr(refused, "sqlstate", None) == ROLE_NOT_ACCEPTED_STATE:
            advice = (
                f"the runtime role is created by the first migration: {MIGRATE_FIRST}; "
                f"otherwise {advice}"
            )
        raise DatabaseUnreachable(
            f"cannot connect to the database at {shown_url(url)} ({source}): {reason}; {advice}"
        ) from error


def _version_tuple(version: str) -> tuple[int, ...]:
    """An extension's version as numbers to compare: "0.8.2" is (0, 8, 2). Its numbers end at
    the first part that is not one."""
    parts: list[int] = []
    for part in version.split("."):
        if not part.isdigit():
            break
        parts.append(int(part))
    return tuple(parts)


def unsupported_server(version_num: int, version: str, pgvector_version: str | None) -> str | None:
    """Why a server reporting `version_num` (`server_version_num`) and `version`, with
    `pgvector_version` (None: not available to the database), cannot hold the service's
    database, or None when it can."""
    where = "point the database URLs at such a server (see docs/configuration.md § Database)"
    if version_num < MINIMUM_SERVER_VERSION_NUM:
        return (
            f"the database server runs PostgreSQL {version}; Mneme needs PostgreSQL 16 or "
            f"later (with pgvector 0.8 or later): {where}"
        )
    if pgvector_version is None:
        return (
            "the database server has no pgvector extension; Mneme needs pgvector 0.8 or "
            f"later installed on the server: {where}"
        )
    if _version_tuple(pgvector_version) < MINIMUM_PGVECTOR_VERSION:
        return (
            f"the database has pgvector {pgvector_version}; Mneme needs pgvector 0.8 or later "
            "(`ALTER EXTENSION vector UPDATE` once a newer one is installed on the server)"
        )
    return None


async def refuse_unsupported_server(connection: AsyncConnection) -> None:
    """Raise `UnsupportedServer` when the server behind `connection` cannot hold the service's
    database. The migrations run it before they change anything, so a refused server is left
    as it was found."""
    row = (await connection.execute(SERVER_SOFTWARE_SQL)).one()
    problem = unsupported_server(row.server_version_num, row.server_version, row.pgvector_version)
    if problem is not None:
        raise UnsupportedServer(problem)


async def assert_database_can_serve(engine: AsyncEngine) -> None:
    """Refuse to serve on a server too old for the service's statements
    (`UnsupportedServer`), with a runtime role that could bypass row-level security
    (`PrivilegedRuntimeRole`), or on a database never migrated (`UnmigratedDatabase`)."""
    async with engine.connect() as connection:
        # A check at start-up, not a request: a busy database must not fail the start.
        await connection.exec_driver_sql(NO_STATEMENT_LIMIT_SQL)
        await refuse_unsupported_server(connection)
        row = (await connection.execute(RUNTIME_ROLE_PRIVILEGES_SQL)).one()
    if row.rolsuper or row.rolbypassrls or row.owned_tables:
        raise PrivilegedRuntimeRole(
            "the runtime database role is a superuser, has BYPASSRLS or owns tables; "
            "connect MNEME_DATABASE_URL as the non-owner runtime role "
            "(see docs/configuration.md § Database)"
        )
    if not row.migrated:
        raise UnmigratedDatabase(f"the database holds no schema of Mneme's: {MIGRATE_FIRST}")
