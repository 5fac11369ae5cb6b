"""uvicorn's httptools protocol, answering requests it cannot parse with a problem document.

(`uvicorn[standard]`, a dependency, installs httptools; uvicorn's "auto" would pick it too.)
uvicorn refuses a request it cannot parse (a URL longer than its parser's 64 KiB limit, a
malformed request line or header) before any application code runs, with a plain-text 400.
This subclass keeps uvicorn's behaviour and change only that answer: an RFC 9457 problem,
414 `URI_TOO_LONG` for an over-long URL, 400 `BAD_REQUEST` otherwise.
"""

from __future__ import annotations

import json
from http import HTTPStatus

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from service.errors import PROBLEM_CONTENT_TYPE, PROBLEM_TYPE_BASE, ProblemCode

# httptools stores URL offsets in 16 bits: a longer URL cannot be parsed at all.
MAX_URL_BYTES = 65_535


def unparsable_request_response(status: int, code: ProblemCode, detail: str) -> bytes:
    """A complete HTTP/1.1 response carrying a problem document; the connection closes."""
    phrase = HTTPStatus(status).phrase
    body = json.dumps(
        {
            "type": PROBLEM_TYPE_BASE + code.lower().replace("_", "-"),
            "title": phrase,
            "status": status,
            "detail": detail,
            "instance": "",
            "code": code,
        }
    ).encode()
    head = (
        f"HTTP/1.1 {status} {phrase}\r\n"
        f"content-type: {PROBLEM_CONTENT_TYPE}\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


def _answer(url_length: int) -> bytes:
    if url_length > MAX_URL_BYTES:
        return unparsable_request_response(
            414, "URI_TOO_LONG", f"The URL is longer than {MAX_URL_BYTES} bytes."
        )
    return unparsable_request_response(
        400, "BAD_REQUEST", "The HTTP request could not be parsed (request line or headers)."
    )


class ProblemHttpToolsProtocol(HttpToolsProtocol):
    def send_400_response(self, msg: str) -> None:
        self.transport.write(_answer(len(self.url)))
        self.transport.close()
