"""`/mcp`: the MCP server over streamable HTTP, behind the REST API's own authentication.

Each HTTP request is authenticated by the app's `Authenticator` (the same JWTs and API keys,
the same 401 problem), and the user it acts for is resolved exactly as a `/v1/users/{user_id}`
path is: `me` (the default) is the caller itself; a service credential names the user in the
`X-Mneme-User` header and may address any user of its own tenant, an end user only itself.
Anything else is a 404, as on the REST routes. The server runs stateless (a fresh MCP
transport per request, JSON responses): no session outlives the credential that opened it,
and any replica can serve any request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from service.auth.owner import Owner
from service.auth.principal import ME
from service.dependencies import get_principal
from service.errors import NotFound
from service.mcp.calls import CALLER_STATE_KEY, McpCaller, caller_from_request
from service.mcp.server import build_mcp_server
from service.state import AppState

MCP_PATH = "/mcp"
USER_HEADER = "x-mneme-user"


class McpEndpoint:
    """The ASGI app mounted at `/mcp`: authenticate, resolve the user, then serve MCP."""

    def __init__(self) -> None:
        self.server: MCPServer[Any] = build_mcp_server(caller_from_request)
        # Bearer authentication is what protects this endpoint; the SDK's Host/Origin check
        # (DNS rebinding) targets unauthenticated local servers and would refuse every
        # public host name the service is deployed under.
        self.server.streamable_http_app(
            streamable_http_path=MCP_PATH,
            stateless_http=True,
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self._sessions: StreamableHTTPSessionManager = self.server.session_manager

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Serve requests while this block runs (enter it in the application's lifespan)."""
        async with self._sessions.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        state: AppState = request.app.state.mneme
        # The REST routes' own dependency: same credentials, failed-auth and per-principal
        # limits. Raised errors become the app's problem responses (401, 404, 429).
        principal = await get_principal(request, state, None)
        addressed = request.headers.get(USER_HEADER) or ME
        user_id = principal.resolve_user(addressed)
        if user_id is None:
            hint = (
                f" (name it in {USER_HEADER})" if principal.is_service and addressed == ME else ""
            )
            raise NotFound(f"No user {addressed!r} that this caller may address{hint}.")
        setattr(request.state, CALLER_STATE_KEY, McpCaller(state, principal, Owner.user(user_id)))
        await self._sessions.handle_request(scope, receive, send)
