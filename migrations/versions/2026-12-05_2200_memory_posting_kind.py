"""A posting carries what scores it: its memory's kind, the lexeme's frequency in the memory and
the memory's length; the postings' index includes them.

A bounded search reads the top of each question lexeme's postings and, from them alone, bounds
each candidate's score to leave unread the memories that cannot reach a section's pool. With
only the impact (the weight at a fixed mean length), a candidate's weight at the owners' mean
length was known between two bounds, far apart, and many candidates could not be ruled out;
with the frequency and the length it is known exactly. And which section of a context a
candidate goes to (facts or episodes) is its kind: known from the posting, each section reads
the top of its own kind's lists (the facts of a lexeme, however many episodes weigh more) and
prunes by its own pool, without reading rows to find out.

The postings are derived from the memories: they are written again, every memory's, with the
new columns (the service's `memories.postings.INSERT_POSTINGS_SQL`).

Revision ID: 20261205_2200
Revises: 20261205_1500
Create Date: 2026-12-05 22:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261205_2200"
down_revision: str | None = "20261205_1500"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

POSTINGS_OF_EVERY_MEMORY = """
INSERT INTO memory_posting (tenant_id, memory_id, owner_key, lexeme, kind, frequency, length,
                            impact)
SELECT m.tenant_id, m.id, coalesce('user:' || m.user_id, 'org:'), term.lexeme, m.kind,
       cardinality(term.positions), m.tsv_length,
       (CAST(cardinality(term.positions) AS float8) * 2.2
        / (CAST(cardinality(term.positions) AS float8)
           + 1.2 * (0.25 + 0.75 * CAST(m.tsv_length AS float8) / CAST(10.0 AS float8))))
  FROM memory m CROSS JOIN LATERAL unnest(m.tsv) AS term
"""
"""Every memory's postings, as the service writes them at this revision. Both tables are
distributed by tenant and co-located on Citus: the insert runs on each shard."""

TABLES = ("memory", "memory_posting")
INDEX = "ix_memory_posting_impact"
INDEX_KEYS = "(tenant_id, owner_key, lexeme, impact DESC)"


def upgrade() -> None:
    # The postings are emptied and written again with the new columns, the index built after.
    op.drop_index(INDEX, table_name="memory_posting")
    op.execute("TRUNCATE memory_posting")
    op.add_column("memory_posting", sa.Column("kind", sa.Text(), nullable=False))
    op.add_column("memory_posting", sa.Column("frequency", sa.SmallInteger(), nullable=False))
    op.add_column("memory_posting", sa.Column("length", sa.Integer(), nullable=False))
    connection = op.get_bind()
    sees_all = connection.execute(
        sa.text("SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user")
    ).scalar_one()
    # A table owner without BYPASSRLS is held to the tenant policy too (FORCE ROW LEVEL
    # SECURITY) and would write nothing: the policy is lifted for the insert only, inside the
    # migration's transaction, so no other session ever sees the tables without it.
    if not sees_all:
        for table in TABLES:
            op.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
    op.execute(POSTINGS_OF_EVERY_MEMORY)
    if not sees_all:
        for table in TABLES:
            op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE INDEX {INDEX} ON memory_posting {INDEX_KEYS} "
        "INCLUDE (memory_id, kind, frequency, length)"
    )
    op.execute("ANALYZE memory_posting")


def downgrade() -> None:
    op.drop_index(INDEX, table_name="memory_posting")
    for column in ("kind", "frequency", "length"):
        op.drop_column("memory_posting", column)
    op.execute(f"CREATE INDEX {INDEX} ON memory_posting {INDEX_KEYS} INCLUDE (memory_id)")
