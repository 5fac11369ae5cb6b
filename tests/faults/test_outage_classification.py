"""Which database errors are an outage (503, retry), which are a conflict with a concurrent
transaction (503, send again) and which are a defect (500)."""

from __future__ import annotations

import asyncpg.exceptions as asyncpg_errors
import pytest
from sqlalchemy import exc as sa_exc

from service.db_outage import (
    is_database_unavailable,
    is_statement_timeout,
    is_transaction_conflict,
    outage_behind,
)


class _DriverError(Exception):
    def __init__(self, sqlstate: str | None) -> None:
        super().__init__("driver error")
        self.sqlstate = sqlstate


def _dbapi_error(sqlstate: str | None) -> sa_exc.DBAPIError:
    return sa_exc.DBAPIError("SELECT 1", None, _DriverError(sqlstate))


@pytest.mark.parametrize(
    "sqlstate",
    [
        "08006",  # connection failure
        "08001",  # unable to establish a connection
        "57P01",  # admin shutdown
        "57P02",  # crash shutdown
        "57P03",  # cannot connect now (starting up)
        "53300",  # too many connections
    ],
)
def test_connection_sqlstates_are_an_outage(sqlstate: str) -> None:
    assert is_database_unavailable(_dbapi_error(sqlstate))


@pytest.mark.parametrize("sqlstate", ["23505", "42P01", "22003", "40001"])
def test_statement_errors_are_not_an_outage(sqlstate: str) -> None:
    assert not is_database_unavailable(_dbapi_error(sqlstate))


def test_an_exhausted_pool_is_not_an_outage() -> None:
    # Every connection is busy running statements: the database answers (503 SERVICE_BUSY).
    assert not is_database_unavailable(sa_exc.TimeoutError("QueuePool limit reached"))


def test_a_socket_error_outside_the_driver_is_not_an_outage() -> None:
    with pytest.raises(ConnectionRefusedError) as raised:
        raise ConnectionRefusedError("some other service")
    assert not is_database_unavailable(raised.value)


@pytest.mark.parametrize(
    "error",
    [
        asyncpg_errors.ConnectionDoesNotExistError("connection was closed in the middle"),
        asyncpg_errors.AdminShutdownError("terminating connection due to administrator command"),
        asyncpg_errors.TooManyConnectionsError("sorry, too many clients already"),
    ],
)
def test_the_drivers_own_connection_errors_are_an_outage(error: Exception) -> None:
    """Statements run on the asyncpg connection itself raise asyncpg's errors unwrapped."""
    assert is_database_unavailable(error)
    assert not is_statement_timeout(error)


@pytest.mark.parametrize(
    "error",
    [
        asyncpg_errors.UniqueViolationError("duplicate key"),
        asyncpg_errors.UndefinedTableError("relation does not exist"),
    ],
)
def test_the_drivers_own_statement_errors_are_not_an_outage(error: Exception) -> None:
    assert not is_database_unavailable(error)
    assert not is_statement_timeout(error)


def test_a_statement_timeout_is_recognised_wrapped_or_not() -> None:
    raw = asyncpg_errors.QueryCanceledError("canceling statement due to statement timeout")
    assert is_statement_timeout(raw)
    assert is_statement_timeout(_dbapi_error("57014"))
    assert not is_database_unavailable(raw)
    assert not is_statement_timeout(_dbapi_error("40001"))


@pytest.mark.parametrize("sqlstate", ["40P01", "40001"])
def test_a_deadlock_or_serialization_failure_is_a_conflict_wrapped_or_not(sqlstate: str) -> None:
    assert is_transaction_conflict(_dbapi_error(sqlstate))
    raw = (
        asyncpg_errors.DeadlockDetectedError("deadlock detected")
        if sqlstate == "40P01"
        else asyncpg_errors.SerializationError("could not serialize access")
    )
    assert is_transaction_conflict(raw)
    assert not is_database_unavailable(raw)
    assert not is_statement_timeout(raw)


@pytest.mark.parametrize("sqlstate", ["23503", "23505", "57014", "08006"])
def test_other_errors_are_not_a_conflict(sqlstate: str) -> None:
    assert not is_transaction_conflict(_dbapi_error(sqlstate))


def test_an_error_raised_while_handling_an_outage_leads_back_to_it() -> None:
    # A library's clean-up that fails on the connection the outage broke raises its own error.
    closed = asyncpg_errors.ConnectionDoesNotExistError("connection was closed in the middle")
    clean_up = asyncpg_errors.InterfaceError("connection has been released back to the pool")
    clean_up.__context__ = closed
    assert not is_database_unavailable(clean_up)
    assert outage_behind(clean_up) is closed
    assert outage_behind(RuntimeError("a defect")) is None
