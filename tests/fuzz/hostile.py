"""Hostile values of the classes that once reached the database unchecked (times at and past
the calendar's edges, numbers no double holds, identifiers with separators, JSON nested too
deep, secrets), and strategies that build import bodies from them.

Values are JSON *text*, spliced into a line as written, so that what no encoder produces
(`1e400`, `NaN`, a 5,000-digit integer) reaches the service.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st

from tests.secret_samples import SAMPLES

EXPORT_FORMAT = "mneme-user-export"

HOSTILE_TIMES = [
    "0001-01-01T00:00:00+14:00",
    "0001-01-01T00:00:00Z",
    "0001-01-01T13:59:59+14:00",
    "9999-12-31T23:59:59.999999Z",
    "9999-12-31T23:59:59-14:00",
    "9999-12-31T23:59:59-00:01",
    "200000-01-01T00:00:00Z",
    "4000-01-01 BC",
    "yesterday",
    "infinity",
    "-infinity",
    "epoch",
    "now",
    "2026-01-01T00:00:00",
    "2026-01-01",
    "2026-01-01T00:00:00+15:00",
    "2026-01-01T00:00:00-24:00",
    "2026-01-01T00:00:00+05:30:15.5",
    "2026-02-30T00:00:00Z",
    "2026-01-01T25:00:00Z",
    "2026-W01-1",
    "",
    " ",
    "2026-01-01T00:00:00Z\n",
    "2026-01-01T00:00:00\u0000Z",
]
"""Times as text: each the service must refuse with a 4xx or store so that it reads back."""

HOSTILE_NUMBERS = [
    "1e400",
    "-1e400",
    "1e-400",
    "5e-324",
    "1e-300",
    "1e308",
    "-0.0",
    "NaN",
    "Infinity",
    "-Infinity",
    "9" * 4301,
    "-" + "9" * 4301,
    "9223372036854775808",
    "-9223372036854775809",
    "1.7976931348623157e309",
    "0x10",
    "01",
    "1.",
    ".5",
    "+1",
]
"""Numbers as JSON text (some of them not valid JSON at all)."""

HOSTILE_IDENTIFIERS = [
    "ada\n",
    "ada\r\n",
    " ada",
    "ada ",
    "ada/../bob",
    "ada%2Fbob",
    "ada\u0000",
    "ada\u200b",
    "a" * 257,
    "-ada",
    ".ada",
    "ada\tbob",
    "ÄDA",
    "ada;DROP TABLE memory",
    "me\n",
    "me",
    "",
]
"""User ids that are not identifiers (a path segment or a JSON string)."""

BLANK_TEXTS = [
    "",
    "   ",
    "\u200b",
    "\ufeff\u2060\u200d",
    "\u00ad",
    "\u3164",
    "\u2800",
    "\u034f\ufe0f",
    "\u2028\u2029",
    "\u3000\u00a0",
]
"""Text a reader sees nothing in: every field that needs words must refuse it."""


def nested_json(depth: int, *, kind: str = "list") -> str:
    """JSON text nested `depth` levels deep."""
    if kind == "list":
        return "[" * depth + "]" * depth
    return '{"k":' * depth + "{}" + "}" * depth


HOSTILE_JSON = [
    nested_json(33),
    nested_json(65),
    nested_json(1000),
    nested_json(65, kind="object"),
    nested_json(5000, kind="object"),
    '{"x": "\\u0000"}',
    '{"x": "\\ud800"}',
    '{"\\ud800": 1}',
    '{"x": 1e400}',
    '{"x": NaN}',
    '{"x": ' + "9" * 5000 + "}",
    '{"x": "' + "y" * 70_000 + '"}',
    "[1, 2]",
    '"text"',
    "null",
    "true",
    '{"a": 1, "a": 2}',
]
"""Free-form JSON values (for metadata, tool calls, documents) as text."""

SECRET_TEXTS = [sample.text for sample in SAMPLES.values()]


def splice(record: dict[str, Any], column: str, value_json: str) -> str:
    """`record`'s line with `data[column]` set to `value_json` exactly as written."""
    data = {k: v for k, v in record["data"].items() if k != column}
    head = json.dumps({"type": record["type"], "data": {column: "<>", **data}})
    return head.replace('"<>"', value_json, 1)


offsets = st.integers(min_value=-24 * 60 + 1, max_value=24 * 60 - 1).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)
generated_times = st.builds(
    lambda moment, tz: moment.replace(tzinfo=tz).isoformat(),
    st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)),
    offsets,
)
times = st.one_of(st.sampled_from(HOSTILE_TIMES), generated_times)
"""A time as text: a hostile one, or any ISO time in any offset up to ±23:59."""

json_values = st.one_of(
    st.sampled_from(HOSTILE_JSON),
    st.sampled_from(HOSTILE_NUMBERS),
    st.sampled_from(SECRET_TEXTS).map(json.dumps),
    st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8)),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
        max_leaves=8,
    ).map(lambda value: json.dumps(value, allow_nan=True)),
)
"""A JSON value as text: hostile, a secret, or generated (`NaN` and `Infinity` included)."""

RECORD_COLUMNS = {
    "user_account": ["id", "name", "email", "socials", "created_at", "last_seen_at"],
    "profile": ["user_id", "scope", "document", "version", "created_at", "updated_at"],
    "thread": ["id", "user_id", "title", "metadata", "created_at", "last_message_at"],
    "memory": ["id", "user_id", "scope", "kind", "text", "confidence", "metadata", "event_at"],
    "message": ["thread_id", "user_id", "seq", "role", "content", "tool_calls", "metadata"],
    "audit_log": ["actor_kind", "actor_id", "action", "target_type", "target_id", "detail"],
    "colour": ["red"],
}


@st.composite
def import_bodies(draw: st.DrawFn, user_ids: st.SearchStrategy[str]) -> bytes:
    """An NDJSON body shaped like an export: a header (sometimes wrong), then records of the
    export's types (and unknown ones) whose columns hold hostile or generated values."""
    user = draw(user_ids)
    records = []
    counts: dict[str, int] = {}
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        kind = draw(st.sampled_from(sorted(RECORD_COLUMNS)))
        counts[kind] = counts.get(kind, 0) + 1
        owner = {"id": user} if kind == "user_account" else {"user_id": user}
        base = {"type": kind, "data": owner}
        column = draw(st.sampled_from(RECORD_COLUMNS[kind]))
        value = draw(st.one_of(times.map(json.dumps), json_values, times))
        records.append(splice(base, column, value))
    header: dict[str, Any] = {
        "type": "header",
        "format": draw(st.sampled_from([EXPORT_FORMAT, "other"])),
        "version": draw(st.sampled_from([1, 2, "1"])),
        "user_id": user,
        "counts": counts,
    }
    lines = [json.dumps(header), *records]
    return ("\n".join(lines) + draw(st.sampled_from(["\n", "", "\n\n", "\r\n"]))).encode(
        "utf-8", "surrogatepass"
    )
