"""A database that is down, restarting or out of connections is an outage, not a bug.

Requests that fail because Postgres cannot be reached get a 503 `DATABASE_UNAVAILABLE` problem
with `Retry-After`, so clients back off and retry, instead of a 500 that reads as a server
defect; a statement that ran past `statement_timeout` gets a 503 `DATABASE_TIMEOUT`; a request
that found every pooled connection in use for `MNEME_DB_POOL_TIMEOUT_SECONDS` gets a 503
`SERVICE_BUSY` (the database answers, this process has more requests than connections); a
transaction the database rolled back to end a deadlock with another gets a 503
`DATABASE_CONFLICT` (nothing of it was applied: it can be sent again). The
handlers are registered for the exception classes themselves: Starlette re-raises anything that
reaches the catch-all `Exception` handler, which makes the server drop the keep-alive
connection, and the client's next request would fail too.

Errors arrive in two forms: wrapped by SQLAlchemy (`DBAPIError`, the driver's error as its
`orig`), or as asyncpg raised them, from the statements run on the driver connection itself
(`service.db.transaction_driver`). Both are classified by their SQLSTATE.
"""

from __future__ import annotations

import logging

from asyncpg.exceptions import ConnectionDoesNotExistError, PostgresError
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from sqlalchemy import exc as sa_exc

from service.db import is_unavailable_state, raised_by_driver, server_error_of
from service.errors import (
    ServiceBusy,
    ServiceUnavailable,
    handle_domain_error,
    handle_unexpected,
)
from service.observability import count_busy_refusal

logger = logging.getLogger("mneme.errors")

# Seconds a client should wait: an embedded Postgres restarts in about this time, and a pool
# reconnects on the first request after the server is back.
RETRY_AFTER_SECONDS = 2

# query_canceled: the statement ran past `statement_timeout` (the service cancels nothing itself;
# a request whose client went away is cancelled in the driver, which raises no SQL error).
_STATEMENT_TIMEOUT_SQLSTATE = "57014"

# deadlock_detected, serialization_failure: the database rolled the transaction back so that a
# concurrent one could go on. Writes take their locks in one order (a user's write lock first),
# so neither is expected; one that still happens is the database's doing, not the request's.
_CONFLICT_SQLSTATES = frozenset({"40P01", "40001"})

# Seconds a request rolled back for a conflict should wait: the transaction it lost to has then
# long committed.
CONFLICT_RETRY_AFTER_SECONDS = 1


class DatabaseUnavailable(ServiceUnavailable):
    title = "Database unavailable"
    code = "DATABASE_UNAVAILABLE"

    def __init__(self, detail: str | None = None) -> None:
        super().__init__(
            detail or "The database cannot be reached right now; retry shortly.",
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
            retry_after_seconds=RETRY_AFTER_SECONDS,
        )


class DatabaseTimeout(ServiceUnavailable):
    title = "Database timeout"
    code = "DATABASE_TIMEOUT"

    def __init__(self) -> None:
        super().__init__(
            "The database did not finish this request within its statement time limit; retry "
            "shortly, or ask for less (a narrower filter, a smaller limit).",
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
            retry_after_seconds=RETRY_AFTER_SECONDS,
        )


class DatabaseConflict(ServiceUnavailable):
    title = "Conflict with a concurrent request"
    code = "DATABASE_CONFLICT"

    def __init__(self) -> None:
        super().__init__(
            "The database rolled this request back to let a concurrent one go on (the two "
            "waited for each other); nothing of it was applied. Send it again.",
            headers={"Retry-After": str(CONFLICT_RETRY_AFTER_SECONDS)},
            retry_after_seconds=CONFLICT_RETRY_AFTER_SECONDS,
        )


def _sqlstate(error: BaseException | None) -> str | None:
    found = server_error_of(error)
    return None if found is None else str(getattr(found, "sqlstate", ""))


def is_database_unavailable(error: BaseException) -> bool:
    """True when `error` says Postgres could not be reached, not that a statement was wrong."""
    if isinstance(error, sa_exc.DBAPIError):
        if error.connection_invalidated:
            return True
        state = _sqlstate(error.orig)
        if state is not None:
            return is_unavailable_state(state)
        # Errors the driver raises itself (socket refused, connection closed mid-operation)
        # carry no SQLSTATE.
        cause = error.orig.__cause__ if error.orig is not None else None
        return isinstance(cause, OSError | ConnectionDoesNotExistError)
    if isinstance(error, PostgresError):
        # Raised by asyncpg itself, from a statement run on the driver connection.
        return is_unavailable_state(error.sqlstate)
    if isinstance(error, OSError):
        # asyncpg's connect raises socket errors (refused, socket file gone, timed out)
        # unwrapped; the same classes raised by anything else are not a database outage.
        return raised_by_driver(error)
    return False


def outage_behind(error: BaseException) -> BaseException | None:
    """The database outage `error` is, or the one it was raised from or while handling (a
    library's clean-up that failed on the connection the outage broke), or None."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if is_database_unavailable(current):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def is_statement_timeout(error: BaseException) -> bool:
    """True when `error` is a statement cancelled by `statement_timeout`."""
    if isinstance(error, sa_exc.DBAPIError):
        return _sqlstate(error.orig) == _STATEMENT_TIMEOUT_SQLSTATE
    return isinstance(error, PostgresError) and error.sqlstate == _STATEMENT_TIMEOUT_SQLSTATE


def is_transaction_conflict(error: BaseException) -> bool:
    """True when `error` is a transaction the database rolled back to resolve a deadlock or a
    serialization failure with another: nothing of it was applied, and it may simply run
    again."""
    if isinstance(error, sa_exc.DBAPIError):
        return _sqlstate(error.orig) in _CONFLICT_SQLSTATES
    return isinstance(error, PostgresError) and error.sqlstate in _CONFLICT_SQLSTATES


def database_problem(
    error: BaseException, *, operation: str, pool_timeout_seconds: float
) -> ServiceUnavailable | None:
    """The problem a database failure of `operation` (`GET /v1/…`, `tool recall`) answers,
    whichever interface ran it (the REST API, MCP), or None when `error` is no database failure
    but a defect: a pool with no connection free in time (`SERVICE_BUSY`), the database
    unreachable (`DATABASE_UNAVAILABLE`), a statement past its time limit
    (`DATABASE_TIMEOUT`), a transaction rolled back to end a deadlock (`DATABASE_CONFLICT`)."""
    if isinstance(error, sa_exc.TimeoutError):
        # The pool had no connection to give within its timeout: every one is running a
        # statement, so the database answers; this process is the bottleneck.
        count_busy_refusal("pool_timeout")
        return ServiceBusy(f"every database connection was in use for {pool_timeout_seconds:g} s")
    if is_database_unavailable(error):
        return DatabaseUnavailable()
    if is_statement_timeout(error):
        return DatabaseTimeout()
    if is_transaction_conflict(error):
        # Logged: the locks were meant to make this impossible, and the trace says where.
        logger.warning("%s rolled back by the database (%s)", operation, error, exc_info=error)
        return DatabaseConflict()
    return None


async def _handle_database_error(request: Request, exc: Exception) -> JSONResponse:
    problem = database_problem(
        exc,
        operation=f"{request.method} {request.url.path}",
        pool_timeout_seconds=request.app.state.mneme.settings.db_pool_timeout_seconds,
    )
    if problem is None:
        return await handle_unexpected(request, exc)
    return await handle_domain_error(request, problem)


def install_outage_handlers(app: FastAPI) -> None:
    for error_class in (sa_exc.DBAPIError, sa_exc.TimeoutError, OSError, PostgresError):
        app.add_exception_handler(error_class, _handle_database_error)
