"""`mneme mcp-stdio`: the MCP server over stdin/stdout, for desktop clients that spawn it.

It acts for one user, fixed at start-up from a credential in the environment
(`MNEME_MCP_TOKEN`: a JWT or an API key) and `--user` (default `me`), resolved exactly as the
HTTP endpoint resolves them. It runs the application's own lifespan in-process (database,
embedder, migrations when configured), so each tool call is the same transaction as over HTTP.
stdout carries the protocol; logs go to stderr. Each line is checked as the HTTP endpoint
checks a body before the SDK reads it, and what is refused is answered as over HTTP
(`service/mcp/stdio_transport.py`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import TYPE_CHECKING, Any

from service.auth.principal import ME
from service.config import get_settings

if TYPE_CHECKING:
    from service.state import AppState

TOKEN_VARIABLE = "MNEME_MCP_TOKEN"  # noqa: S105 - the name of a variable, not a secret


def add_mcp_stdio_parser(commands: Any) -> None:
    command = commands.add_parser(
        "mcp-stdio", help=f"serve MCP over stdio for one user (credential in {TOKEN_VARIABLE})"
    )
    command.add_argument(
        "--user", default=ME, help="the user to act for (`me`: the credential's own user)"
    )


def run_mcp_stdio(args: argparse.Namespace) -> int:
    token = os.environ.get(TOKEN_VARIABLE, "").strip()
    if not token:
        sys.stderr.write(f"mneme mcp-stdio: set {TOKEN_VARIABLE} to a JWT or API key\n")
        return 2
    return asyncio.run(_serve(token, args.user))


async def _serve(token: str, user: str) -> int:
    # Imported here, not with the command line: `mneme token` and the other commands that
    # never serve do not load the application.
    from service.auth.owner import Owner
    from service.errors import DomainError
    from service.main import create_app
    from service.mcp.calls import McpCaller
    from service.mcp.server import build_mcp_server
    from service.mcp.stdio_transport import serve_stdio

    app = create_app(get_settings())
    async with app.router.lifespan_context(app):
        state: AppState = app.state.mneme
        try:
            principal = await state.authenticator.authenticate(f"Bearer {token}", "stdio")
        except DomainError as exc:
            sys.stderr.write(f"mneme mcp-stdio: {exc.code}: {exc.detail}\n")
            return 2
        user_id = principal.resolve_user(user)
        if user_id is None:
            sys.stderr.write(f"mneme mcp-stdio: this credential may not act for {user!r}\n")
            return 2
        caller = McpCaller(state, principal, Owner.user(user_id))
        await serve_stdio(build_mcp_server(lambda _ctx: caller))
    return 0
