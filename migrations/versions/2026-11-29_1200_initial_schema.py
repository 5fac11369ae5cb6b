"""Initial schema: tenants, users, API keys, profiles, threads, memories, history, audit.

Every table carries `tenant_id` leading its primary key and is protected by a FORCE'd
row-level-security policy on `current_setting('app.tenant_id', true)`. The runtime role the
service connects as is created here: not a superuser, no BYPASSRLS, owns nothing.

Revision ID: 20261129_1200
Revises:
Create Date: 2026-11-29 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op
from pgvector.sqlalchemy import Vector
from sqlalchemy.dialects import postgresql as pg

revision: str = "20261129_1200"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Tenant tables in creation order (children after parents); downgrade drops them reversed.
TENANT_TABLES = (
    "tenant",
    "user_account",
    "api_key",
    "profile",
    "thread",
    "message",
    "thread_summary",
    "memory",
    "memory_event",
    "audit_log",
)

TENANT_SETTING = "current_setting('app.tenant_id', true)"


def _runtime_role() -> str:
    role = str(context.config.attributes["runtime_role"])
    # Validated by Settings' pattern too; checked again because it is interpolated into DDL.
    if not role.replace("_", "").isalnum() or not role.islower():
        raise ValueError(f"invalid runtime role name {role!r}")
    return role


def _embedding_dims() -> int:
    return int(context.config.attributes["embedding_dims"])


def _now() -> sa.TextClause:
    return sa.text("now()")


def _created_at() -> sa.Column[object]:
    return sa.Column(
        "created_at", sa.DateTime(timezone=True), nullable=False, server_default=_now()
    )


def _tenant_fk() -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(["tenant_id"], ["tenant.id"], ondelete="CASCADE")


def _tenant_id() -> sa.Column[object]:
    return sa.Column("tenant_id", sa.Text(), nullable=False)


def _uuid_pk() -> sa.Column[object]:
    return sa.Column(
        "id", pg.UUID(as_uuid=True), nullable=False, server_default=sa.text("gen_random_uuid()")
    )


def _create_extension_if_missing(name: str) -> None:
    # The bootstrap creates the extensions as a superuser (pgvector is not trusted, so the
    # owner could not). Skip the statement outright when they exist: on Citus even a no-op
    # `CREATE EXTENSION IF NOT EXISTS` is propagated and demands the extension's ownership.
    op.execute(
        f"DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = '{name}') "
        f"THEN CREATE EXTENSION {name}; END IF; END $$"
    )


def upgrade() -> None:
    role = _runtime_role()
    dims = _embedding_dims()

    for extension in ("vector", "pg_trgm"):
        _create_extension_if_missing(extension)

    op.create_table(
        "tenant",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("display_name", sa.Text(), nullable=True),
        _created_at(),
        sa.PrimaryKeyConstraint("id", name="pk_tenant"),
        sa.CheckConstraint("char_length(id) BETWEEN 1 AND 128", name="ck_tenant_id_length"),
    )

    op.create_table(
        "user_account",
        _tenant_id(),
        sa.Column("id", sa.Text(), nullable=False),
        # Auth overlay (seed 000): copied from token claims, never tokens themselves.
        sa.Column("name", sa.Text(), nullable=True),
        sa.Column("email", sa.Text(), nullable=True),
        sa.Column("avatar", sa.Text(), nullable=True),
        sa.Column("socials", pg.JSONB(), nullable=False, server_default=sa.text("'[]'::jsonb")),
        _created_at(),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=_now()),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("tenant_id", "id", name="pk_user_account"),
        _tenant_fk(),
        sa.CheckConstraint("char_length(id) BETWEEN 1 AND 256", name="ck_user_account_id_length"),
    )

    op.create_table(
        "api_key",
        _tenant_id(),
        _uuid_pk(),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("display_prefix", sa.Text(), nullable=False),
        sa.Column("secret_hash", sa.LargeBinary(), nullable=False),
        sa.Column("roles", pg.ARRAY(sa.Text()), nullable=False, server_default=sa.text("'{}'")),
        sa.Column("created_by", sa.Text(), nullable=False),
        _created_at(),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("tenant_id", "id", name="pk_api_key"),
        _tenant_fk(),
    )

    op.create_table(
        "profile",
        _tenant_id(),
        _uuid_pk(),
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=True),
        sa.Column("document", pg.JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("version", sa.BigInteger(), nullable=False, server_default=sa.text("1")),
        _created_at(),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=_now()),
        sa.PrimaryKeyConstraint("tenant_id", "id", name="pk_profile"),
        _tenant_fk(),
        sa.ForeignKeyConstraint(
            ["tenant_id", "user_id"],
            ["user_account.tenant_id", "user_account.id"],
            ondelete="CASCADE",
            name="fk_profile_user_account",
        ),
        sa.CheckConstraint("scope IN ('user', 'org')", name="ck_profile_scope"),
        sa.CheckConstraint("(scope = 'user') = (user_id IS NOT NULL)", name="ck_profile_owner"),
    )
    op.create_index(
        "uq_profile_user",
        "profile",
        ["tenant_id", "user_id"],
        unique=True,
        postgresql_where=sa.text("scope = 'user'"),
    )
    op.create_index(
        "uq_profile_org",
        "profile",
        ["tenant_id"],
        unique=True,
        postgresql_where=sa.text("scope = 'org'"),
    )

    op.create_table(
        "thread",
        _tenant_id(),
        _uuid_pk(),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("metadata", pg.JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")),
        _created_at(),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=_now()),
        sa.Column("last_message_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("tenant_id", "id", name="pk_thread"),
        sa.ForeignKeyConstraint(
            ["tenant_id", "user_id"],
            ["user_account.tenant_id", "user_account.id"],
            ondelete="CASCADE",
            name="fk_thread_user_account",
        ),
    )
    op.create_index(
        "ix_thread_owner_recent",
        "thread",
        ["tenant_id", "user_id", sa.text("updated_at DESC"), "id"],
    )

    op.create_table(
        "message",
        _tenant_id(),
        _uuid_pk(),
        sa.Column("thread_id", pg.UUID(as_uuid=True), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        # Position in the thread, 0-based and gap-free: summaries address windows by it.
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("role", sa.Text(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("tool_calls", pg.JSONB(), nullable=True),
        sa.Column("client_message_id", sa.Text(), nullable=True),
        sa.Column("metadata", pg.JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")),
        _created_at(),
        sa.PrimaryKeyConstraint("tenant_id", "id", name="pk_message"),
        sa.ForeignKeyConstraint(
            ["tenant_id", "thread_id"],
            ["thread.tenant_id", "thread.id"],
            ondelete="CASCADE",
            name="fk_message_thread",
        ),
        sa.UniqueConstraint("tenant_id", "thread_id", "seq", name="uq_message_thread_seq"),
        sa.CheckConstraint(
            "role IN ('user', 'assistant', 'tool', 'system')", name="ck_message_role"
        ),
    )
    op.create_index(
        "uq_message_client_id",
        "message",
        ["tenant_id", "thread_id", "client_message_id"],
        unique=True,
        postgresql_where=sa.text("client_message_id IS NOT NULL"),
    )

    op.create_table(
        "thread_summary",
        _tenant_id(),
        _uuid_pk(),
        sa.Column("thread_id", pg.UUID(as_uuid=True), nullable=False),
        sa.Column("sequence", sa.Integer(), nullable=False),
        # Message window [start_index, end_index) by message.seq.
        sa.Column("start_index", sa.BigInteger(), nullable=False),
        sa.Column("end_index", sa.BigInteger(), nullable=False),
        sa.Column(
            "message_ids",
            pg.ARRAY(pg.UUID(as_uuid=True)),
            nullable=False,
            server_default=sa.text("'{}'"),
        ),
        sa.Column("entries", pg.JSONB(), nullable=False, server_default=sa.text("'[]'::jsonb")),
        sa.Column("tokens_before", sa.Integer(), nullable=True),
        sa.Column("tokens_after", sa.Integer(), nullable=True),
        sa.Column("model", sa.Text(), nullable=True),
        _created_at(),
        sa.PrimaryKeyConstraint("tenant_id", "id", name="pk_thread_summary"),
        sa.ForeignKeyConstraint(
            ["tenant_id", "thread_id"],
            ["thread.tenant_id", "thread.id"],
            ondelete="CASCADE",
            name="fk_thread_summary_thread",
        ),
        sa.UniqueConstraint(
            "tenant_id", "thread_id", "sequence", name="uq_thread_summary_sequence"
        ),
        sa.CheckConstraint("end_index > start_index", name="ck_thread_summary_window"),
    )

    op.create_table(
        "memory",
        _tenant_id(),
        _uuid_pk(),
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=True),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("category", sa.Text(), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        # Exact-duplicate detection key: whitespace-collapsed, case-folded text.
        sa.Column(
            "content_hash",
            sa.Text(),
            sa.Computed(
                "md5(lower(regexp_replace(btrim(text), '\\s+', ' ', 'g')))", persisted=True
            ),
        ),
        sa.Column(
            "tsv", pg.TSVECTOR(), sa.Computed("to_tsvector('english', text)", persisted=True)
        ),
        sa.Column("embedding", Vector(dims), nullable=True),
        sa.Column("embedding_model", sa.Text(), nullable=True),
        sa.Column("confidence", sa.Float(), nullable=False, server_default=sa.text("1.0")),
        sa.Column("lifecycle", sa.Text(), nullable=False, server_default=sa.text("'confirmed'")),
        sa.Column("needs_review", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("superseded_by", pg.UUID(as_uuid=True), nullable=True),
        # Provenance: where the memory came from and the words that justify it.
        sa.Column("source_thread_id", pg.UUID(as_uuid=True), nullable=True),
        sa.Column(
            "source_message_ids",
            pg.ARRAY(pg.UUID(as_uuid=True)),
            nullable=False,
            server_default=sa.text("'{}'"),
        ),
        sa.Column("evidence", sa.Text(), nullable=True),
        # Bi-temporal: event_at = when it happened / became true; created_at = when we learned it;
        # invalid_at = when it stopped being true.
        sa.Column("event_at", sa.DateTime(timezone=True), nullable=True),
        _created_at(),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=_now()),
        sa.Column("last_confirmed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("invalid_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("metadata", pg.JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.PrimaryKeyConstraint("tenant_id", "id", name="pk_memory"),
        _tenant_fk(),
        sa.ForeignKeyConstraint(
            ["tenant_id", "user_id"],
            ["user_account.tenant_id", "user_account.id"],
            ondelete="CASCADE",
            name="fk_memory_user_account",
        ),
        sa.CheckConstraint("scope IN ('user', 'org')", name="ck_memory_scope"),
        sa.CheckConstraint("(scope = 'user') = (user_id IS NOT NULL)", name="ck_memory_owner"),
        sa.CheckConstraint("kind IN ('semantic', 'episodic', 'procedural')", name="ck_memory_kind"),
        sa.CheckConstraint(
            "lifecycle IN ('proposed', 'confirmed', 'superseded')", name="ck_memory_lifecycle"
        ),
        sa.CheckConstraint("confidence >= 0 AND confidence <= 1", name="ck_memory_confidence"),
        sa.CheckConstraint("char_length(text) BETWEEN 1 AND 4000", name="ck_memory_text_length"),
    )
    op.create_index(
        "ix_memory_owner",
        "memory",
        ["tenant_id", "user_id", "kind", "lifecycle", sa.text("created_at DESC")],
    )
    op.create_index("ix_memory_dedupe", "memory", ["tenant_id", "content_hash"])
    op.create_index("ix_memory_tsv", "memory", ["tsv"], postgresql_using="gin")
    op.execute(
        "CREATE INDEX ix_memory_embedding_hnsw ON memory "
        "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
    )
    op.create_index(
        "ix_memory_unembedded",
        "memory",
        ["tenant_id", "id"],
        postgresql_where=sa.text("embedding IS NULL"),
    )

    op.create_table(
        "memory_event",
        _tenant_id(),
        _uuid_pk(),
        # No foreign key: history outlives a deleted memory until the owner is purged.
        sa.Column("memory_id", pg.UUID(as_uuid=True), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=True),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("old_text", sa.Text(), nullable=True),
        sa.Column("new_text", sa.Text(), nullable=True),
        sa.Column("changes", pg.JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("actor", sa.Text(), nullable=False),
        _created_at(),
        sa.PrimaryKeyConstraint("tenant_id", "id", name="pk_memory_event"),
        _tenant_fk(),
        sa.CheckConstraint(
            "action IN ('add', 'update', 'supersede', 'delete')", name="ck_memory_event_action"
        ),
    )
    op.create_index(
        "ix_memory_event_memory", "memory_event", ["tenant_id", "memory_id", "created_at"]
    )
    op.create_index("ix_memory_event_user", "memory_event", ["tenant_id", "user_id"])

    op.create_table(
        "audit_log",
        _tenant_id(),
        _uuid_pk(),
        sa.Column("actor_kind", sa.Text(), nullable=False),
        sa.Column("actor_id", sa.Text(), nullable=False),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("target_type", sa.Text(), nullable=False),
        sa.Column("target_id", sa.Text(), nullable=True),
        sa.Column("detail", pg.JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")),
        _created_at(),
        sa.PrimaryKeyConstraint("tenant_id", "id", name="pk_audit_log"),
        _tenant_fk(),
    )
    op.create_index("ix_audit_log_recent", "audit_log", ["tenant_id", sa.text("created_at DESC")])

    for table in TENANT_TABLES:
        column = "id" if table == "tenant" else "tenant_id"
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY tenant_isolation ON {table} "
            f"USING ({column} = {TENANT_SETTING}) WITH CHECK ({column} = {TENANT_SETTING})"
        )

    # The runtime role: may log in and use the tables, nothing else. Roles are cluster-wide,
    # so it may exist already (another database of the same cluster); then it is reused.
    op.execute(
        f"""
        DO $$
        BEGIN
            IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{role}') THEN
                CREATE ROLE "{role}" LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
            END IF;
        END
        $$
        """
    )
    op.execute(f'GRANT USAGE ON SCHEMA public TO "{role}"')
    op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON {", ".join(TENANT_TABLES)} TO "{role}"')
    # Readiness compares the schema revision with the code's head.
    op.execute(f'GRANT SELECT ON alembic_version TO "{role}"')


def downgrade() -> None:
    role = _runtime_role()
    op.execute(f'REVOKE SELECT ON alembic_version FROM "{role}"')
    for table in reversed(TENANT_TABLES):
        op.drop_table(table)
    op.execute(f'REVOKE USAGE ON SCHEMA public FROM "{role}"')
