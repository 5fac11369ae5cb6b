"""A second vector column, so the embedding model can change without downtime.

`memory.embedding_alt` (and its model's name) sits beside `memory.embedding`: a new model's
vectors are written into whichever of the two is free while searches keep reading the other,
and each tenant switches to the new one once all of its memories carry a vector there. The new
column has no fixed dimension (a new model may have another), so its index is an expression
index over a cast to the model's dimension, built when the column is filled.

`embedding_column` says what each column holds (the model, its dimension, whether it is the
live column, being filled, or being retired) and the progress of a fill; `embedding_column_tenant`
names the tenants that already read a column being filled. Both are global, hold no tenant
content (a model name, counts, tenant ids) and are read whole by the service every few seconds,
so they stay plain tables (on Citus: on the coordinator), outside row-level security.

Revision ID: 20261202_1410
Revises: 20261202_1400
Create Date: 2026-12-02 14:10:00
"""

from collections.abc import Sequence

from alembic import context, op

revision: str = "20261202_1410"
down_revision: str | None = "20261202_1400"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _runtime_role() -> str:
    role = str(context.config.attributes["runtime_role"])
    # Validated by Settings' pattern too; checked again because it is interpolated into DDL.
    if not role.replace("_", "").isalnum() or not role.islower():
        raise ValueError(f"invalid runtime role name {role!r}")
    return role


def upgrade() -> None:
    role = _runtime_role()
    op.execute(
        "ALTER TABLE memory ADD COLUMN embedding_alt vector, ADD COLUMN embedding_alt_model text"
    )
    op.execute(
        """
        CREATE TABLE embedding_column (
            name text NOT NULL,
            -- NULL: the model the service is configured with (the column as first migrated).
            model text,
            -- NULL: the column's own type fixes it (vector(D) as first migrated).
            dims integer,
            status text NOT NULL,
            started_at timestamptz NOT NULL DEFAULT now(),
            changed_at timestamptz NOT NULL DEFAULT now(),
            memories_total bigint NOT NULL DEFAULT 0,
            memories_embedded bigint NOT NULL DEFAULT 0,
            index_built boolean NOT NULL DEFAULT false,
            CONSTRAINT pk_embedding_column PRIMARY KEY (name),
            CONSTRAINT ck_embedding_column_name CHECK (name IN ('embedding', 'embedding_alt')),
            CONSTRAINT ck_embedding_column_status
                CHECK (status IN ('live', 'filling', 'retiring')),
            CONSTRAINT ck_embedding_column_dims CHECK (dims BETWEEN 1 AND 16000)
        )
        """
    )
    op.execute("INSERT INTO embedding_column (name, status) VALUES ('embedding', 'live')")
    op.execute(
        """
        CREATE TABLE embedding_column_tenant (
            tenant_id text NOT NULL,
            column_name text NOT NULL,
            switched_at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT pk_embedding_column_tenant PRIMARY KEY (tenant_id),
            CONSTRAINT fk_embedding_column_tenant_column FOREIGN KEY (column_name)
                REFERENCES embedding_column (name) ON DELETE CASCADE
        )
        """
    )
    op.execute(f'GRANT SELECT ON embedding_column, embedding_column_tenant TO "{role}"')


def downgrade() -> None:
    op.execute("DROP TABLE embedding_column_tenant")
    op.execute("DROP TABLE embedding_column")
    op.execute("ALTER TABLE memory DROP COLUMN embedding_alt, DROP COLUMN embedding_alt_model")
