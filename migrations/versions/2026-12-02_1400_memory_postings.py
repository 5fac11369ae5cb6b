"""Impact-ordered postings and per-owner term statistics: a search's lexical side bounded by
what it returns, not by how many memories the owner has.

`memory_posting` holds one row per memory and lexeme, keyed by the owner and the lexeme and
ordered by the lexeme's BM25 term-frequency weight in that memory (its impact): the memories a
lexeme weighs most in are the first rows of one index range. A search of a large owner reads the
first rows of each of its question's lexemes instead of testing every memory of the owner, then
scores those candidates exactly. The memory write path writes the postings in the memory's own
transaction (no trigger: Citus does not run triggers on distributed tables).

`memory_owner_stats` and `memory_lexeme_stats` are the owner's collection statistics (how many
memories, their total length, and the document count of each lexeme common enough to be costly
to count), refreshed in the background; the bounded search needs them, and an owner without them
is searched exactly.

Every table is under the tenant policy like the others, and is derived data: purged with the
user, rebuilt on import, never exported.

Revision ID: 20261202_1400
Revises: 20261202_1230
Create Date: 2026-12-02 14:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op
from sqlalchemy.dialects import postgresql as pg

revision: str = "20261202_1400"
down_revision: str | None = "20261202_1230"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TENANT_SETTING = "current_setting('app.tenant_id', true)"
TABLES = ("memory_posting", "memory_owner_stats", "memory_lexeme_stats")
OWNER_KEY = "coalesce('user:' || user_id, 'org:')"
"""The owner of a row as one value (`Owner.key` in the service): 'user:<id>' or 'org:'."""

POSTINGS_OF_EVERY_MEMORY = """
INSERT INTO memory_posting (tenant_id, memory_id, owner_key, lexeme, impact)
SELECT m.tenant_id, m.id, coalesce('user:' || m.user_id, 'org:'), term.lexeme,
       cardinality(term.positions) * 2.2
       / (cardinality(term.positions) + 1.2 * (0.25 + 0.75 * m.tsv_length / 10.0))
  FROM memory m CROSS JOIN LATERAL unnest(m.tsv) AS term
"""
"""The postings of the memories stored before this revision (the service's
`memories.postings.WRITE_POSTINGS_SQL`, for every memory at once)."""


def _runtime_role() -> str:
    role = str(context.config.attributes["runtime_role"])
    if not role.replace("_", "").isalnum() or not role.islower():
        raise ValueError(f"invalid runtime role name {role!r}")
    return role


def upgrade() -> None:
    op.create_table(
        "memory_posting",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("memory_id", pg.UUID(as_uuid=True), nullable=False),
        sa.Column("owner_key", sa.Text(), nullable=False),
        sa.Column("lexeme", sa.Text(), nullable=False),
        sa.Column("impact", sa.REAL(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "memory_id", "lexeme", name="pk_memory_posting"),
        sa.ForeignKeyConstraint(
            ["tenant_id", "memory_id"],
            ["memory.tenant_id", "memory.id"],
            ondelete="CASCADE",
            name="fk_memory_posting_memory",
        ),
    )
    # The index a bounded search reads: one range per owner and lexeme, highest impact first,
    # the memory id included so the read never visits the table.
    op.execute(
        "CREATE INDEX ix_memory_posting_impact ON memory_posting "
        "(tenant_id, owner_key, lexeme, impact DESC) INCLUDE (memory_id)"
    )
    for name in ("memory_owner_stats", "memory_lexeme_stats"):
        columns = [
            sa.Column("tenant_id", sa.Text(), nullable=False),
            # The user the statistics describe (NULL: the organization), so a user's purge
            # removes them; `owner_key` is the same owner as a key.
            sa.Column("user_id", sa.Text(), nullable=True),
            sa.Column("owner_key", sa.Text(), sa.Computed(OWNER_KEY, persisted=True)),
        ]
        if name == "memory_owner_stats":
            columns += [
                sa.Column("documents", sa.BigInteger(), nullable=False),
                sa.Column("total_length", sa.BigInteger(), nullable=False),
                sa.Column("refreshed_at", sa.DateTime(timezone=True), nullable=False),
                sa.PrimaryKeyConstraint("tenant_id", "owner_key", name="pk_memory_owner_stats"),
            ]
        else:
            columns += [
                sa.Column("lexeme", sa.Text(), nullable=False),
                sa.Column("documents", sa.BigInteger(), nullable=False),
                sa.PrimaryKeyConstraint(
                    "tenant_id", "owner_key", "lexeme", name="pk_memory_lexeme_stats"
                ),
            ]
        op.create_table(
            name,
            *columns,
            sa.ForeignKeyConstraint(
                ["tenant_id"], ["tenant.id"], ondelete="CASCADE", name=f"fk_{name}_tenant"
            ),
        )
    role = _runtime_role()
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY tenant_isolation ON {table} "
            f"USING (tenant_id = {TENANT_SETTING}) WITH CHECK (tenant_id = {TENANT_SETTING})"
        )
    op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON {", ".join(TABLES)} TO "{role}"')
    op.execute(POSTINGS_OF_EVERY_MEMORY)
    op.execute("ANALYZE memory_posting")


def downgrade() -> None:
    for table in reversed(TABLES):
        op.drop_table(table)
