"""Refuse request input that no schema or database column can hold, before anything parses it.

Every JSON body (`application/json` and `…+json`) is decoded here strictly, once, before the
framework's own parser and the pydantic models see it. Refused with a 422 problem:

- text that is not UTF-8, or not JSON;
- NaN, Infinity and -Infinity (Python's parser accepts them; JSON and jsonb do not);
- NUL characters in any string or key (Postgres `text` and `jsonb` cannot store them);
- lone UTF-16 surrogates such as `"\\ud800"` (valid JSON escapes, but not encodable as UTF-8);
- nesting deeper than `MAX_JSON_DEPTH` (deep documents exhaust recursion in parsers,
  serialisers and Postgres alike, and no field of this API needs them).

The URL gets the same NUL rule: a `%00` in the path or query string is refused here rather
than discovered by the database.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import unquote_to_bytes

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.errors import problem_response
from service.kit.media_type import is_json_media_type

MAX_JSON_DEPTH = 64

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_NUL_IN_URL = "The URL must not contain NUL (%00) characters."


class InputRefused(ValueError):
    """Input that is refused before validation, with where it is and why."""

    def __init__(self, loc: list[str | int], message: str, kind: str) -> None:
        super().__init__(message)
        self.loc = loc
        self.message = message
        self.kind = kind


def _refuse_constant(name: str) -> Any:
    raise InputRefused(["body"], f"{name} is not a JSON number", "json_invalid")


def loads_strict(raw: bytes) -> Any:
    """Parse a JSON document under the rules in this module's docstring, or raise InputRefused."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputRefused(["body"], "The body is not UTF-8 text.", "json_invalid") from exc
    try:
        document = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError as exc:
        raise _too_deep() from exc
    except json.JSONDecodeError as exc:
        raise InputRefused(["body"], f"The body is not JSON: {exc.msg}.", "json_invalid") from exc
    _check_values(document)
    return document


def _too_deep() -> InputRefused:
    return InputRefused(
        ["body"], f"JSON nested deeper than {MAX_JSON_DEPTH} levels.", "json_too_deep"
    )


def _check_values(document: Any) -> None:
    # Iterative, so a document that parsed can never exhaust the stack here.
    pending: list[tuple[Any, list[str | int]]] = [(document, ["body"])]
    while pending:
        value, loc = pending.pop()
        if len(loc) > MAX_JSON_DEPTH:
            raise _too_deep()
        if isinstance(value, str):
            _check_text(value, loc)
        elif isinstance(value, dict):
            for key, item in value.items():
                _check_text(key, loc)
                pending.append((item, [*loc, key]))
        elif isinstance(value, list):
            pending.extend((item, [*loc, index]) for index, item in enumerate(value))


def _check_text(value: str, loc: list[str | int]) -> None:
    found = _UNSTORABLE.search(value)
    if found is None:
        return
    if found.group() == "\x00":
        raise InputRefused(loc, "Text must not contain NUL (\\u0000) characters.", "nul_character")
    raise InputRefused(loc, "Text must not contain lone UTF-16 surrogates.", "lone_surrogate")


def _is_json(scope: Scope) -> bool:
    """Whether the body is one FastAPI will parse as JSON (the same media-type rule)."""
    for name, value in scope.get("headers", []):
        if name == b"content-type":
            return is_json_media_type(value.decode("latin-1"))
    return False


class InputGuardMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if "\x00" in scope["path"]:
            await _refuse(scope, receive, send, InputRefused(["path"], _NUL_IN_URL, "nul"))
            return
        if b"\x00" in unquote_to_bytes(scope.get("query_string", b"")):
            await _refuse(scope, receive, send, InputRefused(["query"], _NUL_IN_URL, "nul"))
            return
        if not _is_json(scope):
            await self.app(scope, receive, send)
            return

        buffered: list[Message] = []
        body = bytearray()
        while True:
            message = await receive()
            buffered.append(message)
            if message["type"] != "http.request":
                break
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        if body:
            try:
                loads_strict(bytes(body))
            except InputRefused as refused:
                await _refuse(scope, receive, send, refused)
                return

        async def replay() -> Message:
            return buffered.pop(0) if buffered else await receive()

        await self.app(scope, replay, send)


async def _refuse(scope: Scope, receive: Receive, send: Send, refused: InputRefused) -> None:
    response = problem_response(
        Request(scope),
        status=422,
        code="VALIDATION_FAILED",
        title="Validation failed",
        detail=refused.message,
        errors=[{"loc": refused.loc, "msg": refused.message, "type": refused.kind}],
    )
    await response(scope, receive, send)
