"""An index of each thread's turns in time order, for the search's neighbour look-ups.

A search lends each candidate's fused score to the turn right before and right after it in its
source thread, and only turns (episodic memories) receive it. Walked on the index of every
memory of the thread, a look-up from a fact stepped over every fact drawn before or after it
until it met a turn, or over the whole rest of the thread when none was left. This index holds
the threads' episodic memories alone, so a look-up starts at the candidate's time among the
turns and stops at the first one that is in the candidate's section.

Revision ID: 20261204_2115
Revises: 20261204_1300
Create Date: 2026-12-04 21:15:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "20261204_2115"
down_revision: str | None = "20261204_1300"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX ix_memory_thread_turns ON memory "
        "(tenant_id, source_thread_id, happened_at, id) "
        "WHERE source_thread_id IS NOT NULL AND kind = 'episodic'"
    )


def downgrade() -> None:
    op.drop_index("ix_memory_thread_turns", table_name="memory")
