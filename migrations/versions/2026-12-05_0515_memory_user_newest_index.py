"""An index of each user's memories newest first, for listing them a page at a time.

A listing (`GET …/memories`, the Memory page) shows a user's memories newest first, filtered
by lifecycle and often by kind or category. The owner's index is ordered by kind and lifecycle
before the time, so every page sorted all of the user's matching memories: 161 ms for the
first page of an owner of 100,000 memories against 12 ms at 1,000. On this index a page reads
the user's memories in time order and stops when it is full. (Its name must not start with
`ix_memory_owner_`: the owners' own vector indexes go by that prefix, and their keeper drops
every index so named that it did not build.)

Revision ID: 20261205_0515
Revises: 20261205_0420
Create Date: 2026-12-05 05:15:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "20261205_0515"
down_revision: str | None = "20261205_0420"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX ix_memory_user_newest ON memory "
        "(tenant_id, user_id, created_at DESC, id DESC)"
    )


def downgrade() -> None:
    op.drop_index("ix_memory_user_newest", table_name="memory")
