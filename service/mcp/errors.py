"""How MCP answers what it refuses, at each of its levels (every refusal goes through here):

- **HTTP**, before any JSON-RPC message is read (`/mcp` only): an RFC 9457 problem, as every
  REST route answers. 406 when the client does not accept JSON, 415 when the body is not
  `application/json`, 422 when it breaks the input rules (`service.kit.input_guard`) outside
  a tool's arguments (text that is not JSON included, as on every REST route), 400 when it is
  JSON but not one JSON-RPC 2.0 message. The MCP SDK's own HTTP refusals (plain text, or a
  JSON-RPC error with no id) are rewritten into the same problems, so no library text, name
  or version reaches the client.
- **JSON-RPC**, for a message the server cannot act on (malformed `params`, a tool or a
  resource it does not have, a resource it may not read): the spec's error codes, a message
  that starts with the problem's `code`, and the problem document as `data`; a client's
  mistake is never `-32603 Internal error`. Over stdio, which has no HTTP status, what `/mcp`
  refuses before reading a message is such an error too (`stdio_refusal`): `-32700` for a
  line that is not JSON, `-32600` for any other, with the message's id when it has a usable
  one.
- **A tool call** the tool refuses, including arguments that break the input rules or that
  the tool does not take: a tool result with `isError: true` whose text and structured
  content are the problem document the REST API would answer, its `loc` naming the argument
  (`["arguments", "text"]`). A call that met a database outage, a busy pool, a statement
  time limit or a deadlock is such a tool error too, with the REST API's 503 problem and its
  `retry_after_seconds` (`service_problem`); only a defect is left to the SDK, which answers
  it without its text.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.streamable_http import check_accept_headers
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    CallToolResult,
    TextContent,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Message, Receive, Scope, Send

from service.config import Settings
from service.db_outage import database_problem
from service.errors import (
    PROBLEM_TYPE_BASE,
    DomainError,
    InternalError,
    ValidationFailed,
    domain_error_response,
    internal_error_response,
    invalid_input,
)
from service.kit.input_guard import refused_input
from service.kit.media_type import JSON_MEDIA_TYPE, UnsupportedMediaType, media_type_of
from service.kit.types import InputRefused, check_json, loads_strict
from service.observability import current_trace_id

ARGUMENTS = "arguments"
"""Where a tool's arguments are, for a problem's `loc`: its first part, then the argument."""

_ONE_MESSAGE = (
    'The body must be one JSON-RPC 2.0 message: an object with "jsonrpc": "2.0" and a '
    '"method" (and an "id" for a request). Batches (arrays) are not accepted.'
)

logger = logging.getLogger("mneme.mcp")


class NotAcceptable(DomainError):
    status = 406
    title = "Not acceptable"
    code = "NOT_ACCEPTABLE"


class NotJsonRpc(DomainError):
    """The body is JSON but not a JSON-RPC message this endpoint serves."""

    status = 400
    title = "Not a JSON-RPC message"
    code = "BAD_REQUEST"


# --- HTTP level ---------------------------------------------------------------------------


def refuse_unreadable(request: Request) -> None:
    """Raise the problem for a POST whose answer the client would not take (406) or whose
    body is not JSON (415). The SDK checks both too, with plain-text or JSON-RPC answers."""
    accepts_json, _ = check_accept_headers(request)
    if not accepts_json:
        raise _not_acceptable()
    if media_type_of(request.headers.get("content-type", "")) != JSON_MEDIA_TYPE:
        raise _not_json()


def _not_acceptable() -> NotAcceptable:
    return NotAcceptable(
        "This endpoint answers with application/json: send "
        "`Accept: application/json, text/event-stream`."
    )


def _not_json() -> UnsupportedMediaType:
    return UnsupportedMediaType(
        f"Send each JSON-RPC message as JSON with `Content-Type: {JSON_MEDIA_TYPE}`.",
        headers={"Accept-Post": JSON_MEDIA_TYPE},
    )


@dataclass(frozen=True)
class RefusedToolCall:
    """A `tools/call` request whose arguments break the input rules, with the problem."""

    request_id: str | int
    problem: ValidationFailed

    def answer(self) -> dict[str, Any]:
        """The JSON-RPC answer: the tool's error result, as the tool itself would give it."""
        result = problem_result(self.problem).model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
        return {"jsonrpc": "2.0", "id": self.request_id, "result": result}

    def response(self) -> Response:
        return JSONResponse(self.answer())


@dataclass(frozen=True)
class RefusedMessage:
    """A message refused before it is read, for a reason that is no tool's: `/mcp` answers the
    problem with its HTTP status; stdio, which has no status, the JSON-RPC error `answer()`."""

    problem: DomainError
    error_code: int
    """`PARSE_ERROR` for text that is not JSON, `INVALID_REQUEST` for any other message."""
    request_id: str | int | None

    def answer(self) -> dict[str, Any]:
        error = protocol_error(self.problem, self.error_code).error
        return {
            "jsonrpc": "2.0",
            "id": self.request_id,
            "error": error.model_dump(mode="json", exclude_none=True),
        }


def check_message(body: bytes) -> RefusedToolCall | None:
    """Hold the body to the input rules every JSON body is held to (`loads_strict`): a value
    they refuse inside a tool call's arguments is that call's tool error (returned); anywhere
    else, text that is not JSON included, it is the REST API's 422 problem (raised). Either way
    the message never reaches the SDK, so nothing it holds is stored."""
    refused = _refused(body)
    if isinstance(refused, RefusedMessage):
        raise refused.problem
    return refused


def stdio_refusal(line: bytes) -> dict[str, Any] | None:
    """The answer to a line of `mneme mcp-stdio` that must not reach the SDK, or None to pass
    it on. A line is held to what `/mcp` holds a body to (`check_message`), and to being one
    JSON-RPC message: the SDK's stdio transport drops a line it cannot read unanswered, so a
    client waiting for its id would wait forever."""
    refused = _refused(line)
    if refused is None:
        try:
            jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValidationError:
            refused = RefusedMessage(
                NotJsonRpc(_ONE_MESSAGE), INVALID_REQUEST, _request_id(_lenient(line))
            )
    return None if refused is None else refused.answer()


def _refused(body: bytes) -> RefusedToolCall | RefusedMessage | None:
    """Why `body` breaks the input rules, if it does (see `check_message`)."""
    if not body:
        return None
    try:
        loads_strict(body)
    except InputRefused as refused:
        message = _lenient(body)
        call = _refused_tool_call(message)
        if call is not None:
            return call
        # Text no parser reads (not UTF-8, not JSON) is a parse error; JSON the input rules
        # refuse is a message that cannot be served.
        code = PARSE_ERROR if message is None else INVALID_REQUEST
        return RefusedMessage(refused_input(refused), code, _request_id(message))
    return None


def _lenient(body: bytes) -> Any:
    """`body` parsed by a lenient parse, which takes NUL, lone surrogates and non-finite
    numbers (for `check_json` to find and locate); None if even that fails."""
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def _request_id(message: Any) -> str | int | None:
    """The id of `message` if it is one an answer can carry, else None (JSON-RPC's null)."""
    match message:
        case {"id": str() | int() as request_id} if not isinstance(request_id, bool):
            try:
                check_json(request_id, ["id"])
            except InputRefused:
                return None
            return request_id
        case _:
            return None


def _refused_tool_call(message: Any) -> RefusedToolCall | None:
    """The tool error for a `tools/call` whose arguments alone break the input rules, if
    `message` (leniently parsed) is one."""
    match message:
        case {
            "jsonrpc": "2.0",
            "method": "tools/call",
            "id": str() | int() as request_id,
            "params": {"name": str(), "arguments": dict() as arguments} as params,
        } if not isinstance(request_id, bool):
            pass
        case _:
            return None
    envelope = {**message, "params": {k: v for k, v in params.items() if k != ARGUMENTS}}
    try:
        check_json(envelope, ["body"])
    except InputRefused:
        return None
    try:
        check_json(arguments, [ARGUMENTS])
    except InputRefused as refused:
        return RefusedToolCall(request_id, refused_input(refused))
    return None


class TransportRefusals:
    """The `send` of a request the SDK's transport serves: an HTTP-level refusal of its own
    (status 4xx/5xx with plain text or a JSON-RPC error without an id) goes out as the problem
    for its status instead; everything else, JSON-RPC errors about a request included, as is."""

    def __init__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._scope = scope
        self._receive = receive
        self._send = send
        self._held: list[Message] = []

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] >= 400:
            self._held.append(message)
            return
        if not self._held:
            await self._send(message)
            return
        self._held.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            await self._answer()

    async def _answer(self) -> None:
        held, self._held = self._held, []
        start, parts = held[0], held[1:]
        body = b"".join(part.get("body", b"") for part in parts)
        if _answers_a_request(body):
            for message in held:
                await self._send(message)
            return
        response = transport_problem(Request(self._scope), start["status"])
        await response(self._scope, self._receive, self._send)


def _answers_a_request(body: bytes) -> bool:
    """Whether `body` is a JSON-RPC error about a request (it has the request's id)."""
    try:
        answer = json.loads(body)
    except ValueError:
        return False
    return isinstance(answer, dict) and "error" in answer and answer.get("id") is not None


def transport_problem(request: Request, status: int) -> Response:
    """The problem for an HTTP-level refusal of the SDK's, by its status alone (its text may
    quote library internals)."""
    if status >= 500:
        # The SDK has logged the cause; the client gets the generic 500 and its trace id.
        return internal_error_response(request)
    refusal: DomainError
    match status:
        case 406:
            refusal = _not_acceptable()
        case 415:
            refusal = _not_json()
        case _:
            refusal = NotJsonRpc(_ONE_MESSAGE)
    return domain_error_response(request, refusal)


# --- JSON-RPC level -------------------------------------------------------------------------


def protocol_error(error: DomainError, code: int | None = None) -> MCPError:
    """A JSON-RPC error for a message the server will not act on. Unless `code` says otherwise,
    a client's mistake (4xx) is "invalid params" (as the SDK answers an unknown resource); only
    the service's own failure is an internal error."""
    if code is None:
        code = INTERNAL_ERROR if error.status >= 500 else INVALID_PARAMS
    return MCPError(code, f"{error.code}: {error.detail}", problem_document(error))


async def protocol_errors(
    ctx: ServerRequestContext[Any, Any], call_next: CallNext
) -> HandlerResult:
    """Server middleware: a message whose `params` fail the method's schema, or a domain error
    escaping a handler, answers `protocol_error` (the SDK would send an empty `data`, or the
    exception's text with code 0)."""
    try:
        return await call_next(ctx)
    except ValidationError as exc:
        # The SDK validates the whole request: each `loc` starts at `params`.
        refused = invalid_arguments(exc, ())
        # Clients show a JSON-RPC error's message, not its data: the message says what is wrong.
        refused.detail = "; ".join(
            f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
            for error in refused.extensions["errors"]
        )
        raise protocol_error(refused) from exc
    except DomainError as exc:
        raise protocol_error(exc) from exc


# --- tool level -------------------------------------------------------------------------------


def service_problem(error: Exception, *, operation: str, settings: Settings) -> DomainError:
    """The problem a tool call or resource read that failed with `error` answers: the same one
    the REST API answers the same failure with. A domain error is its own; a database failure
    is what `database_problem` makes of it (`DATABASE_UNAVAILABLE`, `DATABASE_CONFLICT`, …,
    each a 503 with `retry_after_seconds`), not an internal error, so a client knows to send
    the call again. Anything else is a defect: logged with its traceback and answered
    `INTERNAL_ERROR` with the trace id, as the REST API's 500."""
    if isinstance(error, DomainError):
        return error
    problem = database_problem(
        error, operation=operation, pool_timeout_seconds=settings.db_pool_timeout_seconds
    )
    if problem is not None:
        return problem
    # A defect: logged whole, and answered as the REST API answers one (its generic 500, the
    # trace id to quote), not as the SDK's bare "Error executing tool".
    logger.error("unhandled error in MCP %s", operation, exc_info=error)
    return InternalError(current_trace_id())


def problem_document(error: DomainError) -> dict[str, Any]:
    """The RFC 9457 body the REST API would answer with, minus what only HTTP has."""
    body: dict[str, Any] = {
        "type": PROBLEM_TYPE_BASE + error.code.lower().replace("_", "-"),
        "title": error.title,
        "status": error.status,
        "detail": error.detail,
        "code": error.code,
    }
    body.update({k: v for k, v in error.extensions.items() if k not in body})
    return body


def _as_argument(entry: Any) -> Any:
    if isinstance(entry, dict) and entry.get("loc", [None])[:1] == ["query"]:
        return {**entry, "loc": [ARGUMENTS, *entry["loc"][1:]]}
    return entry


def invalid_arguments(
    exc: ValidationError, location: tuple[str, ...] = (ARGUMENTS,)
) -> ValidationFailed:
    """A pydantic failure as the same problem the REST API answers (`VALIDATION_FAILED`, or
    `SECRET_REFUSED` when the secret policy refused a value), each `loc` under `location`: a
    tool's arguments by default, nothing for a request whose `loc`s start at its `params`."""
    errors = [
        {
            "loc": [*location, *(str(p) if not isinstance(p, int) else p for p in err["loc"])],
            "msg": str(err.get("msg", "")),
            "type": str(err.get("type", "")),
        }
        for err in exc.errors()
    ]
    noun = "argument" if location else "parameter"
    return invalid_input(f"{len(errors)} invalid {noun}(s); see `errors`.", errors)


def problem_result(error: DomainError) -> CallToolResult:
    """A tool error the model can read and act on: the problem as text and as structure."""
    problem = problem_document(error)
    errors = problem.get("errors")
    if isinstance(errors, list):
        # A tool takes as arguments what a REST route reads from its query string (a cursor,
        # a limit, under the same names): a value the service refuses there is an argument.
        problem["errors"] = [_as_argument(entry) for entry in errors]
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(problem, default=str))],
        structured_content=problem,
        is_error=True,
    )
