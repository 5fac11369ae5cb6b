"""Exact-duplicate memories are refused by a unique index, so concurrent writes cannot race.

A memory is an exact duplicate of another when owner, scope, kind and normalised text
(`content_hash`) agree and the other is still live (not superseded). Superseded memories do not
count: re-asserting a fact that was once replaced stores it again.

Revision ID: 20261129_1400
Revises: 20261129_1300
Create Date: 2026-11-29 14:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "20261129_1400"
down_revision: str | None = "20261129_1300"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("DROP INDEX IF EXISTS ix_memory_dedupe")
    op.execute(
        "CREATE UNIQUE INDEX uq_memory_live_content ON memory "
        "(tenant_id, scope, (coalesce(user_id, '')), kind, content_hash) "
        "WHERE lifecycle <> 'superseded'"
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS uq_memory_live_content")
    op.execute("CREATE INDEX ix_memory_dedupe ON memory (tenant_id, content_hash)")
