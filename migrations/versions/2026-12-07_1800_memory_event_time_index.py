"""An index of each owner's memories by kind and event time, for the time a question names.

A question that names a day, a week or a month ("what did I do last May?") is about the
memories that happened then, whatever its words say of them. The search takes them as
candidates of their own, beside its lexical and vector pools: for each owner and kind, the
latest of those whose `event_at` lies in the named window, up to the pool. This index holds the
memories with an event time alone (a fact without one did not happen at a time: written in
bulk today, it must not be read for "what did I do today?"), keyed by owner and kind, so that a
scan reads the window's range backwards from its end and stops when the pool is full, whatever
the owner holds outside it. The organization's memories are those without a user (the table's
constraint), stated so by the search. `id` orders equal times, so the pool is the same memories
on every plan.

Revision ID: 20261207_1800
Revises: 20261207_0000
Create Date: 2026-12-07 18:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "20261207_1800"
down_revision: str | None = "20261207_0000"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX ix_memory_event_time ON memory (tenant_id, user_id, kind, event_at, id) "
        "WHERE event_at IS NOT NULL"
    )


def downgrade() -> None:
    op.drop_index("ix_memory_event_time", table_name="memory")
