"""The queries a connection sends, as the driver and SQLAlchemy report them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine


async def sent_queries(connection: AsyncConnection) -> list[str]:
    """Every query sent on `connection` from now on: the driver's own (BEGIN, COMMIT, a simple
    query, a statement run on the driver) and the statements SQLAlchemy executes. Compare them
    sorted: the driver reports a query once it is done, SQLAlchemy a statement before it runs."""
    sent: list[str] = []
    raw = await connection.get_raw_connection()
    assert raw.driver_connection is not None
    # asyncpg logs the queries it runs as text, not the prepared statements SQLAlchemy runs.
    raw.driver_connection.add_query_logger(lambda record: sent.append(record.query))

    def executed(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        sent.append(statement)

    event.listen(connection.sync_engine, "before_cursor_execute", executed)
    return sent


@contextmanager
def queries_of(engine: AsyncEngine) -> Iterator[list[str]]:
    """Every query the engine's connections send while the block runs: on each connection the
    pool hands out, the driver's own queries (`sent_queries`) and SQLAlchemy's statements."""
    sent: list[str] = []
    logged: list[Any] = []

    def log(record: Any) -> None:
        sent.append(record.query)

    def checked_out(dbapi_connection: Any, *_: object) -> None:
        driver = dbapi_connection.driver_connection
        if all(driver is not each for each in logged):
            driver.add_query_logger(log)
            logged.append(driver)

    def executed(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        sent.append(statement)

    event.listen(engine.sync_engine, "before_cursor_execute", executed)
    event.listen(engine.sync_engine.pool, "checkout", checked_out)
    try:
        yield sent
    finally:
        event.remove(engine.sync_engine.pool, "checkout", checked_out)
        event.remove(engine.sync_engine, "before_cursor_execute", executed)
        for driver in logged:
            driver.remove_query_logger(log)
