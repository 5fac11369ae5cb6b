"""Memories of one source thread in the order they happened: the index search uses to find the
turn right before and right after a candidate (and that deleting a thread's memories uses).

Revision ID: 20261130_1500
Revises: 20261130_1400
Create Date: 2026-11-30 15:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261130_1500"
down_revision: str | None = "20261130_1400"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_memory_thread_order",
        "memory",
        [
            "tenant_id",
            "source_thread_id",
            sa.text("coalesce(event_at, created_at)"),
            "id",
        ],
        postgresql_where=sa.text("source_thread_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_memory_thread_order", table_name="memory")
