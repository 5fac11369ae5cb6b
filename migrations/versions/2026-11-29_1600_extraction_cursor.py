"""Where each thread's write-path passes got to: one row per thread, under tenant RLS.

The audit trail keeps every pass (history, health); this table answers "from which message
does the next pass start" with one index lookup instead of a walk through the tenant's audit
entries. Rows go with their thread (ON DELETE CASCADE).

Revision ID: 20261129_1600
Revises: 20261129_1500
Create Date: 2026-11-29 16:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op
from sqlalchemy.dialects import postgresql as pg

revision: str = "20261129_1600"
down_revision: str | None = "20261129_1500"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TENANT_SETTING = "current_setting('app.tenant_id', true)"


def _runtime_role() -> str:
    role = str(context.config.attributes["runtime_role"])
    if not role.replace("_", "").isalnum() or not role.islower():
        raise ValueError(f"invalid runtime role name {role!r}")
    return role


def upgrade() -> None:
    op.create_table(
        "extraction_cursor",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("thread_id", pg.UUID(as_uuid=True), nullable=False),
        sa.Column("through_seq", sa.BigInteger(), nullable=False),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.text("now()"),
        ),
        sa.PrimaryKeyConstraint("tenant_id", "thread_id", name="pk_extraction_cursor"),
        sa.ForeignKeyConstraint(
            ["tenant_id", "thread_id"],
            ["thread.tenant_id", "thread.id"],
            ondelete="CASCADE",
            name="fk_extraction_cursor_thread",
        ),
    )
    op.execute("ALTER TABLE extraction_cursor ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE extraction_cursor FORCE ROW LEVEL SECURITY")
    op.execute(
        "CREATE POLICY tenant_isolation ON extraction_cursor "
        f"USING (tenant_id = {TENANT_SETTING}) WITH CHECK (tenant_id = {TENANT_SETTING})"
    )
    op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON extraction_cursor TO "{_runtime_role()}"')


def downgrade() -> None:
    op.drop_table("extraction_cursor")
