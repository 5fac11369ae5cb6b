"""The rules every input obeys, whichever way it enters: API bodies and query strings (the
pydantic models and FastAPI parameters), MCP arguments (the same models), import lines
(`service/admin`, column by column), job payloads and token claims (identifiers). One rule per
kind of value, written once here, so that a value refused on one path is refused on all of them
with a 4xx, and a value accepted on any path is one the service can read back.

- Timestamps are ISO 8601 text (a number is not a time: `2026` would be read as 33 minutes
  past the Unix epoch), carry a time zone, an offset within ±14:00 (the widest in use; Postgres and
  Python both accept it), and fall in years 1 to 9999 once converted to UTC: Postgres stores
  earlier and later times, but Python cannot read them back. The very first and last
  microsecond of that range are excluded too (the driver turns them into ±infinity).
- A number in a JSON document (a body, an MCP argument, an import line) is a JSON number, and
  an integer is a JSON integer: `true` is not 1 (a retention policy of `true` days would
  delete a tenant's episodes after one day), `"30"` is not 30, and `30.0` or `3e1` is not an
  integer (JSON writes an integer without a fraction or an exponent; every client's encoder
  does, and a value that needed rounding is not one the caller chose). A number in text (a
  query string, a setting from the environment) is read from its text.
- Weights and confidences are finite, in [0, 1] (a prior's weight in [0, 10]), and either 0
  or at least `UNIT_RESOLUTION`: the ranking multiplies them together in double precision,
  where a smaller positive value (a subnormal such as 5e-324, or 1e-300 times a decayed
  score) underflows, which Postgres reports as an error rather than rounding to 0.
- Identifiers (tenant and user ids) match `IDENTIFIER_PATTERN` as a whole: a trailing
  newline is a different string, never a second spelling of the same id.
- A JSON document names each member of an object once (a parser may keep either of two values).
- Free-form JSON (metadata, tool calls) is a JSON object of finite numbers, integers of at most
  `JSON_INTEGER_MAX_DIGITS` digits, text without NUL or lone surrogates, nested at most
  `MAX_JSON_DEPTH` deep and at most `JSON_MAX_BYTES` long: what `jsonb` stores and what reads
  back through Python's JSON decoder.
"""

from __future__ import annotations

import json
import math
import re
import sys
import unicodedata
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BeforeValidator,
    Field,
    Strict,
    StringConstraints,
)

INT64_MAX = 2**63 - 1

# --- timestamps ---------------------------------------------------------------------------

LATEST_NUMERIC_DATE = 253_402_300_799
"""9999-12-31T23:59:59Z in seconds since 1970: a token's time claim (`exp`, `nbf`, `iat`)
past it is no date this service (or Python's datetime, or a float without loss) can hold."""

MAX_UTC_OFFSET = timedelta(hours=14)
# The driver (asyncpg) sends the calendar's first and last microsecond as -infinity and
# infinity, and reads those back as naive times: neither instant can be stored as itself.
_FIRST_INSTANT = datetime.min.replace(tzinfo=UTC)
_LAST_INSTANT = datetime.max.replace(tzinfo=UTC)
_OUTSIDE_THE_CALENDAR = (
    "the time must fall in years 1 to 9999 once converted to UTC, after "
    "0001-01-01T00:00:00Z and before 9999-12-31T23:59:59.999999Z"
)


def storable_time(value: datetime) -> datetime:
    """`value` when it is a `Timestamp` (see the module docstring), else ValueError saying why."""
    offset = value.utcoffset()
    if offset is None:
        raise ValueError("the time needs a UTC offset or Z")
    if abs(offset) > MAX_UTC_OFFSET:
        raise ValueError("the UTC offset must be within ±14:00")
    try:
        utc = value.astimezone(UTC)
    except OverflowError as exc:
        raise ValueError(_OUTSIDE_THE_CALENDAR) from exc
    if utc in (_FIRST_INSTANT, _LAST_INSTANT):
        raise ValueError(_OUTSIDE_THE_CALENDAR)
    return value


def parse_timestamp(value: object) -> datetime:
    """An ISO 8601 text (`2026-12-02T10:45:00+01:00`, `…Z`) read as a `Timestamp`, else
    ValueError. Words Postgres would also take (`yesterday`, `infinity`, `4000-01-01 BC`) are
    not timestamps here, nor are numbers (pydantic would read `2026` or `"20260101"` as
    seconds since the Unix epoch)."""
    if not isinstance(value, str):
        raise ValueError("a time is ISO 8601 text with a UTC offset")
    if "\x00" in value:
        # fromisoformat reads `…+00:00\x00` as `…+00:00`: the text is not the time it reads as.
        raise ValueError("a time holds no NUL (\\u0000) characters")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{value[:40]!r} is not an ISO 8601 time") from None
    # fromisoformat reads a bare `20260101` as a date (midnight, no offset): refused below.
    return storable_time(parsed)


def _timestamp_input(value: object) -> datetime:
    """What a request's time becomes, by the one rule of `parse_timestamp` (a `datetime`
    built by the service itself passes as it is)."""
    if isinstance(value, datetime):
        return storable_time(value)
    return parse_timestamp(value)


Timestamp = Annotated[AwareDatetime, BeforeValidator(_timestamp_input)]
"""A point in time with a time zone (naive times are ambiguous), written as ISO 8601 text,
storable as timestamptz and readable back."""


# --- numbers ------------------------------------------------------------------------------

UNIT_RESOLUTION = 1e-6


def _resolvable(value: float) -> float:
    if 0 < value < UNIT_RESOLUTION:
        raise ValueError(f"must be 0 or at least {UNIT_RESOLUTION:g}")
    return value


def in_unit_interval(value: float) -> bool:
    """Whether `value` is a `UnitInterval` (for values that come from a model, not a request)."""
    return math.isfinite(value) and (value == 0 or UNIT_RESOLUTION <= value <= 1)


JsonInt = Annotated[int, Strict()]
"""An integer in a JSON document: a JSON integer, never a boolean, a text or a number with a
fraction or an exponent (see the module docstring)."""

JsonNumber = Annotated[float, Strict()]
"""A number in a JSON document: a JSON number (an integer is one), never a boolean or a text."""

JsonBool = Annotated[bool, Strict()]
"""A boolean in a JSON document: `true` or `false`, never `1`, `"yes"` or `"true"` (pydantic would
read each as true)."""

JsonText = Annotated[str, Strict()]
"""Text in a JSON document: a JSON string, never a number or a boolean."""

UnitInterval = Annotated[
    JsonNumber, Field(ge=0, le=1, allow_inf_nan=False), AfterValidator(_resolvable)
]
"""A weight or a confidence: 0, or from `UNIT_RESOLUTION` to 1."""

PriorWeight = Annotated[
    JsonNumber, Field(ge=0, le=10, allow_inf_nan=False), AfterValidator(_resolvable)
]
"""How much a prior adds on the fused scale: 0 (off), or from `UNIT_RESOLUTION` to 10."""

# Settings come from environment variables, which are text.
UnitIntervalText = Annotated[UnitInterval, Strict(False)]
"""A `UnitInterval` read from text."""

PriorWeightText = Annotated[PriorWeight, Strict(False)]
"""A `PriorWeight` read from text."""

PositiveInt64 = Annotated[int, Field(ge=1, le=INT64_MAX)]
"""A count or label from 1 that fits Postgres `bigint`, read from a query string's text."""

POSITION_MAX = 2**53 - 1
"""The largest position an append gives a message (`seq`), and the largest position or profile
version an import takes. Both travel as JSON numbers, which a JavaScript client reads as a
double, exact only up to 2^53 - 1; and the position after a thread's last one always fits
Postgres `bigint`."""

Position = Annotated[JsonInt, Field(ge=0, le=POSITION_MAX)]
"""A 0-based position or a version from 0, up to `POSITION_MAX`."""

# --- identifiers --------------------------------------------------------------------------

# Tenant and user ids come from token claims and appear in URLs and log lines: printable, no
# separators that would break a path, bounded. Matched with `fullmatch`: `$` would also
# accept a trailing newline.
IDENTIFIER_MAX = 256
IDENTIFIER_PUNCTUATION = "._:@|+=-"
IDENTIFIER_PATTERN = re.compile(
    rf"[A-Za-z0-9][A-Za-z0-9{re.escape(IDENTIFIER_PUNCTUATION)}]{{0,{IDENTIFIER_MAX - 1}}}"
)


def is_valid_identifier(value: str, max_length: int = IDENTIFIER_MAX) -> bool:
    return len(value) <= max_length and IDENTIFIER_PATTERN.fullmatch(value) is not None


def identifier_rule(max_length: int = IDENTIFIER_MAX) -> str:
    """`is_valid_identifier`'s rule in words, for a message that refuses an id."""
    return (
        f"1 to {max_length} ASCII letters, digits and {IDENTIFIER_PUNCTUATION}, "
        "starting with a letter or digit"
    )


CALLER_ALIAS = "me"
"""What a user path names to mean the caller itself; never a user's own id."""


def is_valid_user_id(value: str) -> bool:
    """An identifier a user may have: not `me`, which paths read as the caller (a user called
    `me` could not be addressed by a service or exported by an admin)."""
    return value != CALLER_ALIAS and is_valid_identifier(value)


def user_id_rule() -> str:
    """`is_valid_user_id`'s rule in words, for a message that refuses a user id."""
    return f"{identifier_rule()}, not {CALLER_ALIAS!r}"


def _user_id(value: str) -> str:
    if not is_valid_user_id(value):
        raise ValueError(f"must be a user id: {user_id_rule()}")
    return value


UserId = Annotated[str, StringConstraints(min_length=1, max_length=256), AfterValidator(_user_id)]
"""A user's id in a request body (see `is_valid_user_id`)."""


# --- free-form JSON -----------------------------------------------------------------------

MAX_JSON_DEPTH = 64
JSON_MAX_BYTES = 65_536
# Python refuses to convert longer integers to and from text (its default limit), so a longer
# one, although `jsonb` stores it, could not be read back.
JSON_INTEGER_MAX_DIGITS = sys.int_info.default_max_str_digits
_INTEGER_BOUND = 10**JSON_INTEGER_MAX_DIGITS

_UNSTORABLE_TEXT = re.compile("[\x00\ud800-\udfff]")


class InputRefused(ValueError):
    """A value these rules refuse: where it is (a pydantic-style location), why, and a short
    machine kind (`json_too_deep`, `finite_number`, …)."""

    def __init__(self, loc: list[str | int], message: str, kind: str) -> None:
        super().__init__(message)
        self.loc = loc
        self.message = message
        self.kind = kind


def too_deep(loc: list[str | int], max_depth: int = MAX_JSON_DEPTH) -> InputRefused:
    return InputRefused(loc, f"JSON nested deeper than {max_depth} levels.", "json_too_deep")


def check_json(document: Any, loc: list[str | int], *, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Raise InputRefused for the first value of `document` (a parsed JSON value, located at
    `loc`) that breaks the free-form JSON rules other than size; `document` itself is level 1
    of the `max_depth` levels allowed."""
    # Iterative, so no document can exhaust the stack here.
    pending: list[tuple[Any, list[str | int], int]] = [(document, loc, 1)]
    while pending:
        value, where, level = pending.pop()
        if level > max_depth:
            raise too_deep(where, max_depth)
        if isinstance(value, str):
            _check_text(value, where)
        elif isinstance(value, bool) or value is None:
            continue
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise InputRefused(where, "Numbers must be finite.", "finite_number")
        elif isinstance(value, int):
            _check_integer(value, where)
        elif isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise InputRefused(where, "Object keys are text.", "json_invalid")
                _check_text(key, where)
                pending.append((item, [*where, key], level + 1))
        elif isinstance(value, list):
            pending.extend((item, [*where, i], level + 1) for i, item in enumerate(value))
        else:
            raise InputRefused(where, "Not a JSON value.", "json_invalid")


def is_storable_text(value: str) -> bool:
    """Whether Postgres text can hold `value`: no NUL character, no lone UTF-16 surrogate."""
    return _UNSTORABLE_TEXT.search(value) is None


def _check_text(value: str, loc: list[str | int]) -> None:
    found = _UNSTORABLE_TEXT.search(value)
    if found is None:
        return
    if found.group() == "\x00":
        raise InputRefused(loc, "Text must not contain NUL (\\u0000) characters.", "nul_character")
    raise InputRefused(loc, "Text must not contain lone UTF-16 surrogates.", "lone_surrogate")


def _check_integer(value: int, loc: list[str | int]) -> None:
    if abs(value) >= _INTEGER_BOUND:
        raise InputRefused(
            loc,
            f"Integers must have at most {JSON_INTEGER_MAX_DIGITS} digits.",
            "integer_too_long",
        )


def _refuse_constant(name: str) -> Any:
    raise InputRefused(["body"], f"{name} is not a JSON number", "json_invalid")


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose member names are unique (I-JSON, RFC 7493): of `{"text": "a", "text":
    "b"}` a parser may keep either value, so which one the client meant is unknown."""
    document = dict(pairs)
    if len(document) == len(pairs):
        return document
    seen: set[str] = set()
    for name, _ in pairs:
        if name in seen:
            raise InputRefused(
                ["body"], f"The member {name[:40]!r} appears twice in one object.", "json_invalid"
            )
        seen.add(name)
    return document


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        # `1e400` is valid JSON, but no double (so no jsonb, no float column) holds it.
        raise InputRefused(["body"], f"{text[:40]} is too large for a number", "finite_number")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > JSON_INTEGER_MAX_DIGITS:
        raise InputRefused(
            ["body"],
            f"Integers must have at most {JSON_INTEGER_MAX_DIGITS} digits.",
            "integer_too_long",
        )
    return int(text)


def loads_strict(raw: bytes, loc: list[str | int] | None = None) -> Any:
    """Parse a JSON document under the free-form JSON rules (except size), or raise
    InputRefused located under `loc` (the request body by default)."""
    where: list[str | int] = ["body"] if loc is None else loc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputRefused(where, "The text is not UTF-8.", "json_invalid") from exc
    try:
        document = json.loads(
            text,
            parse_constant=_refuse_constant,
            parse_float=_finite_float,
            parse_int=_bounded_int,
            object_pairs_hook=_unique_members,
        )
    except InputRefused as refused:
        raise InputRefused(where, refused.message, refused.kind) from None
    except RecursionError as exc:
        raise too_deep(where) from exc
    except json.JSONDecodeError as exc:
        raise InputRefused(where, f"The text is not JSON: {exc.msg}.", "json_invalid") from exc
    check_json(document, where)
    return document


def _storable_json(value: dict[str, Any]) -> dict[str, Any]:
    try:
        check_json(value, [])
    except InputRefused as refused:
        where = "/".join(str(part) for part in refused.loc)
        raise ValueError(f"{refused.message} (at /{where})" if where else refused.message) from None
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
    if size > JSON_MAX_BYTES:
        raise ValueError(f"at most {JSON_MAX_BYTES} bytes of JSON (this is {size})")
    return value


JsonObject = Annotated[dict[str, Any], AfterValidator(_storable_json)]
"""Free-form structured data kept with a record (metadata, a tool call): see the module
docstring for what it may hold."""

# --- text ---------------------------------------------------------------------------------

QUERY_MAX_CHARS = 4000
# Separators (spaces, line and paragraph separators), control and format characters.
_INVISIBLE = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf"})
# Characters of other categories that render as nothing: Unicode's default-ignorable marks and
# fillers (the combining grapheme joiner, the Hangul fillers, Mongolian and other variation
# selectors) and the blank Braille pattern.
_BLANK_LOOKING = frozenset(
    [
        *(0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x2800, 0x3164, 0xFFA0),
        *range(0x180B, 0x1810),
        *range(0xFE00, 0xFE10),
        *range(0xE0100, 0xE01F0),
    ]
)


def _is_invisible(character: str) -> bool:
    return unicodedata.category(character) in _INVISIBLE or ord(character) in _BLANK_LOOKING


def visible_text(value: str) -> str:
    """`value` without the whitespace and invisible characters at either end ("" when it
    holds nothing else)."""
    start, end = 0, len(value)
    while start < end and _is_invisible(value[start]):
        start += 1
    while end > start and _is_invisible(value[end - 1]):
        end -= 1
    return value[start:end]


def stripped_visible(value: str) -> str:
    """`value` without the whitespace and invisible characters at either end; refused when
    nothing else is left. Whitespace is not the only way to say nothing: control and format
    characters (a zero-width space, a byte-order mark) give neither lexemes nor a meaningful
    embedding."""
    stripped = visible_text(value)
    if not stripped:
        raise ValueError("must contain something besides whitespace and invisible characters")
    return stripped


def has_visible_character(value: str) -> str:
    """`value` as it is, refused as `stripped_visible` refuses it."""
    stripped_visible(value)
    return value


QueryText = Annotated[
    str,
    StringConstraints(min_length=1, max_length=QUERY_MAX_CHARS),
    AfterValidator(has_visible_character),
]
"""What a search or a context block is asked: words, not only whitespace or invisible
characters."""


SPEAKER_MAX_CHARS = 200


SpeakerName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=SPEAKER_MAX_CHARS),
    AfterValidator(stripped_visible),
]
"""Who said something in a conversation (a participant's name, not a role), stored without
surrounding whitespace and invisible characters."""


# --- the account overlay ------------------------------------------------------------------

PROVIDER_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
SOCIALS_MAX = 32

EMAIL_SHAPE = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
"""An email address as far as the overlay checks one: a local part, one `@`, a domain holding
a dot, no whitespace anywhere. Whether the mailbox exists is the identity provider's concern;
this only keeps text that is no address at all out of a field every reader takes for one."""
AVATAR_SCHEMES = frozenset({"http", "https"})
"""An avatar is a picture a page loads: a web URL, never `javascript:`, `data:` or `file:`."""


def account_value(value: str) -> str | None:
    """An overlay field as it is, or None when it holds nothing visible: a name (or an email,
    an avatar) of whitespace or invisible characters is no name, from a token as from a
    service."""
    return value if visible_text(value) else None


def _email_shaped(value: str) -> str:
    if account_value(value) is not None and not EMAIL_SHAPE.fullmatch(value):
        raise ValueError("must be an email address (local part, `@`, a domain with a dot)")
    return value


def _web_url(value: str) -> str:
    if account_value(value) is None:
        return value
    try:
        parts = urlsplit(value)
    except ValueError:
        parts = None
    if parts is None or parts.scheme.lower() not in AVATAR_SCHEMES or not parts.hostname:
        raise ValueError("must be an http or https URL with a host")
    return value


AccountName = Annotated[str, StringConstraints(max_length=256)]
AccountEmail = Annotated[str, StringConstraints(max_length=320), AfterValidator(_email_shaped)]
AvatarUrl = Annotated[str, StringConstraints(max_length=2048), AfterValidator(_web_url)]
ProviderName = Annotated[str, StringConstraints(pattern=PROVIDER_PATTERN)]
"""What the account overlay holds about a user (its name, email, picture URL and the names of
its linked OAuth providers, at most `SOCIALS_MAX`), whether a service sets it or a token's
claims bring it. A value with nothing visible is no value (`account_value`), and passes these
types to be cleared; any other email must look like one (`EMAIL_SHAPE`) and an avatar must be
an http(s) URL (`AVATAR_SCHEMES`)."""
