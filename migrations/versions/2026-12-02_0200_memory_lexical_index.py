"""The search's lexical side read from one covering index: the memory's id and tsvector join the
columns `ix_memory_lexical_stats` carried, under the new name `ix_memory_lexical`.

Under row-level security the GIN index cannot serve `tsv @@ query` (the operator is not
leakproof, so the planner may not test it ahead of the tenant policy), so a search tests every
memory its filter selects. It read their tsvectors from the table: wide heap rows, the embedding
beside the text (~4 rows a page). From this index they are an index-only scan of narrow tuples:
for a user with 100,000 memories, 3,500 pages instead of 26,000, and the statistics (count and
mean length) come from the same index as before. Same rows and the same arithmetic, so the same
results (docs/benchmarks.md, issue #15).

Revision ID: 20261202_0200
Revises: 20261130_2320
Create Date: 2026-12-02 02:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "20261202_0200"
down_revision: str | None = "20261130_2320"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Key: the owner conditions (tenant, then scope and user); included: every other column a
    # search's lexical fragments read (`MemoryFilter.where()`'s conditions, id, tsvector and
    # its length).
    op.execute(
        "CREATE INDEX ix_memory_lexical ON memory (tenant_id, scope, user_id) "
        "INCLUDE (id, kind, category, lifecycle, expires_at, created_at, event_at, tsv_length, "
        "tsv)"
    )
    op.drop_index("ix_memory_lexical_stats", table_name="memory")


def downgrade() -> None:
    op.execute(
        "CREATE INDEX ix_memory_lexical_stats ON memory (tenant_id, scope, user_id) "
        "INCLUDE (kind, category, lifecycle, expires_at, created_at, event_at, tsv_length)"
    )
    op.drop_index("ix_memory_lexical", table_name="memory")
