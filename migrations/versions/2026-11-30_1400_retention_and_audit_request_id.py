"""Retention policies per tenant, the tenant list for the retention sweep, request ids in the
audit trail.

`retention_policy` holds one tenant's retention settings (days to keep episodic memories, raw
messages and summaries; NULL = forever) under the usual tenant RLS. The periodic sweep runs as
the runtime role, which sees one tenant per transaction, so it learns which tenants exist from
`mneme_tenant_ids()`: a SECURITY DEFINER function owned by the migration owner that returns
tenant ids and nothing else. `audit_log.request_id` ties an audit entry to the request (the
`X-Request-ID` of its response) that caused it.

Revision ID: 20261130_1400
Revises: 20261129_1600
Create Date: 2026-11-30 14:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op

revision: str = "20261130_1400"
down_revision: str | None = "20261129_1600"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TENANT_SETTING = "current_setting('app.tenant_id', true)"


def _runtime_role() -> str:
    role = str(context.config.attributes["runtime_role"])
    if not role.replace("_", "").isalnum() or not role.islower():
        raise ValueError(f"invalid runtime role name {role!r}")
    return role


def _days(name: str) -> sa.Column[object]:
    return sa.Column(name, sa.Integer(), nullable=True)


def upgrade() -> None:
    role = _runtime_role()
    op.create_table(
        "retention_policy",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        _days("episodic_days"),
        _days("messages_days"),
        _days("summaries_days"),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.text("now()"),
        ),
        sa.PrimaryKeyConstraint("tenant_id", name="pk_retention_policy"),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenant.id"], ondelete="CASCADE", name="fk_retention_policy_tenant"
        ),
        sa.CheckConstraint(
            "coalesce(episodic_days, 1) > 0 AND coalesce(messages_days, 1) > 0 "
            "AND coalesce(summaries_days, 1) > 0",
            name="ck_retention_policy_days",
        ),
    )
    op.execute("ALTER TABLE retention_policy ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE retention_policy FORCE ROW LEVEL SECURITY")
    op.execute(
        "CREATE POLICY tenant_isolation ON retention_policy "
        f"USING (tenant_id = {TENANT_SETTING}) WITH CHECK (tenant_id = {TENANT_SETTING})"
    )
    op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON retention_policy TO "{role}"')

    # Ids only; runs with the owner's rights (the owner bypasses RLS), a fixed search path.
    op.execute(
        """
        CREATE FUNCTION mneme_tenant_ids() RETURNS SETOF text
        LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public
        AS $$ SELECT id FROM public.tenant ORDER BY id $$
        """
    )
    op.execute("REVOKE ALL ON FUNCTION mneme_tenant_ids() FROM PUBLIC")
    op.execute(f'GRANT EXECUTE ON FUNCTION mneme_tenant_ids() TO "{role}"')

    op.add_column("audit_log", sa.Column("request_id", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("audit_log", "request_id")
    op.execute("DROP FUNCTION mneme_tenant_ids()")
    op.drop_table("retention_policy")
