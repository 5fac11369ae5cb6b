"""Idempotency records: the stored outcome of POSTs sent with an `Idempotency-Key`.

One row per (tenant, principal, key). The row is inserted in the same transaction as the
request's effects, so either both commit or neither does; its primary key is what makes a
concurrent retry wait for the first attempt instead of running beside it.

Revision ID: 20261129_1300
Revises: 20261129_1200
Create Date: 2026-11-29 13:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op
from sqlalchemy.dialects import postgresql as pg

revision: str = "20261129_1300"
down_revision: str | None = "20261129_1200"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "idempotency_record"
TENANT_SETTING = "current_setting('app.tenant_id', true)"


def _runtime_role() -> str:
    role = str(context.config.attributes["runtime_role"])
    # Validated by Settings' pattern too; checked again because it is interpolated into DDL.
    if not role.replace("_", "").isalnum() or not role.islower():
        raise ValueError(f"invalid runtime role name {role!r}")
    return role


def upgrade() -> None:
    role = _runtime_role()

    op.create_table(
        TABLE,
        sa.Column("tenant_id", sa.Text(), nullable=False),
        # The caller's subject: keys are chosen by clients, so they are scoped per principal.
        sa.Column("principal", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("method", sa.Text(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        # sha256 hex of the canonical request body: a retry must send the same request.
        sa.Column("request_hash", sa.Text(), nullable=False),
        # NULL while the first request is in flight (only its own transaction can see that).
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("response_body", pg.JSONB(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.text("now()"),
        ),
        sa.PrimaryKeyConstraint("tenant_id", "principal", "key", name="pk_idempotency_record"),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenant.id"],
            ondelete="CASCADE",
            name="fk_idempotency_record_tenant_id_tenant",
        ),
        sa.CheckConstraint(
            "char_length(key) BETWEEN 1 AND 255", name="ck_idempotency_record_key_length"
        ),
        sa.CheckConstraint(
            "status_code IS NULL OR status_code BETWEEN 100 AND 599",
            name="ck_idempotency_record_status_code",
        ),
    )
    # Expiry sweeps delete by age across all keys.
    op.create_index("ix_idempotency_record_created_at", TABLE, ["created_at"])

    op.execute(f"ALTER TABLE {TABLE} ENABLE ROW LEVEL SECURITY")
    op.execute(f"ALTER TABLE {TABLE} FORCE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE POLICY tenant_isolation ON {TABLE} "
        f"USING (tenant_id = {TENANT_SETTING}) WITH CHECK (tenant_id = {TENANT_SETTING})"
    )
    op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON {TABLE} TO "{role}"')


def downgrade() -> None:
    # Dropping the table drops its index, policy and grants with it.
    op.drop_table(TABLE)
