"""Which keys of a stored profile the write path set: the keys whose value extraction wrote.

A key a user, an admin or a service set through the API is theirs: the write path must not
overwrite it with what a model read from a later conversation, as it does not replace a fact
written through the API on weak evidence. The document alone cannot tell who set a key, so
the row keeps the keys whose current value the write path wrote; every other stored key was
written through the API. A key written before this column existed counts as written through the
API: it may be the user's, and a value the write path can no longer update is only stale,
where one it overwrites is lost.

Revision ID: 20261207_2200
Revises: 20261207_1800
Create Date: 2026-12-07 22:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision: str = "20261207_2200"
down_revision: str | None = "20261207_1800"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "profile",
        sa.Column(
            "extracted_keys",
            pg.ARRAY(sa.Text()),
            server_default=sa.text("'{}'::text[]"),
            nullable=False,
        ),
    )


def downgrade() -> None:
    op.drop_column("profile", "extracted_keys")
