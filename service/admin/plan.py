"""Which rows of which table belong to a user, worked out from the database catalogue.

Purge and export must reach every table that holds a user's rows, including tables added after
this code was written. So the list is not written down here: `build_plan` classifies every
table under row-level security from what the catalogue says about it, and refuses
(`UncoveredTables`) when a table fits none of the rules below. A migration that adds a
user-bearing table therefore either fits a rule (and is purged and exported with no code
change) or makes purge fail loudly — and `tests/admin/test_purge.py` fail — until it is
classified.

The rules, in the order they are tried:

* `account` — `user_account`, the user itself (key column `id`);
* `owner` — a table with a `user_id` column: the rows whose `user_id` is the user;
* `parent` — a table whose foreign key `(tenant_id, X)` references the key `(tenant_id, id)`
  of an `account` or `owner` table: the rows whose `X` is one of the user's parent rows (a
  thread's summaries and extraction cursor);
* `SPECIAL_TABLES` — two tables whose rows name the user in other ways (idempotency records by
  principal and path, audit entries by target), each handled by its own statement;
* `NOT_USER_DATA` — tables that hold no row of any one user, each with the reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

ACCOUNT_TABLE = "user_account"
USER_COLUMN = "user_id"
TENANT_COLUMN = "tenant_id"

IDEMPOTENCY_TABLE = "idempotency_record"
AUDIT_TABLE = "audit_log"
SPECIAL_TABLES = frozenset({IDEMPOTENCY_TABLE, AUDIT_TABLE})

NOT_USER_DATA: Mapping[str, str] = {
    "tenant": "the tenant itself; removed only by a tenant purge",
    "retention_policy": "the tenant's retention settings",
    "api_key": "service credentials of the tenant, never issued to a user; `created_by` names "
    "the admin who created the key and is kept for accountability",
}

DERIVED_TABLES: Mapping[str, str] = {
    "memory_posting": "the search's postings of each memory, written from its text",
    "memory_owner_stats": "the search's statistics of an owner's memories, recounted from them",
    "memory_lexeme_stats": "the search's document counts of an owner's common lexemes",
}
"""User-bearing tables whose rows are computed from other tables: purged with the user (they
repeat the user's words), but never exported; an import rebuilds them from what it restores."""

RuleKind = Literal["account", "owner", "parent"]


@dataclass(frozen=True, slots=True)
class ForeignKey:
    columns: tuple[str, ...]
    parent: str
    parent_columns: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CatalogueTable:
    """What the catalogue says about one table under row-level security."""

    name: str
    columns: tuple[str, ...]
    column_types: Mapping[str, str]
    generated: frozenset[str]
    primary_key: tuple[str, ...]
    foreign_keys: tuple[ForeignKey, ...] = ()
    not_null: frozenset[str] = frozenset()
    defaulted: frozenset[str] = frozenset()
    """Columns with a default (generated columns are not among them)."""
    rules: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Each constraint and unique index of the table, by name, with the columns it reads: what
    a refusal by the database names, said in columns."""

    @property
    def required(self) -> frozenset[str]:
        """The columns a new row must be given: never null, with no default."""
        return self.not_null - self.defaulted - self.generated


@dataclass(frozen=True, slots=True)
class TableRule:
    """How to find a user's rows in one table: `column` compared with the user id, or (for
    `parent`) with the keys of the user's rows in `parent`."""

    table: CatalogueTable
    kind: RuleKind
    column: str
    parent: str | None = None
    parent_key: str | None = None

    @property
    def name(self) -> str:
        return self.table.name


@dataclass(frozen=True)
class PurgePlan:
    """Every user-bearing table with its rule, ordered so that a table comes before the tables
    it references (deleting in this order counts each table's own rows, not cascades)."""

    rules: tuple[TableRule, ...]
    special: tuple[CatalogueTable, ...]
    tables: Mapping[str, CatalogueTable] = field(default_factory=dict)

    @property
    def parents(self) -> tuple[str, ...]:
        """Tables whose keys `parent` rules need, collected before anything is deleted."""
        return tuple(dict.fromkeys(r.parent for r in self.rules if r.parent is not None))

    def rule(self, table: str) -> TableRule:
        return next(r for r in self.rules if r.name == table)

    @property
    def exported(self) -> tuple[TableRule, ...]:
        """The rules of the tables an export carries: every one but `DERIVED_TABLES`."""
        return tuple(r for r in self.rules if r.name not in DERIVED_TABLES)

    @property
    def export_order(self) -> tuple[TableRule, ...]:
        """Exported tables, referenced tables first, so an import inserts parents before
        children."""
        return tuple(reversed(self.exported))


class UncoveredTables(RuntimeError):
    """Tables under row-level security that no purge rule covers."""

    def __init__(self, names: Sequence[str]) -> None:
        super().__init__(
            "tables under row-level security that purge does not know how to cover: "
            + ", ".join(names)
            + " (give them a user_id column, a foreign key to a user-bearing table, or "
            "classify them in service/admin/plan.py)"
        )
        self.names = tuple(names)


def build_plan(tables: Iterable[CatalogueTable]) -> PurgePlan:
    """Classify every table (see the module docstring); `UncoveredTables` if any is left."""
    by_name = {t.name: t for t in tables}
    rules: dict[str, TableRule] = {}
    for table in by_name.values():
        if table.name == ACCOUNT_TABLE:
            rules[table.name] = TableRule(table, "account", "id")
        elif table.name not in SPECIAL_TABLES and USER_COLUMN in table.columns:
            rules[table.name] = TableRule(table, "owner", USER_COLUMN)
    direct = set(rules)
    uncovered = []
    for table in by_name.values():
        if table.name in rules or table.name in SPECIAL_TABLES or table.name in NOT_USER_DATA:
            continue
        parent_rule = _parent_rule(table, direct)
        if parent_rule is None:
            uncovered.append(table.name)
        else:
            rules[table.name] = parent_rule
    if uncovered:
        raise UncoveredTables(sorted(uncovered))
    ordered = _children_first(rules)
    special = tuple(by_name[name] for name in sorted(SPECIAL_TABLES) if name in by_name)
    return PurgePlan(rules=ordered, special=special, tables=by_name)


def _parent_rule(table: CatalogueTable, direct: set[str]) -> TableRule | None:
    for key in table.foreign_keys:
        if key.parent not in direct or len(key.columns) != 2:
            continue
        if key.columns[0] != TENANT_COLUMN or key.parent_columns[0] != TENANT_COLUMN:
            continue
        return TableRule(table, "parent", key.columns[1], key.parent, key.parent_columns[1])
    return None


def _children_first(rules: Mapping[str, TableRule]) -> tuple[TableRule, ...]:
    """Order the rules so that every table precedes the tables it references."""
    order = children_first({name: rule.table for name, rule in rules.items()})
    return tuple(rules[name] for name in order)


def children_first(tables: Mapping[str, CatalogueTable]) -> list[str]:
    """Table names ordered so that every table precedes the tables (of `tables`) it
    references: deleting in this order never relies on a cascade."""
    referenced_by: dict[str, set[str]] = {name: set() for name in tables}
    for name, table in tables.items():
        for key in table.foreign_keys:
            if key.parent in tables and key.parent != name:
                referenced_by[key.parent].add(name)
    ordered: list[str] = []
    placed: set[str] = set()
    while len(ordered) < len(tables):
        ready = sorted(
            name
            for name, children in referenced_by.items()
            if name not in placed and children <= placed
        )
        if not ready:
            raise RuntimeError("foreign keys between the tables form a cycle")
        ordered.extend(ready)
        placed.update(ready)
    return ordered


def quote_identifier(name: str) -> str:
    """A catalogue name as a SQL identifier (double-quoted, quotes doubled)."""
    return '"' + name.replace('"', '""') + '"'
