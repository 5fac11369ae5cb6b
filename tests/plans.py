"""Reading EXPLAIN (FORMAT JSON) plans in tests: the statements an engine sends, to explain
them, and every node of a plan, to count what its scans did."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from service.db import NO_STATEMENT_LIMIT_SQL
from service.memories.vector_columns import LOAD_COLUMNS_SQL, LOAD_SWITCHED_SQL

BACKGROUND_REFRESH = frozenset(
    {NO_STATEMENT_LIMIT_SQL, LOAD_COLUMNS_SQL.text, LOAD_SWITCHED_SQL.text}
)
"""What the app's refresh of the vector columns' state sends on its engine every few seconds
(`vector_columns.load_state`), whatever the requests are doing."""


def sent_by_requests(sent: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """`sent` (`statements_sent` of the app's engine) without the background refresh's."""
    return [each for each in sent if each[0] not in BACKGROUND_REFRESH]


@contextmanager
def statements_sent(engine: AsyncEngine) -> Iterator[list[tuple[str, Any]]]:
    """The statements `engine` sends while the block runs, each with its parameters, as the
    driver receives them (placeholders `$n`)."""
    sent: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        sent.append((statement, parameters))

    event.listen(engine.sync_engine, "before_cursor_execute", capture)
    try:
        yield sent
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", capture)


def plan_nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The plan node and every node under it, depth first."""
    return [plan, *(node for child in plan.get("Plans", []) for node in plan_nodes(child))]


async def tenant_plan(
    engine: AsyncEngine,
    tenant: str,
    sent: tuple[str, Any],
    *settings: str,
    analyze: bool = False,
) -> list[dict[str, Any]]:
    """Every node of the plan of a statement as `statements_sent` captured it, explained
    (FORMAT JSON; with `analyze`, run too, so that each node has its actual rows and loops)
    with its parameters in a transaction of `tenant`, after the `settings` statements
    (`SET LOCAL …`)."""
    statement, parameters = sent
    options = "ANALYZE, FORMAT JSON" if analyze else "FORMAT JSON"
    async with engine.connect() as connection:
        raw = (await connection.get_raw_connection()).driver_connection
        assert raw is not None
        async with raw.transaction():
            await raw.execute(f"SELECT set_config('app.tenant_id', '{tenant}', true)")
            for setting in settings:
                await raw.execute(setting)
            explained = await raw.fetchval(f"EXPLAIN ({options}) " + statement, *parameters)
    # The service's connections decode JSON themselves.
    [plan] = json.loads(explained) if isinstance(explained, str) else explained
    return plan_nodes(plan["Plan"])
