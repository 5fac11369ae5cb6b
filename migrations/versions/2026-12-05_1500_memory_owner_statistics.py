"""`memory_owner_rows`: the planner's count of an owner's memories of a kind, from the most
common owners and kinds themselves rather than from each column apart.

PostgreSQL estimates `tenant_id = … AND scope = … AND user_id = … AND kind = …` as the product
of each condition's share, as if the columns were independent. They are not: a user belongs to
one tenant, so the estimate of a user's memories is its true count times its tenant's share of
the table. With many tenants that share is small, and the plan made for a large owner's search
(its ids written into the statement) took the owner's memories of a kind for a few dozen rows:
sorting them exactly looked cheaper than walking the owner's own HNSW index, and the search
sorted thousands of vectors (an owner of 4,500 facts in a tenant of 3 % of the table: estimated
150 rows, sorted in 5.7 ms where the walk takes ~1.6). A list of the most common
(tenant, scope, user, kind) combinations gives the planner their counts: the owners with indexes
of their own are the largest ones, so they are on it; an owner too small for it is estimated as
before.

ANALYZE fills it; it runs here so that a deployment does not wait for autovacuum's next look
at the table (it reads a sample of the table's rows, seconds for millions, and blocks neither
reads nor writes).

Revision ID: 20261205_1500
Revises: 20261205_1010
Create Date: 2026-12-05 15:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "20261205_1500"
down_revision: str | None = "20261205_1010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "CREATE STATISTICS memory_owner_rows (mcv) ON tenant_id, scope, user_id, kind FROM memory"
    )
    op.execute("ANALYZE memory")


def downgrade() -> None:
    op.execute("DROP STATISTICS memory_owner_rows")
