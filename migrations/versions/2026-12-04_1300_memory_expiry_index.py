"""An index of the memories that carry an expiry, for the hourly retention sweep.

The sweep removes each tenant's expired memories. No index led with what it tests, so for a
tenant of 100,000 memories it read the whole table every hour (365 ms on a development machine)
to find the few, or none, whose `expires_at` has passed: the work grew with everything the
tenant remembers, not with what expired. The index is partial to the memories that carry an
expiry (most carry none), so it stays small and a write without an expiry never touches it.

Revision ID: 20261204_1300
Revises: 20261204_0500
Create Date: 2026-12-04 13:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "20261204_1300"
down_revision: str | None = "20261204_0500"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX ix_memory_expiry ON memory (tenant_id, expires_at) "
        "WHERE expires_at IS NOT NULL"
    )


def downgrade() -> None:
    op.drop_index("ix_memory_expiry", table_name="memory")
