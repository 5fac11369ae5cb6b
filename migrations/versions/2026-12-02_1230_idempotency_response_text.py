"""An idempotent replay answers with the stored response's own key order: `json`, not `jsonb`.

`jsonb` stores an object's keys in its own order (shorter keys first), so a replay read back
from it carried the same values as the first answer under another key order. `json` keeps the
text as written, so the replay is the first answer's JSON byte for byte. Records stored before
this revision keep the order `jsonb` gave them.

Revision ID: 20261202_1230
Revises: 20261202_0200
Create Date: 2026-12-02 12:30:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "20261202_1230"
down_revision: str | None = "20261202_0200"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE idempotency_record ALTER COLUMN response_body TYPE json "
        "USING response_body::json"
    )


def downgrade() -> None:
    op.execute(
        "ALTER TABLE idempotency_record ALTER COLUMN response_body TYPE jsonb "
        "USING response_body::jsonb"
    )
