"""An index of the procedural memories alone, for the context's procedures.

Every context reads the live procedural memories of the user and of the organization that
fill a slot. No other index leads with what that read tests: `ix_memory_owner` has no scope
(the organization's memories are those without a user, a condition it cannot seek), and
`ix_memory_lexical` holds every memory of the owner, so the organization's part of the read
visited all of the organization's memories to keep its few procedures (7 ms of a context at
5,000 organization memories, growing with the organization). The index is partial to
`kind = 'procedural'`: a handful of entries per owner, and the read states the kind as a
literal so that a plan made once for the statement can use it.

Revision ID: 20261203_0800
Revises: 20261202_1500
Create Date: 2026-12-03 08:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "20261203_0800"
down_revision: str | None = "20261202_1500"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX ix_memory_procedures ON memory (tenant_id, scope, user_id, category) "
        "WHERE kind = 'procedural'"
    )


def downgrade() -> None:
    op.drop_index("ix_memory_procedures", table_name="memory")
