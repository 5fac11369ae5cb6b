"""Refuse request input that no schema or database column can hold, before anything parses it.

Every JSON body (`application/json` and `…+json`) is decoded here strictly, once, before the
framework's own parser and the pydantic models see it. Refused with a 422 problem:

- text that is not UTF-8, or not JSON;
- NaN, Infinity and -Infinity (Python's parser accepts them; JSON and jsonb do not), and
  numbers too large for a double (`1e400`, which Python would read as infinity);
- integers longer than Python reads back (`JSON_INTEGER_MAX_DIGITS` digits);
- NUL characters in any string or key (Postgres `text` and `jsonb` cannot store them);
- lone UTF-16 surrogates such as `"\\ud800"` (valid JSON escapes, but not encodable as UTF-8);
- nesting deeper than `MAX_JSON_DEPTH` (deep documents exhaust recursion in parsers,
  serialisers and Postgres alike, and no field of this API needs them).

These are the free-form JSON rules of `service.kit.types`, applied to the whole body; the
models apply them again to each free-form field, for the paths that do not come through
here (MCP over stdio, import lines).

The URL gets the same NUL rule: a `%00` in the path or query string is refused here rather
than discovered by the database. A query string whose percent-escapes are not UTF-8 (`%FF`) is
refused too: decoded, each bad escape would become U+FFFD, and two different values (`%FE`,
`%FF`) would read as the same one.

An app that answers in a protocol of its own can take the body rules over for its path
(`bodies_checked_by`): it applies the same `loads_strict` to every body, and answers a refusal
where the protocol puts it (`/mcp`: a refused tool argument is that tool call's error).
"""

from __future__ import annotations

from collections.abc import Collection
from urllib.parse import unquote_to_bytes

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.errors import ValidationFailed, handle_domain_error
from service.kit.media_type import is_json_media_type
from service.kit.types import InputRefused, loads_strict

_NUL_IN_URL = "The URL must not contain NUL (%00) characters."
_QUERY_NOT_UTF8 = "The query string's percent-escapes must encode UTF-8 text."


def _is_json(scope: Scope) -> bool:
    """Whether the body is one FastAPI will parse as JSON (the same media-type rule)."""
    for name, value in scope.get("headers", []):
        if name == b"content-type":
            return is_json_media_type(value.decode("latin-1"))
    return False


class InputGuardMiddleware:
    def __init__(self, app: ASGIApp, bodies_checked_by: Collection[str] = ()) -> None:
        self.app = app
        self.bodies_checked_by = frozenset(bodies_checked_by)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if "\x00" in scope["path"]:
            await _refuse(scope, receive, send, InputRefused(["path"], _NUL_IN_URL, "nul"))
            return
        query = unquote_to_bytes(scope.get("query_string", b""))
        if b"\x00" in query:
            await _refuse(scope, receive, send, InputRefused(["query"], _NUL_IN_URL, "nul"))
            return
        try:
            query.decode("utf-8")
        except UnicodeDecodeError:
            await _refuse(scope, receive, send, InputRefused(["query"], _QUERY_NOT_UTF8, "utf8"))
            return
        if scope["path"] in self.bodies_checked_by or not _is_json(scope):
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
        if buffered[-1]["type"] == "http.disconnect":
            # The client went before its body was in: there is no one left to answer.
            return
        if body:
            try:
                loads_strict(bytes(body))
            except InputRefused as refused:
                await _refuse(scope, receive, send, refused)
                return

        async def replay() -> Message:
            return buffered.pop(0) if buffered else await receive()

        await self.app(scope, replay, send)


def refused_input(refused: InputRefused) -> ValidationFailed:
    """The 422 problem for a value these rules refuse, located where it was found."""
    return ValidationFailed(
        refused.message,
        errors=[{"loc": refused.loc, "msg": refused.message, "type": refused.kind}],
    )


async def _refuse(scope: Scope, receive: Receive, send: Send, refused: InputRefused) -> None:
    response = await handle_domain_error(Request(scope), refused_input(refused))
    await response(scope, receive, send)
