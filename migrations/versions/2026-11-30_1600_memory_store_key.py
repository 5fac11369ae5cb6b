"""A caller's key for a memory: `put` by key updates one memory instead of adding another.

Key-value clients (the LangGraph store adapter) address their items by (namespace, key). The
namespace maps onto a memory's owner, kind and category; the key is stored here, unique per
owner, kind and category among the memories that have one. A keyed memory is identified by
its key, not by its text: two keys may hold the same text, so the exact-duplicate index
(owner, kind, normalised text) now covers unkeyed memories only.

Revision ID: 20261130_1600
Revises: 20261130_1500
Create Date: 2026-11-30 16:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261130_1600"
down_revision: str | None = "20261130_1500"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STORE_KEY_MAX = 512


def upgrade() -> None:
    op.add_column("memory", sa.Column("store_key", sa.Text(), nullable=True))
    op.execute(
        "ALTER TABLE memory ADD CONSTRAINT ck_memory_store_key_length CHECK "
        f"(store_key IS NULL OR char_length(store_key) BETWEEN 1 AND {STORE_KEY_MAX})"
    )
    op.execute(
        "CREATE UNIQUE INDEX uq_memory_store_key ON memory "
        "(tenant_id, scope, (coalesce(user_id, '')), kind, (coalesce(category, '')), store_key) "
        "WHERE store_key IS NOT NULL"
    )
    op.execute("DROP INDEX uq_memory_live_content")
    op.execute(
        "CREATE UNIQUE INDEX uq_memory_live_content ON memory "
        "(tenant_id, scope, (coalesce(user_id, '')), kind, content_hash) "
        "WHERE lifecycle <> 'superseded' AND store_key IS NULL"
    )


def downgrade() -> None:
    # Keyed memories may repeat each other's text; the old index cannot hold them.
    op.execute("DELETE FROM memory WHERE store_key IS NOT NULL")
    op.execute("DROP INDEX uq_memory_live_content")
    op.execute(
        "CREATE UNIQUE INDEX uq_memory_live_content ON memory "
        "(tenant_id, scope, (coalesce(user_id, '')), kind, content_hash) "
        "WHERE lifecycle <> 'superseded'"
    )
    op.execute("DROP INDEX uq_memory_store_key")
    op.execute("ALTER TABLE memory DROP CONSTRAINT ck_memory_store_key_length")
    op.drop_column("memory", "store_key")
