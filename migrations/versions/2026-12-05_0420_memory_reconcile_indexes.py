"""Indexes for the write path's read of what a new memory meets: its exact duplicate, and the
facts that name a subject.

A new fact is reconciled with a live memory of the same text and with the facts of its
category that have its subject (the key the write path normalises a subject to: `home_city`).
Under row-level security an index serves only leakproof comparisons of plain columns, so the
unique index of live content (keyed by an expression of the user) could not find the
duplicate, and each was found by testing every memory of the owner: a read that grew with
everything the owner remembers. `ix_memory_content` finds a text's memories by its hash;
`ix_memory_subjects` holds, per owner and category, only the semantic memories whose
metadata names a subject (the reader compares their keys).

Revision ID: 20261205_0420
Revises: 20261204_2115
Create Date: 2026-12-05 04:20:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "20261205_0420"
down_revision: str | None = "20261204_2115"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("CREATE INDEX ix_memory_content ON memory (tenant_id, content_hash)")
    op.execute(
        "CREATE INDEX ix_memory_subjects ON memory (tenant_id, user_id, category) "
        "WHERE kind = 'semantic' AND metadata ? 'subject'"
    )


def downgrade() -> None:
    op.drop_index("ix_memory_subjects", table_name="memory")
    op.drop_index("ix_memory_content", table_name="memory")
