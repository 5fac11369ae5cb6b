"""Logging: one line per event, JSON for machines or text for a terminal.

JSON comes from python-json-logger: a plain `logging.Formatter`, so every logger in the process
— Mneme's, uvicorn's, Alembic's, the job queue's — goes through the same handler with no
wrapper API to adopt (structlog would have asked for its own logger objects or a bridging
formatter to get the same). Each line carries the request id, trace and span ids, tenant and
route of the request it belongs to, when there is one.

Log messages name ids, counts, kinds and error classes, never what a user wrote (message or
memory text, profile values, credentials); keep it so when adding lines. What the libraries
write is not Mneme's to word: an HTTP client logs every URL it calls, with the user-info a
configured URL holds (`MNEME_LLM_BASE_URL=https://user:password@…`), and an exception's text
quotes it. So the formatters hide the user-info of every URL in the line they write (message,
extra fields and traceback alike), whichever logger wrote it and at every level.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys
from typing import Literal, TextIO

from opentelemetry import trace
from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter

from service.config import LogLevel
from service.db_outage import is_database_unavailable
from service.observability import RequestContext, describe_failure, request_context

LogFormat = Literal["json", "text"]

access_logger = logging.getLogger("mneme.access")

TRACE = 5
"""uvicorn's level below DEBUG, named here too: logging is configured before uvicorn loads."""
logging.addLevelName(TRACE, "TRACE")
_LEVELS: dict[LogLevel, int] = {
    "critical": logging.CRITICAL,
    "error": logging.ERROR,
    "warning": logging.WARNING,
    "info": logging.INFO,
    "debug": logging.DEBUG,
    "trace": TRACE,
}

_CONTEXT_FIELDS = ("request_id", "trace_id", "span_id", "tenant", "route")
# Libraries that narrate every request (or, Alembic's plugins, every start) at INFO; their
# failures still show at WARNING. (`httpx2` and `httpcore2` are the OpenAI client's.)
_QUIET_LOGGERS = (
    "httpx",
    "httpcore",
    "httpx2",
    "httpcore2",
    "asyncio",
    "pgserver",
    "alembic.runtime.plugins",
)

_URL_USER_INFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<user_info>[^\s/?#]+)@")
"""A URL's scheme and user-info (`user:password@`, `token@`), up to the last `@` before its
host: a password holding a bare `@` is all hidden, not cut at its first one."""


def without_url_credentials(text: str) -> str:
    """`text` with the user-info of every URL in it hidden: `scheme://user:***@host` where it
    has a password, `scheme://***@host` where it is one part (tokens are passed that way)."""

    def hidden(url: re.Match[str]) -> str:
        user, has_password, _ = url["user_info"].partition(":")
        return f"{url['scheme']}{user + ':***' if has_password else '***'}@"

    return _URL_USER_INFO.sub(hidden, text)


class RequestContextFilter(logging.Filter):
    """Adds the current request's ids, tenant and route, and the current span's ids."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = request_context.get()
        if context is not None:
            record.request_id = context.request_id
            if context.tenant is not None:
                record.tenant = context.tenant
            if context.route is not None:
                record.route = context.route
        span_context = trace.get_current_span().get_span_context()
        if span_context.is_valid:
            record.trace_id = format(span_context.trace_id, "032x")
            record.span_id = format(span_context.span_id, "016x")
        return True


class AbandonedRequestFilter(logging.Filter):
    """uvicorn reports a request that its stop cut short (still running when the stop's grace
    period ended, or when told to stop a second time) as an application error, with the
    traceback of the request's cancellation. The request was stopped as the operator asked:
    it becomes one warning line."""

    MESSAGE = "request abandoned: the service stopped before it finished"
    GRACE_ENDED = "stopping: %s request(s) still running past the grace period are cut off"
    """uvicorn's own line when the grace period (`MNEME_SHUTDOWN_GRACE_SECONDS`) ends with
    requests running, said as what it is: the stop the operator asked for, a warning."""

    def filter(self, record: logging.LogRecord) -> bool:
        if (
            record.exc_info is not None
            and isinstance(record.exc_info[1], asyncio.CancelledError)
            and str(record.msg).startswith("Exception in ASGI application")
        ):
            record.msg, record.args = self.MESSAGE, ()
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        elif str(record.msg).startswith("Cancel %s running task(s)"):
            record.msg = self.GRACE_ENDED
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


class DatabaseOutageFilter(logging.Filter):
    """A database that is down, restarting or not answering is an outage the service rides out
    (its requests answered `503 DATABASE_UNAVAILABLE`, its jobs retried, its pools
    reconnecting by themselves), not a defect: a line that reports one is one line, naming
    the error's classes, and its traceback follows only at debug, as for an outage of a model.
    Whichever logger wrote it: the driver's pool restoring its connections, a background
    refresh, the job queue's loop, a job's run. Any other error keeps its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if (
            error is None
            or not is_database_unavailable(error)
            or logging.getLogger().isEnabledFor(logging.DEBUG)
        ):
            return True
        classes, _ = describe_failure(error)
        record.msg = f"{record.getMessage()} (database unavailable: {classes})"
        record.args = None
        record.exc_info, record.exc_text = None, None
        return True


class TextFormatter(logging.Formatter):
    """`time level logger message key=value…` for people reading a terminal (the user-info of
    any URL in it hidden)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s  %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = [
            f"{field}={getattr(record, field)}"
            for field in (*_CONTEXT_FIELDS, "method", "status", "duration_ms")
            if getattr(record, field, None) is not None
        ]
        if extras:
            head, newline, rest = line.partition("\n")
            line = f"{head}  {' '.join(extras)}{newline}{rest}"
        return without_url_credentials(line)


class _JsonFormatter(JsonFormatter):
    def format(self, record: logging.LogRecord) -> str:
        return without_url_credentials(super().format(record))


def json_formatter() -> JsonFormatter:
    """One JSON object per record: time, level, logger, message and every extra field (the
    user-info of any URL in it hidden, as the text format does)."""
    return _JsonFormatter(
        "{asctime}{levelname}{name}{message}",
        style="{",
        rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
        datefmt="%Y-%m-%dT%H:%M:%S%z",
        # uvicorn attaches an ANSI-coloured copy of some messages for terminals.
        reserved_attrs=[*RESERVED_ATTRS, "color_message"],
    )


class _MnemeHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stderr` is at the time of each record (like logging's own
    last-resort handler), so a replaced or closed stream — a test runner's capture, say —
    never breaks logging; a type of its own so `configure_logging` can replace it."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        return


def configure_logging(level: LogLevel, log_format: LogFormat) -> None:
    """Send every logger's records at `level` and above to stderr in `log_format`.

    Idempotent: a second call replaces the handler the first one installed, and leaves any
    other handler (a test's log capture, say) in place.
    """
    handler = _MnemeHandler()
    handler.setFormatter(json_formatter() if log_format == "json" else TextFormatter())
    handler.addFilter(RequestContextFilter())
    handler.addFilter(DatabaseOutageFilter())
    root = logging.getLogger()
    for existing in [h for h in root.handlers if isinstance(h, _MnemeHandler)]:
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(_LEVELS[level])
    for name in _QUIET_LOGGERS:
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))
    # Mneme writes its own access line (route template, tenant, duration); uvicorn's quotes
    # the raw path and query string.
    logging.getLogger("uvicorn.access").disabled = True
    for name in ("uvicorn", "uvicorn.error"):
        uvicorn_logger = logging.getLogger(name)
        uvicorn_logger.handlers.clear()
        uvicorn_logger.propagate = True
    uvicorn_errors = logging.getLogger("uvicorn.error")
    for installed in [f for f in uvicorn_errors.filters if isinstance(f, AbandonedRequestFilter)]:
        uvicorn_errors.removeFilter(installed)
    uvicorn_errors.addFilter(AbandonedRequestFilter())


def log_request(context: RequestContext, status: int, seconds: float) -> None:
    """The access line of one finished request."""
    access_logger.info(
        "%s %s %d",
        context.method,
        context.route,
        status,
        extra={"method": context.method, "status": status, "duration_ms": round(seconds * 1e3, 2)},
    )
