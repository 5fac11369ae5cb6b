"""Input types that carry the database's limits, so out-of-range values are a 422, not a 500."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, AwareDatetime, Field, StringConstraints

INT64_MAX = 2**63 - 1


def _convertible_to_utc(value: datetime) -> datetime:
    # Timestamps are stored and compared in UTC; one whose UTC value leaves the calendar
    # (year 1 minus an offset, year 9999 plus one) cannot be sent to Postgres at all.
    try:
        value.astimezone(UTC)
    except OverflowError as exc:
        raise ValueError("the time is outside the supported range once converted to UTC") from exc
    return value


Timestamp = Annotated[AwareDatetime, AfterValidator(_convertible_to_utc)]
"""A point in time with a time zone (naive times are ambiguous), storable as timestamptz."""

PositiveInt64 = Annotated[int, Field(ge=1, le=INT64_MAX)]
"""A count or label from 1 that fits Postgres `bigint`."""


QUERY_MAX_CHARS = 4000


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must contain something besides whitespace")
    return value


QueryText = Annotated[
    str, StringConstraints(min_length=1, max_length=QUERY_MAX_CHARS), AfterValidator(_not_blank)
]
"""What a search or a context block is asked: words, not only whitespace (a query of spaces
or control characters has no lexemes and no meaningful embedding)."""


SPEAKER_MAX_CHARS = 200


def _speaker_name(value: str) -> str:
    stripped = value.strip()
    if not stripped:
        raise ValueError("must contain something besides whitespace")
    return stripped


SpeakerName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=SPEAKER_MAX_CHARS),
    AfterValidator(_speaker_name),
]
"""Who said something in a conversation (a participant's name, not a role), stored without
surrounding whitespace."""
