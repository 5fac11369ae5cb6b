"""A memory's vector stays in its row, and no B-tree index holds a memory's tsvector.

The memory table moves values out of line (TOAST) only for a row larger than 8,160 bytes, not
PostgreSQL's default of 2,032. A 384-float vector is 1,544 bytes, so a memory with a sentence
of text and its tsvector is just over 2 KB, and about half the rows had their vector moved to
the TOAST table: every distance a search computed exactly (the owners searched without the HNSW
index, the memories a candidate's neighbours bring in) first looked the vector up there, two
more index and page reads each. A row with its vector inline is read once. Only memories written
(or rewritten) after this revision are stored this way; rows already stored keep their layout
until they are rewritten, which `VACUUM FULL memory` does at once for a deployment that wants it.

`ix_memory_lexical` no longer includes the tsvector. A B-tree entry holds at most 2,704 bytes,
and a long memory of varied words has a larger tsvector even compressed: writing it failed.
The index keeps every other column the lexical side filters on; the few owners still searched
exactly read their tsvectors from the rows the vector side reads anyway.

Revision ID: 20261202_1500
Revises: 20261202_1420
Create Date: 2026-12-02 15:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "20261202_1500"
down_revision: str | None = "20261202_1420"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROW_INLINE_BYTES = 8160
"""The largest target PostgreSQL accepts: a row is toasted only when it would not fit a page."""

LEXICAL_COLUMNS = "id, kind, category, lifecycle, expires_at, created_at, event_at, tsv_length"


def upgrade() -> None:
    op.execute(f"ALTER TABLE memory SET (toast_tuple_target = {ROW_INLINE_BYTES})")
    op.drop_index("ix_memory_lexical", table_name="memory")
    op.execute(
        "CREATE INDEX ix_memory_lexical ON memory (tenant_id, scope, user_id) "
        f"INCLUDE ({LEXICAL_COLUMNS})"
    )


def downgrade() -> None:
    op.drop_index("ix_memory_lexical", table_name="memory")
    op.execute(
        "CREATE INDEX ix_memory_lexical ON memory (tenant_id, scope, user_id) "
        f"INCLUDE ({LEXICAL_COLUMNS}, tsv)"
    )
    op.execute("ALTER TABLE memory RESET (toast_tuple_target)")
