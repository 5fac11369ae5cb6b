"""`/mcp`: the MCP server over streamable HTTP, behind the REST API's own authentication.

Each HTTP request is authenticated by the app's `Authenticator` (the same JWTs and API keys,
the same 401 problem), and the user it acts for is resolved exactly as a `/v1/users/{user_id}`
path is: `me` (the default) is the caller itself; a service credential names the user in the
`X-Mneme-User` header and may address any user of its own tenant, an end user only itself.
Anything else is a 404, as on the REST routes. A 401 also tells an OAuth-discovering host
where to get a token (`service/mcp/discovery.py`). The server runs stateless (a fresh MCP
transport per request, JSON responses): no session outlives the credential that opened it,
and any replica can serve any request. What it refuses, before or after the SDK reads the
message, it answers as `service/mcp/errors.py` says (a problem, a JSON-RPC error, a tool error).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup, TaskStatus
from opentelemetry import trace
from starlette.requests import ClientDisconnect, Request
from starlette.types import Message, Receive, Scope, Send

from service.auth.owner import Owner
from service.auth.principal import ME
from service.dependencies import get_principal
from service.errors import NotFound, Unauthenticated
from service.mcp.discovery import MCP_PATH, challenge_parameters
from service.observability import tracer
from service.state import AppState

if TYPE_CHECKING:
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

USER_HEADER = "x-mneme-user"


async def message_span(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """One span per MCP message, nested in the request's server span.

    The SDK's own middleware makes this span a second SERVER span inside the HTTP request's;
    over HTTP the request's span is the server span, so this one is internal (with the same
    names and attributes). A tool error marks it failed (`error.type=tool_error`), as the SDK's
    span does: the HTTP answer is a 200 either way.
    """
    from mcp.types import CallToolResult

    name = ctx.params.get("name") if ctx.params else None
    target = f" {name}" if isinstance(name, str) else ""
    with tracer.start_as_current_span(f"{ctx.method}{target}") as span:
        span.set_attribute("mcp.method.name", ctx.method)
        span.set_attribute("mcp.protocol.version", ctx.protocol_version)
        if ctx.request_id is not None:
            span.set_attribute("jsonrpc.request.id", str(ctx.request_id))
        if ctx.method == "tools/call" and target:
            span.set_attribute("gen_ai.operation.name", "execute_tool")
            span.set_attribute("gen_ai.tool.name", target.strip())
        result = await call_next(ctx)
        # The tool's answer arrives as the model or, serialized already, as its wire form.
        match result:
            case CallToolResult(is_error=True) | {"isError": True}:
                span.set_attribute("error.type", "tool_error")
                span.set_status(trace.StatusCode.ERROR)
            case _:
                pass
        return result


class McpEndpoint:
    """The ASGI app mounted at `/mcp`: authenticate, resolve the user, then serve MCP.

    The MCP SDK takes about a third of a second to import, more than anything else the service
    loads, and only MCP clients use it: it loads, and the server is built, on the first
    request to `/mcp` (that request waits for it), not while the service starts."""

    def __init__(self) -> None:
        self._task_group: TaskGroup | None = None
        self._sessions: StreamableHTTPSessionManager | None = None
        self._starting = asyncio.Lock()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Serve requests while this block runs (enter it in the application's lifespan)."""
        async with anyio.create_task_group() as task_group:
            self._task_group = task_group
            try:
                yield
            finally:
                self._task_group = None
                task_group.cancel_scope.cancel()

    async def _started(self) -> StreamableHTTPSessionManager:
        """The session manager, built and running in the lifespan's task group."""
        async with self._starting:
            if self._sessions is None:
                if self._task_group is None:
                    raise RuntimeError("/mcp is served only while the application runs")
                sessions = _build_sessions()
                await self._task_group.start(_run_sessions, sessions)
                self._sessions = sessions
        return self._sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        state: AppState = request.app.state.mneme
        # The REST routes' own dependency: same credentials, failed-auth and per-principal
        # limits. Raised errors become the app's problem responses (401, 404, 429).
        try:
            principal = await get_principal(request, None)
        except Unauthenticated as exc:
            # Only a 401 points at the metadata: a host then signs the user in and retries.
            exc.headers["WWW-Authenticate"] += challenge_parameters(state.settings, request)
            raise
        addressed = request.headers.get(USER_HEADER) or ME
        user_id = principal.resolve_user(addressed)
        if user_id is None:
            hint = (
                f" (name it in {USER_HEADER})" if principal.is_service and addressed == ME else ""
            )
            raise NotFound(f"No user {addressed!r} that this caller may address{hint}.")
        from service.mcp.calls import CALLER_STATE_KEY, McpCaller
        from service.mcp.errors import TransportRefusals, check_message, refuse_unreadable

        sessions = await self._started()
        refuse_unreadable(request)
        try:
            body = await request.body()
        except ClientDisconnect:
            # The client went before its body was in: there is no one left to answer.
            return
        refused = check_message(body)
        if refused is not None:
            await refused.response()(scope, receive, send)
            return
        setattr(request.state, CALLER_STATE_KEY, McpCaller(state, principal, Owner.user(user_id)))
        await sessions.handle_request(
            scope, _replaying(body, receive), TransportRefusals(scope, receive, send)
        )


def _replaying(body: bytes, receive: Receive) -> Receive:
    """`receive` for a request whose body was read already: the body, then what follows."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


def _build_sessions() -> StreamableHTTPSessionManager:
    """The MCP server over streamable HTTP, stateless, with one span per message."""
    from mcp.server._otel import OpenTelemetryMiddleware
    from mcp.server.transport_security import TransportSecuritySettings

    from service.mcp.calls import caller_from_request
    from service.mcp.server import build_mcp_server

    server = build_mcp_server(caller_from_request)
    # Bearer authentication is what protects this endpoint; the SDK's Host/Origin check
    # (DNS rebinding) targets unauthenticated local servers and would refuse every public
    # host name the service is deployed under.
    server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    server.middleware[:] = [
        message_span if isinstance(layer, OpenTelemetryMiddleware) else layer
        for layer in server.middleware
    ]
    return server.session_manager


async def _run_sessions(
    sessions: StreamableHTTPSessionManager, *, task_status: TaskStatus[None]
) -> None:
    """Run the session manager until the lifespan's task group is cancelled at shutdown."""
    async with sessions.run():
        task_status.started()
        await anyio.sleep_forever()
