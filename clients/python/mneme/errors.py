"""Problems raised as exceptions, one class per kind of failure.

The class follows the HTTP status, which the service keeps stable per failure; the problem's own
`code` (a stable string such as `RATE_LIMITED` or `PRECONDITION_FAILED`) is on every exception for
finer branching.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mneme.retry import retry_after_seconds


class MnemeError(Exception):
    """An RFC 9457 problem answered by the service."""

    def __init__(
        self,
        *,
        status: int,
        code: str,
        title: str,
        detail: str,
        trace_id: str | None = None,
        retry_after: float | None = None,
        problem: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.status = status
        self.code = code
        self.title = title
        self.detail = detail
        self.trace_id = trace_id
        # Seconds the service asked the caller to wait before trying again, when it said.
        self.retry_after = retry_after
        # The whole problem document, with its extensions (`errors`, `current_etag`, `key_id`, …).
        self.problem: Mapping[str, Any] = problem or {}


class BadRequest(MnemeError):
    """400: the request cannot be read."""


class Unauthenticated(MnemeError):
    """401: no valid token or API key."""


class Forbidden(MnemeError):
    """403: the caller may not do this."""


class NotFound(MnemeError):
    """404: no such resource for this caller (other tenants' and users' data reads as absent)."""


class Conflict(MnemeError):
    """409: the request conflicts with the resource's state or an earlier request."""


class PreconditionFailed(MnemeError):
    """412: someone changed the resource since the `If-Match` tag was read."""


class ValidationFailed(MnemeError):
    """422 (and 413, 414, 415, 431: a body, URL or headers the service will not take): see
    `problem["errors"]`."""


class RateLimited(MnemeError):
    """429: too many requests; `retry_after` says when to try again."""


class ServerError(MnemeError):
    """5xx: the service failed; the `trace_id` finds it in the service's traces."""


class ServiceUnavailable(ServerError):
    """503: a dependency (database, model provider) is unavailable for now."""


_BY_STATUS: dict[int, type[MnemeError]] = {
    400: BadRequest,
    401: Unauthenticated,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    412: PreconditionFailed,
    413: ValidationFailed,
    414: ValidationFailed,
    415: ValidationFailed,
    422: ValidationFailed,
    431: ValidationFailed,
    429: RateLimited,
    503: ServiceUnavailable,
}


def error_class(status: int) -> type[MnemeError]:
    """The exception class for a failed response's status: `MnemeError` itself for a status no
    class stands for (a 405, a 408), so that a subclass always means what its name says."""
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    return ServerError if status >= 500 else MnemeError


def error_from_response(status: int, headers: Mapping[str, str], content: bytes) -> MnemeError:
    """The exception for a failed response, from its problem document when it has one."""
    try:
        document = json.loads(content) if content else {}
    except ValueError:
        document = {}
    problem: dict[str, Any] = document if isinstance(document, dict) else {}
    trace_id = problem.get("trace_id")
    return error_class(status)(
        status=status,
        code=str(problem.get("code") or f"HTTP_{status}"),
        title=str(problem.get("title") or ""),
        detail=str(problem.get("detail") or content.decode(errors="replace")[:500]),
        trace_id=trace_id if isinstance(trace_id, str) else None,
        retry_after=retry_after_seconds(headers),
        problem=problem,
    )
