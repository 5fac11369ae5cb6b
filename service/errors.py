"""Domain errors and their RFC 9457 problem+json rendering.

Services raise `DomainError`s; the handlers here turn them (and framework errors) into
`application/problem+json` with a stable machine `code`. Unknown exceptions become a generic
500 carrying only a trace id, never the exception text.
"""

from __future__ import annotations

import logging
import re
import weakref
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any, ClassVar, Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import iter_route_contexts
from pydantic import BaseModel, ConfigDict, Field
from starlette._utils import get_route_path
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.observability import current_trace_id

PROBLEM_CONTENT_TYPE = "application/problem+json"
PROBLEM_TYPE_BASE = "https://mneme.dev/problems/"

logger = logging.getLogger("mneme.errors")

ProblemCode = Literal[
    # 400
    "BAD_REQUEST",
    "AMBIGUOUS_CREDENTIALS",
    # 401
    "UNAUTHENTICATED",
    # 403
    "FORBIDDEN",
    "ORG_WRITE_FORBIDDEN",
    "ACCOUNT_WRITE_FORBIDDEN",
    # 404, 405, 406
    "NOT_FOUND",
    "METHOD_NOT_ALLOWED",
    "NOT_ACCEPTABLE",
    # 409
    "CONFLICT",
    "API_KEY_ALREADY_CREATED",
    "COMPACTION_DISABLED",
    "DUPLICATE_MEMORY",
    "IDEMPOTENCY_KEY_IN_PROGRESS",
    "IDEMPOTENCY_KEY_REUSED",
    "KEY_FROM_ACCOUNT",
    "PATCH_FAILED",
    "SUMMARIZATION_DISABLED",
    "USER_NOT_EMPTY",
    # 408
    "REQUEST_TIMEOUT",
    # 412, 413, 414, 415
    "PRECONDITION_FAILED",
    "PAYLOAD_TOO_LARGE",
    "PROFILE_TOO_LARGE",
    "URI_TOO_LONG",
    "UNSUPPORTED_MEDIA_TYPE",
    # 431
    "REQUEST_HEADER_FIELDS_TOO_LARGE",
    # 422
    "VALIDATION_FAILED",
    "CONFIRMATION_MISMATCH",
    "IMPORT_LINE_INVALID",
    "SECRET_REFUSED",
    # 429
    "RATE_LIMITED",
    # 500
    "INTERNAL_ERROR",
    # 503
    "SERVICE_UNAVAILABLE",
    "SERVICE_BUSY",
    "DATABASE_TIMEOUT",
    "DATABASE_UNAVAILABLE",
    "DATABASE_CONFLICT",
    "LLM_UNAVAILABLE",
]
"""Every stable `code` a problem can carry, and the only place they are listed: a `DomainError`
subclass or a hand-built problem with a code not listed here fails type checking, and the
OpenAPI document publishes this list as the `ProblemCode` enum clients switch on. Codes are
never renamed or removed, only added."""


class DomainError(Exception):
    """A failure the client can act on; subclasses fix status, title and code."""

    status: ClassVar[int] = 400
    title: ClassVar[str] = "Bad request"
    code: ClassVar[ProblemCode] = "BAD_REQUEST"

    def __init__(
        self,
        detail: str | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        **extensions: Any,
    ) -> None:
        super().__init__(detail or self.title)
        self.detail = detail or self.title
        self.headers = dict(headers or {})
        self.extensions = extensions


class Unauthenticated(DomainError):
    status = 401
    title = "Authentication required"
    code: ClassVar[ProblemCode] = "UNAUTHENTICATED"

    def __init__(self, detail: str | None = None, *, error: str | None = "invalid_token") -> None:
        # RFC 6750 §3: tell the client which scheme to use and why the token was refused. A
        # request that sent no Bearer credential at all gets the scheme alone (§3.1: no error
        # code when the client may not have known that authentication was needed).
        challenge = 'Bearer realm="mneme"'
        if error is not None:
            description = (detail or self.title).replace('"', "'")
            challenge += f', error="{error}", error_description="{description}"'
        super().__init__(detail, headers={"WWW-Authenticate": challenge})


class AmbiguousCredentials(DomainError):
    """More than one `Authorization` header (RFC 6750 §3.1: more than one method of sending a
    credential is an `invalid_request`): refused rather than picking one of them."""

    status = 400
    title = "More than one credential"
    code: ClassVar[ProblemCode] = "AMBIGUOUS_CREDENTIALS"


class Forbidden(DomainError):
    status = 403
    title = "Forbidden"
    code: ClassVar[ProblemCode] = "FORBIDDEN"


class OrgWriteForbidden(Forbidden):
    """Organization-shared data is written only by admins (from the token's roles)."""

    title = "Organization data is admin-only"
    code: ClassVar[ProblemCode] = "ORG_WRITE_FORBIDDEN"


class NotFound(DomainError):
    status = 404
    title = "Not found"
    code: ClassVar[ProblemCode] = "NOT_FOUND"


class Conflict(DomainError):
    status = 409
    title = "Conflict"
    code: ClassVar[ProblemCode] = "CONFLICT"


class PreconditionFailed(DomainError):
    """A conditional write's precondition (`If-Match`, `If-None-Match`) does not hold for the
    resource as it is now: nothing was changed."""

    status = 412
    title = "Precondition failed"
    code: ClassVar[ProblemCode] = "PRECONDITION_FAILED"


class ValidationFailed(DomainError):
    status = 422
    title = "Validation failed"
    code: ClassVar[ProblemCode] = "VALIDATION_FAILED"


class SecretRefused(ValidationFailed):
    """What looks like a credential or personal data, refused by the durable-write policy."""

    title = "Secret or personal data refused"
    code: ClassVar[ProblemCode] = "SECRET_REFUSED"


# The error type a schema gives a value the secret policy refuses while the input is parsed
# (profile values, the account overlay). Such a failure answers `SECRET_REFUSED`, like every
# other refusal of the policy.
POLICY_REFUSAL_TYPE = "credential_refused"


def invalid_input(detail: str, errors: list[dict[str, Any]]) -> ValidationFailed:
    """The problem for field errors: `SECRET_REFUSED` when the secret policy refused one of
    them (nothing is stored either way), `VALIDATION_FAILED` otherwise."""
    if any(error.get("type") == POLICY_REFUSAL_TYPE for error in errors):
        return SecretRefused(
            "Refusing to store what looks like a credential or personal data; see `errors`.",
            errors=errors,
        )
    return ValidationFailed(detail, errors=errors)


def invalid_inputs(errors: list[dict[str, Any]]) -> ValidationFailed:
    """`invalid_input` in the words of a request the framework refused: how many inputs, and
    where they are listed (the service's own checks of several fields answer alike)."""
    return invalid_input(f"{len(errors)} invalid input(s); see `errors`.", errors)


class RateLimited(DomainError):
    status = 429
    title = "Too many requests"
    code: ClassVar[ProblemCode] = "RATE_LIMITED"


class ServiceUnavailable(DomainError):
    status = 503
    title = "Service unavailable"
    code: ClassVar[ProblemCode] = "SERVICE_UNAVAILABLE"


class InternalError(DomainError):
    """The service's own defect: nothing of the cause is said, only the trace id to quote (the
    REST API's generic 500; an MCP call's tool error or JSON-RPC error)."""

    status = 500
    title = "Internal server error"
    code: ClassVar[ProblemCode] = "INTERNAL_ERROR"

    DETAIL: ClassVar[str] = "An unexpected error occurred; quote the trace id when reporting it."

    def __init__(self, trace_id: str | None) -> None:
        super().__init__(self.DETAIL, trace_id=trace_id)


# Seconds a client refused as busy should wait: long enough for a burst to drain, short
# enough that a client back from it finds room.
BUSY_RETRY_AFTER_SECONDS = 2


class ServiceBusy(ServiceUnavailable):
    """More requests than this process can serve right now (no place among those in progress,
    or no database connection free in time): nothing of the request was done; retry shortly."""

    title = "Service busy"
    code: ClassVar[ProblemCode] = "SERVICE_BUSY"

    def __init__(self, why: str) -> None:
        super().__init__(
            f"This service has more requests than it can serve right now ({why}); retry shortly.",
            headers={"Retry-After": str(BUSY_RETRY_AFTER_SECONDS)},
            retry_after_seconds=BUSY_RETRY_AFTER_SECONDS,
        )


# Seconds a client should wait before calling a model-backed operation again: long enough for
# a provider's brief rate limit or hiccup to pass, short enough for an interactive retry.
MODEL_RETRY_AFTER_SECONDS = 10


class ModelUnavailable(ServiceUnavailable):
    """The chat model did not answer a synchronous call; nothing was written, retry later."""

    title = "The model is unavailable"
    code: ClassVar[ProblemCode] = "LLM_UNAVAILABLE"

    def __init__(self, detail: str | None = None) -> None:
        super().__init__(
            detail,
            headers={"Retry-After": str(MODEL_RETRY_AFTER_SECONDS)},
            retry_after_seconds=MODEL_RETRY_AFTER_SECONDS,
        )


# Stable codes for errors raised by the framework rather than by our services.
_HTTP_STATUS_CODES: dict[int, ProblemCode] = {
    400: "BAD_REQUEST",
    401: "UNAUTHENTICATED",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    406: "NOT_ACCEPTABLE",
    409: "CONFLICT",
    412: "PRECONDITION_FAILED",
    413: "PAYLOAD_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE",
    422: "VALIDATION_FAILED",
    429: "RATE_LIMITED",
    500: "INTERNAL_ERROR",
    503: "SERVICE_UNAVAILABLE",
}


class FieldError(BaseModel):
    """One invalid input: where it is and what is wrong with it."""

    loc: list[str | int]
    msg: str
    type: str


class Problem(BaseModel):
    """RFC 9457 problem details, as every error response of this API is shaped."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(examples=[PROBLEM_TYPE_BASE + "not-found"])
    title: str
    status: int
    detail: str
    instance: str
    code: ProblemCode = Field(
        description="Stable machine-readable error code: switch on it rather than on `title`."
    )
    trace_id: str | None = None
    errors: list[FieldError] | None = Field(
        default=None, description="Present on validation failures: one entry per invalid input."
    )


def problem_document(
    status: int,
    code: ProblemCode,
    *,
    title: str | None = None,
    detail: str | None = None,
    instance: str = "",
) -> dict[str, Any]:
    """The RFC 9457 members every problem carries (`Problem`); title and detail default to the
    status's phrase."""
    phrase = title or HTTPStatus(status).phrase
    return {
        "type": PROBLEM_TYPE_BASE + code.lower().replace("_", "-"),
        "title": phrase,
        "status": status,
        "detail": detail or phrase,
        "instance": instance,
        "code": code,
    }


def problem_response(
    request: Request,
    *,
    status: int,
    code: ProblemCode,
    title: str | None = None,
    detail: str | None = None,
    headers: Mapping[str, str] | None = None,
    **extensions: Any,
) -> JSONResponse:
    body = problem_document(status, code, title=title, detail=detail, instance=request.url.path)
    body["trace_id"] = current_trace_id() or getattr(request.state, "trace_id", None)
    body.update({k: v for k, v in extensions.items() if k not in body})
    return JSONResponse(
        body, status_code=status, headers=dict(headers or {}), media_type=PROBLEM_CONTENT_TYPE
    )


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses=` entries declaring that a route may answer these problems."""
    return {
        status: {
            "model": Problem,
            "description": HTTPStatus(status).phrase,
            "content": {PROBLEM_CONTENT_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        for status in statuses
    }


def domain_error_response(request: Request, error: DomainError) -> JSONResponse:
    """The problem response a domain error stands for."""
    return problem_response(
        request,
        status=error.status,
        code=error.code,
        title=error.title,
        detail=error.detail,
        headers=error.headers,
        **error.extensions,
    )


async def handle_domain_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, DomainError)
    return domain_error_response(request, exc)


METHOD_ORDER = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
"""The order `Allow` lists methods in (any other after these, alphabetically)."""


def _route_methods(routes: Sequence[BaseRoute]) -> list[tuple[re.Pattern[str], set[str]]]:
    """Each route's full path (an included router's prefix with it), compiled, and the methods
    it answers (HEAD with GET); routes that declare no methods (mounts) are left out."""
    served = []
    for route in iter_route_contexts(routes):
        methods = set(route.methods or ())
        if not methods or route.path is None:
            continue
        if "GET" in methods:
            methods.add("HEAD")
        served.append((compile_path(route.path)[0], methods))
    return served


_methods_of_apps: weakref.WeakKeyDictionary[Any, list[tuple[re.Pattern[str], set[str]]]]
_methods_of_apps = weakref.WeakKeyDictionary()


def allowed_methods(app: Any, scope: Scope) -> str:
    """The `Allow` header of a 405 for the request `scope` to `app`: every method of every
    route whose path is the request's."""
    path = get_route_path(scope)
    served = _methods_of_apps.get(app)
    if served is None:
        served = _methods_of_apps[app] = _route_methods(app.router.routes)
    methods = set().union(*(methods for regex, methods in served if regex.match(path)))
    ordered = [method for method in METHOD_ORDER if method in methods]
    return ", ".join(ordered + sorted(methods.difference(METHOD_ORDER)))


async def _handle_http_exception(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    status = exc.status_code
    # A status with no code of its own (the framework raises few) gets its class's generic one:
    # clients can rely on every code being in `ProblemCode`.
    code = _HTTP_STATUS_CODES.get(status, "INTERNAL_ERROR" if status >= 500 else "BAD_REQUEST")
    detail = exc.detail if isinstance(exc.detail, str) else None
    if status == 404 and detail == "Not Found":
        detail = "No resource at this path."
    headers = exc.headers
    if status == 405:
        detail = f"Method {request.method} is not allowed on this path."
        # The router names the methods of the one route it matched; the path may have more.
        headers = {
            **(headers or {}),
            "Allow": allowed_methods(request.app, request.scope),
        }
    return problem_response(request, status=status, code=code, detail=detail, headers=headers)


async def _handle_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    # FastAPI validates a request body once per dependant that declares it: a route whose
    # dependency also takes the body (to start embedding its question early) reports every
    # body error twice. An invalid input is listed once, in first-seen order.
    errors: list[dict[str, Any]] = []
    seen: set[tuple[tuple[str | int, ...], str, str]] = set()
    for err in exc.errors():
        loc = tuple(str(part) if not isinstance(part, int) else part for part in err.get("loc", ()))
        msg, kind = str(err.get("msg", "")), str(err.get("type", ""))
        if (loc, msg, kind) in seen:
            continue
        seen.add((loc, msg, kind))
        errors.append({"loc": list(loc), "msg": msg, "type": kind})
    return await handle_domain_error(request, invalid_inputs(errors))


def internal_error_response(request: Request) -> JSONResponse:
    """The generic 500 problem: nothing of the cause, the trace id to quote."""
    return problem_response(
        request,
        status=500,
        code=InternalError.code,
        title=InternalError.title,
        detail=InternalError.DETAIL,
    )


async def handle_unexpected(request: Request, exc: Exception) -> JSONResponse:
    logger.exception("unhandled error on %s %s", request.method, request.url.path)
    return internal_error_response(request)


class UnexpectedErrorMiddleware:
    """Answer an exception no handler took with the generic 500 problem, here, as any other
    response.

    Starlette's own last-resort handler sits outside every middleware and re-raises after
    answering, so the server drops the keep-alive connection without a `Connection: close`,
    and the answer misses the headers the middlewares add (request id, security headers).
    Installed inside those middlewares, this one answers and swallows the exception (it is
    logged by `handle_unexpected`): the connection stays usable for the client's next request.
    An exception after the response has started cannot be answered any more; it propagates,
    and the server closes the connection on the half-sent response.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:
            if started:
                raise
            response = await handle_unexpected(Request(scope), exc)
            await response(scope, receive, send)


def install_problem_handlers(app: FastAPI) -> None:
    """Register the problem handlers. Unexpected exceptions are answered by
    `UnexpectedErrorMiddleware`; the `Exception` handler here is Starlette's last resort, for
    one raised by a middleware outside it."""
    app.add_exception_handler(DomainError, handle_domain_error)
    app.add_exception_handler(StarletteHTTPException, _handle_http_exception)
    app.add_exception_handler(RequestValidationError, _handle_validation_error)
    app.add_exception_handler(Exception, handle_unexpected)
