"""The live vector column records the model its vectors came from.

A vector column as first migrated recorded no model: it held whatever model the service was
configured with. The packaged default model now runs its products in int8, a vector space of its
own (`all-MiniLM-L6-v2-onnx-int8-dynamic`), so a database that already holds vectors must say
whose they are: otherwise the service would take them for the new default's and compare them
with its questions. The model most of the live column's vectors name is recorded; the service
then keeps serving that column with that model (it runs a packaged model by itself) until the
column changes models (`mneme reembed start`). A database without vectors records nothing and
takes the configured model, as before.

Revision ID: 20261204_0500
Revises: 20261203_0800
Create Date: 2026-12-04 05:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261204_0500"
down_revision: str | None = "20261203_0800"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Two statements rather than an UPDATE ... FROM (subquery): on Citus `memory` is distributed and
# `embedding_column` a plain table on the coordinator.
MOST_STORED_MODEL_SQL = sa.text(
    "SELECT embedding_model FROM memory WHERE embedding_model IS NOT NULL "
    "GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1"
)


def upgrade() -> None:
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


def downgrade() -> None:
    # The recorded model stays: it is what the column holds, under either revision.
    pass
