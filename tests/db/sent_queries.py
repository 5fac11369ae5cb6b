"""The queries a connection sends, as the driver and SQLAlchemy report them."""

from __future__ import annotations

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncConnection


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
