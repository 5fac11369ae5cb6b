"""The live vector column's model is always recorded: the first process to serve records it.

A database migrated without any vector recorded no model for its live column, and every service
process took the column for its own configured model's: two processes configured with two
models (the packaged default and its float32 run, say) each wrote their own vectors into it and
compared their questions with the other's. Now the column's model is the database's to say.
This revision records it again where it is still missing, from the vectors the column holds
(those written since the last recording), and gives the runtime role
`mneme_record_live_embedding_model(configured)`: a SECURITY DEFINER function, owned by the
migration owner, that records a model for a live column with none recorded (the model of a vector
the column holds, if the owner can see one; else `configured`) and returns the model the column
holds. A service
process calls it as it starts, before it reads the columns' state: the first one records its
configured model, and every later one serves the column with that model, whatever it is
configured with.

Revision ID: 20261208_0900
Revises: 20261207_2200
Create Date: 2026-12-08 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op

revision: str = "20261208_0900"
down_revision: str | None = "20261207_2200"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Two statements rather than an UPDATE ... FROM (subquery): on Citus `memory` is distributed and
# `embedding_column` a plain table on the coordinator.
MOST_STORED_MODEL_SQL = sa.text(
    "SELECT embedding_model FROM memory WHERE embedding_model IS NOT NULL "
    "GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1"
)


def _runtime_role() -> str:
    role = str(context.config.attributes["runtime_role"])
    if not role.replace("_", "").isalnum() or not role.islower():
        raise ValueError(f"invalid runtime role name {role!r}")
    return role


def _record_from_stored_vectors() -> None:
    connection = op.get_bind()
    unrecorded = connection.execute(
        sa.text("SELECT 1 FROM embedding_column WHERE status = 'live' AND model IS NULL")
    ).first()
    if unrecorded is None:
        return
    sees_all = connection.execute(
        sa.text("SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user")
    ).scalar_one()
    # A table owner without BYPASSRLS is held to the tenant policy too (FORCE ROW LEVEL
    # SECURITY) and would see no memory: the policy is lifted for this read only, inside the
    # migration's transaction, so no other session ever sees the table without it.
    if not sees_all:
        op.execute("ALTER TABLE memory NO FORCE ROW LEVEL SECURITY")
    model = connection.execute(MOST_STORED_MODEL_SQL).scalar_one_or_none()
    if not sees_all:
        op.execute("ALTER TABLE memory FORCE ROW LEVEL SECURITY")
    if model is not None:
        connection.execute(
            sa.text(
                "UPDATE embedding_column SET model = :model WHERE status = 'live' AND model IS NULL"
            ),
            {"model": model},
        )


def upgrade() -> None:
    _record_from_stored_vectors()
    role = _runtime_role()
    # A live column with no model recorded is the first column as first migrated (a change
    # records the live column's model when it starts), so its vectors are `embedding`'s. Two
    # processes that start together both update the one row: the second waits for the first
    # and, finding a model recorded, leaves it; each then reads the one recorded. Statements
    # apart, never a join: on Citus `memory` is distributed and `embedding_column` is not.
    op.execute(
        """
        CREATE FUNCTION mneme_record_live_embedding_model(configured text) RETURNS text
        LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public
        AS $$
        DECLARE
          recorded text;
          stored text;
        BEGIN
          SELECT c.model INTO recorded FROM public.embedding_column c WHERE c.status = 'live';
          IF recorded IS NOT NULL THEN
            RETURN recorded;
          END IF;
          SELECT m.embedding_model INTO stored FROM public.memory m
           WHERE m.embedding_model IS NOT NULL LIMIT 1;
          UPDATE public.embedding_column c SET model = coalesce(stored, configured)
           WHERE c.status = 'live' AND c.model IS NULL;
          SELECT c.model INTO recorded FROM public.embedding_column c WHERE c.status = 'live';
          RETURN recorded;
        END
        $$
        """
    )
    op.execute("REVOKE ALL ON FUNCTION mneme_record_live_embedding_model(text) FROM PUBLIC")
    op.execute(f'GRANT EXECUTE ON FUNCTION mneme_record_live_embedding_model(text) TO "{role}"')


def downgrade() -> None:
    op.execute("DROP FUNCTION mneme_record_live_embedding_model(text)")
    # The recorded model stays: it is what the column holds, under either revision.
