"""Opaque keyset cursors: the last row's sort key, base64url-encoded JSON."""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, Field

from service.errors import ValidationFailed
from service.kit.types import INT64_MAX, is_storable_text, is_valid_identifier, parse_timestamp

ItemT = TypeVar("ItemT")

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 200


class Page(BaseModel, Generic[ItemT]):
    items: list[ItemT]
    next_cursor: str | None = Field(
        default=None, description="Pass as `cursor` to fetch the next page; null on the last page."
    )


def encode_cursor(values: list[Any]) -> str:
    raw = json.dumps(values, separators=(",", ":"), default=str).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, *, shape: tuple[type, ...]) -> list[Any]:
    """The values of a cursor this API issued: a JSON list whose values have exactly the
    types of `shape`, its text free of NUL and lone surrogates (a client may send any bytes:
    anything else is 422, never a crash)."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        values = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise _bad_cursor() from exc
    if (
        not isinstance(values, list)
        or len(values) != len(shape)
        # `type(...) is`: a JSON `true` is no position (bool is an int in Python).
        or any(type(value) is not kind for value, kind in zip(values, shape, strict=True))
        # Every text an issued cursor holds was read from a Postgres column, which holds
        # neither; one that does was forged, and would reach the database as a query
        # argument it cannot encode (or, in a time, be cut short by the parser at the NUL).
        or any(isinstance(value, str) and not is_storable_text(value) for value in values)
    ):
        raise _bad_cursor()
    return values


def decode_newest_first_cursor(cursor: str | None) -> tuple[datetime, uuid.UUID] | None:
    """The (created_at, id) position of a newest-first listing's cursor, or None."""
    if cursor is None:
        return None
    created_at, row_id = decode_cursor(cursor, shape=(str, str))
    try:
        # Issued cursors hold UTC times; anything else was forged (the same rule as any time).
        return parse_timestamp(created_at), uuid.UUID(row_id)
    except (TypeError, ValueError) as exc:
        raise _bad_cursor() from exc


def decode_identifier_cursor(cursor: str | None) -> str | None:
    """The id an id-ordered listing's cursor (`[id]`, a tenant's or user's id) points after,
    or None."""
    if cursor is None:
        return None
    identifier: str = decode_cursor(cursor, shape=(str,))[0]
    if not is_valid_identifier(identifier):
        raise _bad_cursor()
    return identifier


def decode_position_cursor(cursor: str | None) -> int | None:
    """The sequence number a position cursor (`[seq]`) points after, or None."""
    if cursor is None:
        return None
    position: int = decode_cursor(cursor, shape=(int,))[0]
    if not 0 <= position <= INT64_MAX:
        raise _bad_cursor()
    return position


def newest_first_cursor(
    rows: Sequence[Any], limit: int, *, time_field: str = "created_at"
) -> str | None:
    """The cursor after `rows[limit - 1]` when a page fetched `limit + 1` rows, else None."""
    if len(rows) <= limit:
        return None
    last = rows[limit - 1]
    return encode_cursor([getattr(last, time_field).isoformat(), str(last.id)])


def _bad_cursor() -> ValidationFailed:
    return ValidationFailed(
        "The cursor is not one this API issued.",
        errors=[{"loc": ["query", "cursor"], "msg": "unknown cursor", "type": "cursor"}],
    )
