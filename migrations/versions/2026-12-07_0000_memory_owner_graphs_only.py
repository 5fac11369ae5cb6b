"""The memory table keeps no vector graph and no text index of its own: each write inserts into
one HNSW graph at most, its owner's.

The table's HNSW index (`ix_memory_embedding_hnsw`, or `ix_memory_<column>_hnsw` for a column
filled by a change of model) took every memory's vector, and no search walked it any more: a
small owner's vectors are sorted exactly, a large owner's are read from graphs of its own
(`service.memories.owner_indexes`), and a walk of the table's graph filtered to one owner
visits other owners' vectors to find its own. A large owner's write inserted into both graphs:
a fifth to a half more time per write than one graph.

`ix_memory_tsv` (GIN over the memories' tsvector) could serve no search: under row-level
security the text match (`@@`) is not leakproof, so PostgreSQL tests the policy on each row
before it and never reads the index for it; searches read the memories' postings
(`memory_posting`) instead.

`embedding_column.index_built` said that a column being filled had its table graph; what it
gates, the largest owners' graphs on that column, needs only the column filled, so it is named
`filled`.

Revision ID: 20261207_0000
Revises: 20261205_2200
Create Date: 2026-12-07 00:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261207_0000"
down_revision: str | None = "20261205_2200"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

VECTOR_COLUMNS = ("embedding", "embedding_alt")


def upgrade() -> None:
    for column in VECTOR_COLUMNS:
        op.execute(f"DROP INDEX IF EXISTS ix_memory_{column}_hnsw")
    op.execute("DROP INDEX IF EXISTS ix_memory_tsv")
    op.execute("ALTER TABLE embedding_column RENAME COLUMN index_built TO filled")


def downgrade() -> None:
    op.execute("ALTER TABLE embedding_column RENAME COLUMN filled TO index_built")
    op.create_index("ix_memory_tsv", "memory", ["tsv"], postgresql_using="gin")
    # The table's graph of each column in use, over the column as searches compare with it: a
    # column of no dimension of its own (one a change of model filled) cast to its model's.
    in_use = op.get_bind().execute(
        sa.text("SELECT name, dims FROM embedding_column WHERE status IN ('live', 'filling')")
    )
    for name, dims in in_use.all():
        expression = name if dims is None else f"({name}::vector({int(dims)}))"
        op.execute(
            f"CREATE INDEX ix_memory_{name}_hnsw ON memory "
            f"USING hnsw ({expression} vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
        )
    op.execute("UPDATE embedding_column SET index_built = true WHERE status = 'filling'")
