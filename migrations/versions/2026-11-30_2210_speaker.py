"""Who said it: a message's author name and the speaker of a memory of something said.

A conversation has named participants ("Ada", "Ben"), and a question about it often names one
of them ("What did Ada say about Lisbon?"). A message may now carry its author's `name` (the
participant, beside the role), and a memory its `speaker`; memories derived from a turn take
the turn's author. Search gives the memories of a speaker the question names a `speaker`
score, matched against the speakers the owner's memories actually have.

Revision ID: 20261130_2210
Revises: 20261130_1600
Create Date: 2026-11-30 22:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261130_2210"
down_revision: str | None = "20261130_1600"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SPEAKER_MAX = 200


def upgrade() -> None:
    op.add_column("memory", sa.Column("speaker", sa.Text(), nullable=True))
    op.execute(
        "ALTER TABLE memory ADD CONSTRAINT ck_memory_speaker_length CHECK "
        f"(speaker IS NULL OR char_length(speaker) BETWEEN 1 AND {SPEAKER_MAX})"
    )
    op.add_column("message", sa.Column("name", sa.Text(), nullable=True))
    op.execute(
        "ALTER TABLE message ADD CONSTRAINT ck_message_name_length CHECK "
        f"(name IS NULL OR char_length(name) BETWEEN 1 AND {SPEAKER_MAX})"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE message DROP CONSTRAINT ck_message_name_length")
    op.drop_column("message", "name")
    op.execute("ALTER TABLE memory DROP CONSTRAINT ck_memory_speaker_length")
    op.drop_column("memory", "speaker")
