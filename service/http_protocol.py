"""uvicorn's httptools protocol, answering requests it cannot parse with a problem document,
and giving a client a time limit for sending its request.

(`uvicorn[standard]`, a dependency, installs httptools; uvicorn's "auto" would pick it too.)
uvicorn refuses a request it cannot parse (a URL longer than its parser's 64 KiB limit, a
malformed request line or header) before any application code runs, with a plain-text 400.
This subclass keeps uvicorn's behaviour and change only that answer: an RFC 9457 problem,
414 `URI_TOO_LONG` for an over-long URL, 400 `BAD_REQUEST` otherwise.

uvicorn puts no bound on a request's head: httptools keeps a partial header inside its parser
until it ends, so a client that never ends one fills the process's memory before any
authentication runs. Here a request's line and headers may take `MAX_HEAD_BYTES`; a head that
grows past it is answered 431 `REQUEST_HEADER_FIELDS_TOO_LARGE` (a problem document) and its
connection closed, as soon as the bytes arrive.

uvicorn waits for a request's head and body for as long as the client stays connected: a client
that stops midway (or sends one byte a minute) holds its connection, and once its head is in,
a request task waiting for the body, until it goes. Here a request's line and headers must
arrive within `MNEME_REQUEST_READ_TIMEOUT_SECONDS` of their first byte, and each part of its
body within that time of the one before (a large body on a slow link keeps flowing); a
connection must start its first request within it too. A request late in either is answered
408 `REQUEST_TIMEOUT` (a problem document) and its connection closed; a connection that never
sent a byte is closed without an answer, as uvicorn closes an idle kept-alive connection.

The same time bounds the other way: uvicorn waits for a client to take an answer larger than
the buffers between them for as long as it stays connected, and the request's task (with its
place among the requests in progress, `service.kit.admission`) waits with it. A client that
reads nothing of its answer for that long has its connection dropped, and the request ends.

A request the service's stop cuts short before its answer began (still running when the grace
period ends, or at a second Ctrl-C) gets no answer: its connection is closed. uvicorn would
answer it a plain-text 500, which clients and the error-ratio alert read as a defect of the
service, while nothing went wrong and its outcome is unknown (a write may have committed just
before): the client's part is what it is after any lost answer, to resend the request (a write
with its `Idempotency-Key`) to a running replica.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, ClassVar

from uvicorn._types import ASGI3Application, ASGIReceiveCallable, ASGISendCallable, Scope
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from service.config import get_settings
from service.errors import PROBLEM_CONTENT_TYPE, ProblemCode, problem_document
from service.observability.middleware import ANSWERED_BY_SERVER

logger = logging.getLogger("mneme.http")

# httptools stores URL offsets in 16 bits: a longer URL cannot be parsed at all.
MAX_URL_BYTES = 65_535

MAX_HEAD_BYTES = 128 * 1024
"""The most a request's line and headers may take together: room for the longest URL and, beside
it, for large bearer tokens and cookies. The bound is checked per read of the connection, so a
head is refused at most one read (of at most a few hundred KiB) past it."""


def closing_problem_response(status: int, code: ProblemCode, detail: str) -> bytes:
    """A complete HTTP/1.1 response carrying a problem document, written by the protocol
    itself (no application runs for it); the connection closes."""
    phrase = HTTPStatus(status).phrase
    body = json.dumps(problem_document(status, code, detail=detail)).encode()
    head = (
        f"HTTP/1.1 {status} {phrase}\r\n"
        f"content-type: {PROBLEM_CONTENT_TYPE}\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


def _answer(url_length: int) -> bytes:
    if url_length > MAX_URL_BYTES:
        return closing_problem_response(
            414, "URI_TOO_LONG", f"The URL is longer than {MAX_URL_BYTES} bytes."
        )
    return closing_problem_response(
        400, "BAD_REQUEST", "The HTTP request could not be parsed (request line or headers)."
    )


def unanswered_when_abandoned(
    cycle: RequestResponseCycle, app: ASGI3Application
) -> ASGI3Application:
    """`app` for the request of `cycle`, closing its connection without an answer when the
    request is cancelled (the stop abandons it) before its answer began. Marked disconnected,
    the request gets nothing more written for it: not uvicorn's 500 either."""

    async def run(scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        try:
            await app(scope, receive, send)
        finally:
            task = asyncio.current_task()
            if task is not None and task.cancelling() and not cycle.response_started:
                cycle.disconnected = True
                cycle.transport.close()

    return run


class ProblemHttpToolsProtocol(HttpToolsProtocol):
    read_timeout_seconds: ClassVar[float | None] = None
    """The time a client has for each part of its request (None: the setting's)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._read_timeout = (
            self.read_timeout_seconds or get_settings().request_read_timeout_seconds
        )
        self._read_timer: asyncio.TimerHandle | None = None
        self._write_timer: asyncio.TimerHandle | None = None
        self._head_bytes: int | None = None
        """The bytes of the incomplete head counted so far; None between heads."""
        self._head_began_in_this_read = False
        self._head_refusal_waits = False

    def data_received(self, data: bytes) -> None:
        self._head_began_in_this_read = False
        super().data_received(data)
        # The parser gives no offsets: a read in which a head began may hold the end of the
        # body before it (a pipelined request), so only the reads after it count, each whole
        # (no part of them can be anything but head while the head is still incomplete).
        if self._head_bytes is None or self._head_began_in_this_read:
            return
        self._head_bytes += len(data)
        if self._head_bytes > MAX_HEAD_BYTES:
            self._refuse_head()

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        super()._start_asgi_task(cycle, unanswered_when_abandoned(cycle, app))

    def send_400_response(self, msg: str) -> None:
        self.transport.write(_answer(len(self.url)))
        self.transport.close()

    # The read timer: armed while a request is expected or arriving, disarmed once it is in.

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._expect(self._silent_too_long)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_bytes = 0
        self._head_began_in_this_read = True
        # The head has from its first byte on: a head sent a byte at a time gets no more.
        self._expect(self._head_too_slow)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._head_bytes = None
        self._expect(self._body_too_slow)

    def on_body(self, body: bytes) -> None:
        super().on_body(body)
        self._expect(self._body_too_slow)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._stop_expecting()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_expecting()
        self._stop_waiting_for_the_reader()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._head_refusal_waits:
            self._refuse_head()

    def _refuse_head(self) -> None:
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            # A request sent ahead of this one is still being answered: an answer now would
            # cut into that one's. Reading stops (the head grows no more) until that ends.
            self._head_refusal_waits = True
            self.flow.pause_reading()
            return
        self._head_refusal_waits = False
        logger.warning("request refused: its head is over %s bytes", MAX_HEAD_BYTES)
        self.transport.write(
            closing_problem_response(
                431,
                "REQUEST_HEADER_FIELDS_TOO_LARGE",
                f"The request line and headers are longer than {MAX_HEAD_BYTES} bytes.",
            )
        )
        self.transport.close()

    # The write timer: armed while the transport holds more of an answer than it buffers (the
    # client reads none of it), disarmed as soon as the client takes some.

    def pause_writing(self) -> None:
        super().pause_writing()
        self._stop_waiting_for_the_reader()
        self._write_timer = self.loop.call_later(self._read_timeout, self._answer_not_read)

    def resume_writing(self) -> None:
        self._stop_waiting_for_the_reader()
        super().resume_writing()

    def _stop_waiting_for_the_reader(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None

    def _answer_not_read(self) -> None:
        self._write_timer = None
        logger.warning(
            "answer abandoned: the client read none of it for %s s; connection dropped",
            self._read_timeout,
        )
        # Not `close`: that waits to send what is buffered, which this client does not take.
        # The request's task sees its client gone and ends.
        self.transport.abort()

    def _expect(self, late: Callable[[], None]) -> None:
        self._stop_expecting()
        self._read_timer = self.loop.call_later(self._read_timeout, late)

    def _stop_expecting(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _silent_too_long(self) -> None:
        self._read_timer = None
        if not self.transport.is_closing():
            self.transport.close()

    def _head_too_slow(self) -> None:
        self._read_timer = None
        if self._reading_paused(self._head_too_slow):
            return
        if self.cycle is not None and not self.cycle.response_complete:
            # A request sent ahead of this one is still being answered: an answer now would
            # cut into that one's. The time starts again (it ends as that answer does).
            self._expect(self._head_too_slow)
            return
        self._time_out("its request line and headers")

    def _body_too_slow(self) -> None:
        self._read_timer = None
        if self._reading_paused(self._body_too_slow):
            return
        cycle = self.cycle
        if cycle is not None and cycle.response_started:
            # The application answers already: the answer ends with the connection.
            self.transport.close()
            return
        if cycle is not None:
            # The request's task sees its client gone (`http.disconnect`) and stops; nothing
            # it sends from now on is written. Its access line says what the client got.
            cycle.scope.setdefault("state", {})[ANSWERED_BY_SERVER] = 408
            cycle.disconnected = True
            cycle.message_event.set()
        self._time_out("the rest of its request body")

    def _reading_paused(self, late: Callable[[], None]) -> bool:
        """Whether the server itself stopped reading the connection (a request pipelined
        behind one still answered, or a body its request has not read yet): the client is
        not late then, and its time starts again (`late` is the handler to arm)."""
        if not self.flow.read_paused:
            return False
        self._expect(late)
        return True

    def _time_out(self, missing: str) -> None:
        if self.transport.is_closing():
            return
        logger.warning(
            "request timed out: %s did not arrive within %s s", missing, self._read_timeout
        )
        self.transport.write(
            closing_problem_response(
                408,
                "REQUEST_TIMEOUT",
                f"The client did not send {missing} within {self._read_timeout:g} s.",
            )
        )
        self.transport.close()
