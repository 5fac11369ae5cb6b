"""What every repository stands on: the request's session and the tenant its statements are
scoped to, plus the tenant-scoped get / update / delete by id that tables keyed by
`(tenant_id, id)` share.

Row-level security already confines a transaction to its tenant; the explicit `tenant_id`
condition is what lets Postgres (and Citus) use the primary key and route to one shard.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar, cast

from sqlalchemy import (
    ColumnElement,
    CursorResult,
    DateTime,
    Result,
    Select,
    any_,
    bindparam,
    delete,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, QueryableAttribute
from sqlalchemy.sql.dml import ReturningUpdate


def rowcount(result: Result[Any]) -> int:
    """The rows an UPDATE or DELETE matched. `execute` types every result as `Result`; the
    result of a data-changing statement is a `CursorResult`, which counts them."""
    return int(cast(CursorResult[Any], result).rowcount)


ValueT = TypeVar("ValueT")


def one_of(
    column: ColumnElement[ValueT] | QueryableAttribute[ValueT], values: Iterable[ValueT]
) -> ColumnElement[bool]:
    """`column = ANY(:values)`, the values bound as one array. `column IN (…)` binds a parameter
    per value, and a statement carries at most 32,767 of them: a list that grows with what a
    user stores (their memories, a thread's messages) must be bound as one."""
    element = column if isinstance(column, ColumnElement) else column.expression
    array = ARRAY(element.type)
    # Cast, so the array keeps its type wherever the statement is rendered with its values.
    return element == any_(bindparam(None, list(values), type_=array).cast(array))


TRANSACTION_LOCK_SQL = text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))")
"""An advisory lock on a name, held until the transaction ends."""

SHARED_TRANSACTION_LOCK_SQL = text("SELECT pg_advisory_xact_lock_shared(hashtextextended(:key, 0))")
"""The same lock taken shared: any number of transactions hold it together, and while any does,
one that takes it alone (`TRANSACTION_LOCK_SQL`) waits; one that waits for it alone goes
first of those that come after it."""


CHANGE_TIME_SQL = text(
    "SELECT greatest(clock_timestamp(), CAST(:after AS timestamptz) + interval '1 microsecond')"
).bindparams(bindparam("after", type_=DateTime(timezone=True)))
"""The time of a change to rows the transaction holds locked, the latest of which last changed
at `after`: the clock's time as the change is made, and later than `after` in any case (a clock
set back, or another Citus coordinator's behind this one's).

Not `now()`, which is when the transaction began: one that began first but took the rows' lock
after another transaction changed them would write an earlier time than that change. Nor
`clock_timestamp()` inside the UPDATE or INSERT: Citus refuses a volatile function there (and
a stable one over the row's columns) in a statement on a distributed table, while a statement
on no table at all it runs on the coordinator as it is. The caller sends the time it reads as a
value to the statements of the change."""

CUSTOM_PLANS_SQL = text("SET LOCAL plan_cache_mode = force_custom_plan")
DEFAULT_PLANS_SQL = text("SET LOCAL plan_cache_mode TO DEFAULT")
NO_SORTS_SQL = text("SET LOCAL enable_sort = off")
SORTS_SQL = text("SET LOCAL enable_sort TO DEFAULT")


class TenantRepository:
    """A repository of one request: its session and the tenant every statement is scoped to."""

    def __init__(self, session: AsyncSession, tenant_id: str) -> None:
        self._session = session
        self._tenant_id = tenant_id

    async def change_time(self, after: datetime) -> datetime:
        """When a change to rows the transaction holds locked, the latest last changed at
        `after`, is made (`CHANGE_TIME_SQL`): read after the lock, so the changes of a row are
        timed in the order they are made."""
        result = await self._session.execute(CHANGE_TIME_SQL, {"after": after})
        time: datetime = result.scalar_one()
        return time

    @asynccontextmanager
    async def planned_for_its_values(self, *, in_index_order: bool = False) -> AsyncIterator[None]:
        """Plan each statement of the block for the values it is sent with. A statement the
        driver has prepared is planned once for any values after its fifth run when PostgreSQL
        finds that plan no costlier; for a statement whose best plan depends on the owner (an
        owner's own vector index, a partial index whose condition the values decide) that
        plan can be ten times slower.

        `in_index_order`: a statement with an ORDER BY that an index gives is read in that
        order rather than sorted, whatever the planner estimates of how many rows match. For a
        page of rows that nearly all match, a sort reads every one where the ordered read stops
        at the page; the planner estimates an owner's rows from the whole table (5,000 of the
        organization's memories counted as 44), and with so few a sort looks as cheap."""
        await self._session.execute(CUSTOM_PLANS_SQL)
        if in_index_order:
            await self._session.execute(NO_SORTS_SQL)
        # Reset when the block succeeded only: a statement that failed (cancelled past its time
        # limit, say) aborted the transaction, which then refuses any other statement until it
        # rolls back (its SET LOCALs with it), so a reset would fail in the failure's place.
        yield
        await self._session.execute(DEFAULT_PLANS_SQL)
        if in_index_order:
            await self._session.execute(SORTS_SQL)

    async def hold_lock(self, key: str, *, shared: bool = False) -> None:
        """Wait for, then hold until the transaction ends, the lock named `key` (writers of
        the same thing name the same key; nothing else waits on it). `shared`: alongside the
        others that hold it shared, but never alongside one holding it alone."""
        statement = SHARED_TRANSACTION_LOCK_SQL if shared else TRANSACTION_LOCK_SQL
        await self._session.execute(statement, {"key": key})


IdT = TypeVar("IdT", uuid.UUID, str)


class TenantRow(Protocol):
    """A mapped table keyed by `(tenant_id, id)` (the repository names the id's type)."""

    tenant_id: Mapped[str]
    id: Mapped[Any]


RowT = TypeVar("RowT", bound=TenantRow)


class TenantRowRepository(TenantRepository, Generic[RowT, IdT]):
    """A repository whose table is keyed by `(tenant_id, id)`: its statements start from
    `scoped`, and a row is read, changed or deleted by id within the tenant. Extra
    `conditions` narrow each (e.g. the owning user), so a row outside them is not found."""

    model: type[RowT]

    def scoped(self, *conditions: ColumnElement[bool]) -> Select[RowT]:
        """The tenant's rows of the table that meet `conditions`."""
        return select(self.model).where(self.model.tenant_id == self._tenant_id, *conditions)

    async def get_by_id(
        self, row_id: IdT, *conditions: ColumnElement[bool], for_update: bool = False
    ) -> RowT | None:
        """The row; with `for_update`, locked until the transaction ends, and as it is now
        rather than as an earlier statement of this transaction loaded it."""
        statement = self.scoped(self.model.id == row_id, *conditions)
        if for_update:
            statement = statement.with_for_update().execution_options(populate_existing=True)
        return (await self._session.execute(statement)).scalar_one_or_none()

    async def update_by_id(self, row_id: IdT, values: dict[str, Any]) -> RowT:
        """Set `values` on the row, which must exist (the caller holds its lock), and return
        it as written."""
        return (await self._session.execute(self._update(row_id, values))).scalar_one()

    async def update_if(
        self, row_id: IdT, values: dict[str, Any], *conditions: ColumnElement[bool]
    ) -> RowT | None:
        """Set `values` on the row if it meets `conditions`; the row as written, or None."""
        statement = self._update(row_id, values, *conditions)
        return (await self._session.execute(statement)).scalar_one_or_none()

    def _update(
        self, row_id: IdT, values: dict[str, Any], *conditions: ColumnElement[bool]
    ) -> ReturningUpdate[RowT]:
        return (
            update(self.model)
            .where(self.model.tenant_id == self._tenant_id, self.model.id == row_id, *conditions)
            .values(**values)
            .returning(self.model)
            # The row may already sit in the identity map: refresh it from what was written.
            .execution_options(synchronize_session=False, populate_existing=True)
        )

    async def delete_by_id(self, row_id: IdT, *conditions: ColumnElement[bool]) -> int:
        """Delete the row; how many rows went (0 or 1)."""
        result = await self._session.execute(
            delete(self.model)
            .where(self.model.tenant_id == self._tenant_id, self.model.id == row_id, *conditions)
            .execution_options(synchronize_session=False)
        )
        return rowcount(result)
