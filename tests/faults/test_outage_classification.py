"""Which database errors are an outage (503, retry) and which are a defect (500)."""

from __future__ import annotations

import pytest
from sqlalchemy import exc as sa_exc

from service.db_outage import is_database_unavailable


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


def test_an_exhausted_pool_is_an_outage() -> None:
    assert is_database_unavailable(sa_exc.TimeoutError("QueuePool limit reached"))


def test_a_socket_error_outside_the_driver_is_not_an_outage() -> None:
    with pytest.raises(ConnectionRefusedError) as raised:
        raise ConnectionRefusedError("some other service")
    assert not is_database_unavailable(raised.value)
