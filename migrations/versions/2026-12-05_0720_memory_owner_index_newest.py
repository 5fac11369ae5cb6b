"""`ix_memory_owner` ordered by time within each kind, so that a page of one kind of a user's
memories (the Memory page's tabs, `GET …/memories?kind=…`) is read in order and stops when
it is full.

The index held a user's memories by kind, then lifecycle, then time: a listing of one kind
asks for two lifecycles (proposed and confirmed, the live ones), whose time orders the index
cannot merge, so the page was read from the index of all the user's memories newest first,
passing every memory of the other kinds: 48.6 ms for the first page of an owner's facts at
100,000 memories, whose newest 41,676 were turns, against 9 ms unfiltered. Keyed by kind and
then time, with the lifecycle included, the same page reads 51 entries. Searches and context
blocks send the same statements and read the same buffers with either index (measured on the
benchmarks' scenario, docs/benchmarks.md).

Revision ID: 20261205_0720
Revises: 20261205_0700
Create Date: 2026-12-05 07:20:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "20261205_0720"
down_revision: str | None = "20261205_0700"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index("ix_memory_owner", table_name="memory")
    op.execute(
        "CREATE INDEX ix_memory_owner ON memory "
        "(tenant_id, user_id, kind, created_at DESC, id DESC) INCLUDE (lifecycle)"
    )


def downgrade() -> None:
    op.drop_index("ix_memory_owner", table_name="memory")
    op.execute(
        "CREATE INDEX ix_memory_owner ON memory "
        "(tenant_id, user_id, kind, lifecycle, created_at DESC)"
    )
