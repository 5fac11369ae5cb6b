"""The owner's memories in ix_memory_lexical ordered by kind, lifecycle, category and time, so
that a filter by any of them finds its memories without reading the owner's others.

A search filtered to a category or a time window, of an owner with vector indexes of its own,
walked the owner's graph until enough of the memories it visited passed the filter: when few
do, up to `hnsw.max_scan_tuples` of them (130 ms for one category at 100,000 memories against
10 ms at 1,000). It now counts the memories that pass, in this index, and sorts them exactly
when they are few. For that, the filter's conditions must be the index's keys: the owner
(tenant, scope, user), then kind, lifecycle, category and `happened_at` (the event time a
window filters, a stored column: under row-level security only a leakproof comparison of a
column is an index condition). PostgreSQL's skip scan serves a filter that leaves out a key
before another, over the few lifecycles and categories of a kind. The index holds the same
entries as before, reordered; `event_at` is no longer included (a filter reads `happened_at`,
which holds it).

Revision ID: 20261205_0700
Revises: 20261205_0515
Create Date: 2026-12-05 07:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "20261205_0700"
down_revision: str | None = "20261205_0515"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

KEYS = "tenant_id, scope, user_id, kind, lifecycle, category, happened_at"
INCLUDED = "id, expires_at, created_at, tsv_length"

EARLIER_INCLUDED = "id, kind, category, lifecycle, expires_at, created_at, event_at, tsv_length"


def upgrade() -> None:
    op.drop_index("ix_memory_lexical", table_name="memory")
    op.execute(f"CREATE INDEX ix_memory_lexical ON memory ({KEYS}) INCLUDE ({INCLUDED})")


def downgrade() -> None:
    op.drop_index("ix_memory_lexical", table_name="memory")
    op.execute(
        "CREATE INDEX ix_memory_lexical ON memory (tenant_id, scope, user_id) "
        f"INCLUDE ({EARLIER_INCLUDED})"
    )
