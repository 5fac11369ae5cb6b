"""The shared input types: property tests that whatever they accept, Postgres stores and Python
reads back unchanged, and whatever they refuse is refused with a ValueError (a 422 upstream),
never an exception of another kind."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.kit.types import (
    MAX_JSON_DEPTH,
    MAX_UTC_OFFSET,
    UNIT_RESOLUTION,
    InputRefused,
    JsonObject,
    QueryText,
    Timestamp,
    UnitInterval,
    is_valid_identifier,
    loads_strict,
    parse_timestamp,
)

TIMESTAMP = TypeAdapter(Timestamp)
UNIT = TypeAdapter(UnitInterval)
JSON_OBJECT = TypeAdapter(JsonObject)
QUERY = TypeAdapter(QueryText)
DB_EXAMPLES = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

offsets = st.integers(min_value=-24 * 60 + 1, max_value=24 * 60 - 1).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)
edge_years = st.one_of(st.integers(1, 3), st.integers(9997, 9999), st.integers(1, 9999))
moments = st.one_of(
    st.builds(
        lambda year, rest, tz: rest.replace(year=year, tzinfo=tz),
        edge_years,
        st.datetimes(min_value=datetime(2001, 1, 1), max_value=datetime(2001, 12, 31)),
        offsets,
    ),
    st.sampled_from(
        [
            datetime.min.replace(tzinfo=UTC),
            datetime.max.replace(tzinfo=UTC),
            datetime.min.replace(hour=14, tzinfo=timezone(timedelta(hours=14))),
            datetime.min.replace(microsecond=1, tzinfo=UTC),
            (datetime.max - timedelta(microseconds=1)).replace(tzinfo=UTC),
        ]
    ),
)


def _in_range(value: datetime) -> bool:
    offset = value.utcoffset()
    assert offset is not None
    if abs(offset) > MAX_UTC_OFFSET:
        return False
    try:
        utc = value.astimezone(UTC)
    except OverflowError:
        return False
    # The driver's ±infinity: the calendar's first and last microsecond.
    return utc not in (datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC))


@given(moments)
def test_a_timestamp_is_accepted_exactly_when_its_offset_and_utc_value_are_in_range(
    value: datetime,
) -> None:
    if _in_range(value):
        assert TIMESTAMP.validate_python(value) == value
        assert parse_timestamp(value.isoformat()) == value
    else:
        with pytest.raises(ValidationError):
            TIMESTAMP.validate_python(value)
        with pytest.raises(ValueError, match=r"offset|years 1 to 9999"):
            parse_timestamp(value.isoformat())


@pytest.mark.parametrize(
    "raw",
    [
        "0001-01-01T00:00:00+14:00",
        "9999-12-31T23:59:59-00:01",
        "0001-01-01T00:00:00Z",
        "9999-12-31T23:59:59.999999+00:00",
        "2026-01-01T00:00:00+15:00",
        "2026-01-01T00:00:00",
        "2026-01-01",
        "200000-01-01T00:00:00Z",
        "4000-01-01 BC",
        "yesterday",
        "infinity",
        "-infinity",
        "epoch",
        "",
    ],
)
def test_text_postgres_would_take_but_python_cannot_read_back_is_not_a_timestamp(
    raw: str,
) -> None:
    with pytest.raises(ValueError, match=r"ISO 8601|offset|years 1 to 9999"):
        parse_timestamp(raw)


@pytest.mark.parametrize("raw", [None, 0, 1.5, ["2026-01-01T00:00:00Z"], {"at": 1}])
def test_a_timestamp_on_an_import_line_is_text(raw: Any) -> None:
    with pytest.raises(ValueError, match="ISO 8601"):
        parse_timestamp(raw)


@pytest.mark.parametrize("raw", ["2026-12-07T23:10:29.096785+00:00\x00", "2026-01-01T00:00Z\x00"])
def test_a_time_followed_by_nul_is_not_that_time(raw: str) -> None:
    # Python's parser stops at the NUL and would read the text before it.
    with pytest.raises(ValueError, match="NUL"):
        parse_timestamp(raw)


@DB_EXAMPLES
@given(moments.filter(_in_range))
async def test_every_accepted_timestamp_reads_back_from_postgres_as_the_same_instant(
    owner_engine: AsyncEngine, value: datetime
) -> None:
    async with owner_engine.connect() as connection:
        # As the import sends it (text Postgres parses) and as the API does (the driver's
        # binary encoding of the datetime).
        as_text = await connection.execute(
            text("SELECT CAST(CAST(:at AS text) AS timestamptz) AS at"),
            {"at": parse_timestamp(value.isoformat()).isoformat()},
        )
        as_bound = await connection.execute(text("SELECT CAST(:at AS timestamptz)"), {"at": value})
        stored = [as_text.scalar_one(), as_bound.scalar_one()]
    assert stored == [value, value]
    assert all(moment.utcoffset() is not None for moment in stored)


@given(st.floats(allow_nan=True, allow_infinity=True) | st.integers(-5, 5))
def test_a_weight_is_zero_or_between_the_resolution_and_one(value: float) -> None:
    accepted = math.isfinite(value) and (value == 0 or UNIT_RESOLUTION <= value <= 1)
    if accepted:
        assert UNIT.validate_python(value) == value
    else:
        with pytest.raises(ValidationError):
            UNIT.validate_python(value)


@pytest.mark.parametrize("weight", [1e-300, 5e-324, 1e-7])
def test_a_weight_too_small_to_multiply_safely_is_refused_with_the_rule(weight: float) -> None:
    with pytest.raises(ValidationError, match="must be 0 or at least 1e-06"):
        UNIT.validate_python(weight)


identifier_characters = st.sampled_from("abcXYZ019._:@|+=-\n\r\t /%\x00\u00e9")


@given(st.text(identifier_characters, max_size=12))
def test_an_identifier_is_valid_only_as_a_whole(value: str) -> None:
    valid = (
        0 < len(value) <= 256
        and value[0].isascii()
        and value[0].isalnum()
        and all(c.isascii() and (c.isalnum() or c in "._:@|+=-") for c in value)
    )
    assert is_valid_identifier(value) is valid


@pytest.mark.parametrize("value", ["ada\n", "ada\r\n", "\nada", "ada\n\n"])
def test_a_trailing_or_leading_newline_makes_an_identifier_invalid(value: str) -> None:
    assert not is_valid_identifier(value)


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=5)


def _texts(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [*value, *(t for item in value.values() for t in _texts(item))]
    if isinstance(value, list):
        return [t for item in value for t in _texts(item)]
    return [value] if isinstance(value, str) else []


def _storable(value: Any) -> bool:
    return not any(c == "\x00" or 0xD800 <= ord(c) <= 0xDFFF for t in _texts(value) for c in t)


@given(json_objects)
def test_free_form_json_is_accepted_when_storable_and_refused_with_a_value_error_otherwise(
    value: dict[str, Any],
) -> None:
    if _storable(value):
        assert JSON_OBJECT.validate_python(value) == value
    else:
        with pytest.raises(ValidationError):
            JSON_OBJECT.validate_python(value)


@DB_EXAMPLES
@given(json_objects.filter(_storable))
async def test_accepted_free_form_json_reads_back_from_jsonb_unchanged(
    owner_engine: AsyncEngine, value: dict[str, Any]
) -> None:
    JSON_OBJECT.validate_python(value)
    async with owner_engine.connect() as connection:
        row = await connection.execute(
            text("SELECT CAST(CAST(:doc AS jsonb) AS text)"), {"doc": json.dumps(value)}
        )
        stored = json.loads(row.scalar_one())
    # jsonb keeps numbers as decimals: a float may come back as an equal integer.
    assert _numbers_as_floats(stored) == _numbers_as_floats(value)


def _numbers_as_floats(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _numbers_as_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers_as_floats(v) for v in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return value


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ({"x": math.inf}, "Numbers must be finite"),
        ({"x": [-math.inf]}, "Numbers must be finite"),
        ({"x": math.nan}, "Numbers must be finite"),
        ({"x": 10**5000}, "at most 4300 digits"),
        ({"x": "a\x00b"}, "NUL"),
        ({"x\ud800": 1}, "surrogates"),
        ({"x": "y" * 70_000}, "at most 65536 bytes"),
    ],
)
def test_free_form_json_names_what_it_refuses(value: dict[str, Any], kind: str) -> None:
    with pytest.raises(ValidationError, match=kind):
        JSON_OBJECT.validate_python(value)


def _nested(levels: int) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for _ in range(levels - 1):
        nested = {"k": nested}
    return nested


def test_free_form_json_is_accepted_to_the_depth_limit_and_refused_beyond() -> None:
    assert JSON_OBJECT.validate_python(_nested(MAX_JSON_DEPTH)) == _nested(MAX_JSON_DEPTH)
    with pytest.raises(ValidationError, match=f"nested deeper than {MAX_JSON_DEPTH} levels"):
        JSON_OBJECT.validate_python(_nested(MAX_JSON_DEPTH + 1))


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        (b'{"x": 1e400}', "finite_number"),
        (b'{"x": -1e400}', "finite_number"),
        (b'{"x": ' + b"9" * 5000 + b"}", "integer_too_long"),
        (b"[" * 5000 + b"]" * 5000, "json_too_deep"),
        (b'{"x": NaN}', "json_invalid"),
        (b"\xff", "json_invalid"),
        # Which of two values of one member the client meant is unknown.
        (b'{"x": 1, "x": 2}', "json_invalid"),
        (b'{"x": [{"y": 1, "y": 1}]}', "json_invalid"),
    ],
)
def test_strict_parsing_refuses_what_no_column_holds(raw: bytes, kind: str) -> None:
    with pytest.raises(InputRefused) as refused:
        loads_strict(raw)
    assert refused.value.kind == kind


@given(st.binary(max_size=64) | json_values.map(lambda v: json.dumps(v).encode()))
def test_strict_parsing_either_parses_or_refuses(raw: bytes) -> None:
    try:
        loads_strict(raw)
    except InputRefused as refused:
        refusal = refused
    else:
        return
    assert refusal.message
    assert refusal.kind in {"json_invalid", "json_too_deep", "nul_character", "lone_surrogate"}


@pytest.mark.parametrize(
    "query",
    [
        "\u200b",
        "\u200b \u200b",
        "\ufeff",
        "\u2028",
        " \t\n",
        "\x01",
        "\u2800",
        "\u3164\u115f",
        "\u034f",
    ],
)
def test_a_query_of_invisible_characters_is_refused(query: str) -> None:
    with pytest.raises(ValidationError, match="besides whitespace"):
        QUERY.validate_python(query)


@pytest.mark.parametrize("query", ["tea", "\u200btea", "日本", "🍵"])
def test_a_query_with_a_visible_character_is_accepted(query: str) -> None:
    assert QUERY.validate_python(query) == query
