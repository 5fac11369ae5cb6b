"""BM25's document lengths stored per memory, and an index that serves a search's collection
statistics without reading the table.

A search's BM25 needs the number of memories it may return and their mean length in distinct
lexemes (`length(tsv)`). Computed from the table, that reads every row of the owner — for a user
with 100k memories, 100k wide heap rows (the embedding sits beside the text) per search. The
length is now a generated column, `tsv_length`, built from the same expression as `tsv` (a
generated column cannot refer to another one), so it always equals `length(tsv)`; and
`ix_memory_lexical_stats` carries it with every column a search filter tests, so the statistics
come from an index-only scan of narrow tuples.

Revision ID: 20261130_2320
Revises: 20261130_2210
Create Date: 2026-11-30 23:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261130_2320"
down_revision: str | None = "20261130_2210"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "memory",
        sa.Column(
            "tsv_length",
            sa.Integer(),
            sa.Computed("length(to_tsvector('english', text))", persisted=True),
            nullable=False,
        ),
    )
    # Key: the owner conditions (tenant, then scope and user); included: the other columns
    # `MemoryFilter.where()` tests, and the length the statistics average.
    op.execute(
        "CREATE INDEX ix_memory_lexical_stats ON memory (tenant_id, scope, user_id) "
        "INCLUDE (kind, category, lifecycle, expires_at, created_at, event_at, tsv_length)"
    )


def downgrade() -> None:
    op.drop_index("ix_memory_lexical_stats", table_name="memory")
    op.drop_column("memory", "tsv_length")
