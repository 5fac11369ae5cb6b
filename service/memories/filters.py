"""Which memories a read or a delete is about: one filter, turned into SQL in one place.

List, count, delete-by-filter and the candidate sets of search all take a `MemoryFilter`
and render it with `MemoryFilter.where()`, so the rows a filtered delete removes are exactly
the rows the same filter lists. Only the conditions a filter sets reach the statement: the
planner sees a specific predicate instead of "$1 IS NULL OR …".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime

from sqlalchemy import ARRAY, BindParameter, DateTime, Text, TextClause, bindparam, text

from service.auth.owner import Owner

LIVE_LIFECYCLES: tuple[str, ...] = ("proposed", "confirmed")
"""What reads show unless asked otherwise: superseded memories are history, not knowledge."""


def unexpired(alias: str) -> str:
    """SQL true for a memory (`memory AS alias`) whose `expires_at` has not passed: one past it
    is gone for every reader (reads, exports, counts) at once, before the retention sweep
    removes it."""
    return f"({alias}.expires_at IS NULL OR {alias}.expires_at > now())"


@dataclass(frozen=True)
class Predicate:
    """A SQL condition and the values it binds, to use alone or inside a larger statement."""

    sql: str
    binds: tuple[BindParameter[object], ...]

    @property
    def clause(self) -> TextClause:
        return text(self.sql).bindparams(*self.binds)


@dataclass(frozen=True)
class MemoryFilter:
    """Memories of any of `owners` that match every condition given (None = no condition).

    Expired memories (`expires_at` in the past) never match: they are gone for every reader.
    """

    owners: tuple[Owner, ...]
    kinds: tuple[str, ...] | None = None
    categories: tuple[str, ...] | None = None
    lifecycles: tuple[str, ...] | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    event_after: datetime | None = None
    event_before: datetime | None = None

    @classmethod
    def build(
        cls,
        owners: Sequence[Owner],
        *,
        kinds: Sequence[str] | None = None,
        categories: Sequence[str] | None = None,
        lifecycles: Sequence[str] | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        event_after: datetime | None = None,
        event_before: datetime | None = None,
    ) -> MemoryFilter:
        """A filter from optional lists (None: no condition). An empty list is a condition no
        memory meets, as no owner is: read as "any", it would turn a delete of nothing into a
        delete of everything."""
        return cls(
            owners=tuple(dict.fromkeys(owners)),
            kinds=None if kinds is None else tuple(kinds),
            categories=None if categories is None else tuple(categories),
            lifecycles=None if lifecycles is None else tuple(lifecycles),
            created_after=created_after,
            created_before=created_before,
            event_after=event_after,
            event_before=event_before,
        )

    def live_unless_asked(self) -> MemoryFilter:
        """This filter, limited to live memories when it names no lifecycle."""
        if self.lifecycles is not None:
            return self
        return replace(self, lifecycles=LIVE_LIFECYCLES)

    @property
    def passes_part_of_a_kind(self) -> bool:
        """True when the filter may pass only a few of an owner's memories of one kind: it
        names categories, a time bound, or lifecycles without the confirmed one (which most
        memories are: what the API writes is confirmed unless it says otherwise). A vector
        index walked for such a filter may visit many memories for each one that passes."""
        return (
            self.categories is not None
            or (self.lifecycles is not None and "confirmed" not in self.lifecycles)
            or self.bounds_time
        )

    @property
    def bounds_time(self) -> bool:
        """True when the filter names a bound of its memories' creation or event time."""
        return any(
            bound is not None
            for bound in (
                self.created_after,
                self.created_before,
                self.event_after,
                self.event_before,
            )
        )

    def of_kinds_only(self) -> MemoryFilter:
        """This filter without what passes only part of a kind (`passes_part_of_a_kind`): the
        same owners and kinds, any lifecycle, any time."""
        return replace(
            self,
            categories=None,
            lifecycles=None,
            created_after=None,
            created_before=None,
            event_after=None,
            event_before=None,
        )

    @property
    def has_conditions(self) -> bool:
        """True when anything besides the owner narrows the set."""
        return any(getattr(self, f.name) is not None for f in fields(self) if f.name != "owners")

    def is_disjoint(self, other: MemoryFilter) -> bool:
        """True when no memory can match both filters: they share no owner, or both name
        kinds, categories or lifecycles and share none of them (a sufficient test only)."""
        if not set(self.owners) & set(other.owners):
            return True
        return any(
            mine is not None and theirs is not None and not set(mine) & set(theirs)
            for mine, theirs in (
                (self.kinds, other.kinds),
                (self.categories, other.categories),
                (self.lifecycles, other.lifecycles),
            )
        )

    def where(
        self,
        tenant_id: str,
        alias: str = "m",
        prefix: str = "f_",
        *,
        owner_literal: Callable[[str], str] | None = None,
        org_without_user: bool = False,
        one_user_as_value: bool = False,
    ) -> Predicate:
        """The filter as a SQL predicate over `memory AS <alias>`, with its own bound values.

        `prefix` keeps its parameter names apart from the statement it is embedded in. With
        `owner_literal` (a driver's quoting of a string as a SQL literal), the tenant and the
        users are written into the SQL as values instead of bound: a plan made once for the
        statement then knows whose memories it reads (see `fusion.PlannedSearch`). With
        `org_without_user`, the organization's memories are stated as those without a user
        (the same rows, by the table's constraint), which the planner estimates by the user
        column alone (stated by scope as well, it multiplies the two and expects a few rows of
        a large organization's thousands), and which the index of the organization's memories
        alone serves (`ix_memory_org_newest`, partial to them): a plan made for any tenant
        reads them there, not through the tenant's every memory. With `one_user_as_value`, a
        filter of one user binds that user as a value (`user_id = :…user_id`), not as an array
        of one: a generic plan prices a bound array at ten values, ten ranges of every index
        keyed by the user, and may prefer an index that reads the whole tenant instead.
        """
        m, p = alias, prefix
        binds: list[BindParameter[object]] = []
        if owner_literal is None:
            conditions = [f"{m}.tenant_id = :{p}tenant_id"]
            binds.append(bindparam(f"{p}tenant_id", tenant_id, type_=Text()))
        else:
            conditions = [f"{m}.tenant_id = {owner_literal(tenant_id)}"]
        owner_conditions = []
        user_ids = [o.user_id for o in self.owners if not o.is_org and o.user_id is not None]
        if user_ids and owner_literal is not None:
            written = ", ".join(owner_literal(user_id) for user_id in user_ids)
            owner_conditions.append(f"({m}.scope = 'user' AND {m}.user_id IN ({written}))")
        elif one_user_as_value and len(user_ids) == 1:
            owner_conditions.append(f"({m}.scope = 'user' AND {m}.user_id = :{p}user_id)")
            binds.append(bindparam(f"{p}user_id", user_ids[0], type_=Text()))
        elif user_ids:
            owner_conditions.append(f"({m}.scope = 'user' AND {m}.user_id = ANY(:{p}user_ids))")
            binds.append(bindparam(f"{p}user_ids", user_ids, type_=ARRAY(Text())))
        if any(o.is_org for o in self.owners):
            owner_conditions.append(
                f"{m}.user_id IS NULL" if org_without_user else f"{m}.scope = 'org'"
            )
        # No owner at all matches nothing (never "everything").
        conditions.append("(" + (" OR ".join(owner_conditions) or "false") + ")")
        for column, values in (
            ("kind", self.kinds),
            ("category", self.categories),
            ("lifecycle", self.lifecycles),
        ):
            if values is not None:
                conditions.append(f"{m}.{column} = ANY(:{p}{column})")
                binds.append(bindparam(f"{p}{column}", list(values), type_=ARRAY(Text())))
        conditions.append(unexpired(m))
        # A memory without an event time happened when it was recorded: `happened_at` is
        # coalesce(event_at, created_at), stored. Compared as a column, the bound is
        # leakproof, so under row-level security an index on it serves the condition.
        event_time = f"{m}.happened_at"
        for name, expression, operator in (
            ("created_after", f"{m}.created_at", ">="),
            ("created_before", f"{m}.created_at", "<"),
            ("event_after", event_time, ">="),
            ("event_before", event_time, "<"),
        ):
            value = getattr(self, name)
            if value is not None:
                conditions.append(f"{expression} {operator} :{p}{name}")
                binds.append(bindparam(f"{p}{name}", value, type_=DateTime(timezone=True)))
        return Predicate("\n    AND ".join(conditions), tuple(binds))
