"""OAuth discovery for MCP hosts: where to get a token for `/mcp` (RFC 9728).

An MCP host that meets a 401 reads the `resource_metadata` URL from its `WWW-Authenticate`
challenge, fetches the protected-resource metadata there, signs the user in at the
authorization server it names (with the `resource` it names as the RFC 8707 resource
indicator), and retries with the token. Mneme issues no tokens: the authorization server it
names is the identity provider whose tokens it already verifies, `MNEME_JWT_ISSUER` (or, unset,
the Memory page's `MNEME_WEB_OIDC_ISSUER`), and the scopes are those an end user's sign-in asks
for (`MNEME_WEB_OIDC_SCOPES`; the service scope is never offered). With neither issuer
configured there is nothing to discover: the metadata URLs answer 404 and a 401 names none.

The metadata of `/mcp` lives at `/.well-known/oauth-protected-resource/mcp` (the well-known
path inserted before the resource's path); the one at `/.well-known/oauth-protected-resource`
describes the whole service (the REST API and `/mcp` below it), for hosts that look there.
Both name the resource by the origin the request reached, so they hold behind any host name
(a proxy forwards `Host`, and `X-Forwarded-Proto` from a trusted proxy gives the scheme).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from service.config import Settings
from service.errors import NotFound
from service.observability import LabelledRoute

MCP_PATH = "/mcp"
PROTECTED_RESOURCE_PATH = "/.well-known/oauth-protected-resource"
RESOURCE_NAME = "Mneme"
# Metadata changes only with the deployment's settings.
CACHE_CONTROL = "public, max-age=3600"


def authorization_server(settings: Settings) -> str | None:
    """The issuer of the tokens this deployment accepts, if it names one."""
    return settings.jwt_issuer or settings.web_oidc_issuer


def _scopes(settings: Settings) -> list[str]:
    return [s for s in settings.web_oidc_scopes.split() if s != settings.service_scope]


def _origin(request: Request) -> str:
    return f"{request.url.scheme}://{request.url.netloc}"


def mcp_metadata_url(request: Request) -> str:
    return _origin(request) + PROTECTED_RESOURCE_PATH + MCP_PATH


def challenge_parameters(settings: Settings, request: Request) -> str:
    """What a 401 from `/mcp` adds to its `Bearer` challenge: where the metadata is and which
    scopes to ask for (nothing when no authorization server is configured)."""
    if authorization_server(settings) is None:
        return ""
    parameters = f', resource_metadata="{mcp_metadata_url(request)}"'
    scopes = _scopes(settings)
    return parameters + (f', scope="{" ".join(scopes)}"' if scopes else "")


def _metadata(settings: Settings, resource: str) -> dict[str, Any]:
    issuer = authorization_server(settings)
    if issuer is None:
        raise NotFound(
            "This deployment names no OAuth authorization server (MNEME_JWT_ISSUER is unset): "
            "send a bearer token it accepts (a JWT or a Mneme API key) with each request."
        )
    metadata: dict[str, Any] = {
        "resource": resource,
        # The configured issuer exactly as tokens carry it in `iss`.
        "authorization_servers": [issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": RESOURCE_NAME,
    }
    scopes = _scopes(settings)
    if scopes:
        metadata["scopes_supported"] = scopes
    return metadata


def protected_resource_routes(settings: Settings) -> list[Route]:
    """The metadata of `/mcp` and of the whole service, at their well-known URLs."""

    async def mcp_metadata(request: Request) -> Response:
        return _answer(_metadata(settings, _origin(request) + MCP_PATH))

    async def service_metadata(request: Request) -> Response:
        return _answer(_metadata(settings, _origin(request) + "/"))

    return [
        LabelledRoute(PROTECTED_RESOURCE_PATH + MCP_PATH, mcp_metadata, methods=["GET"]),
        LabelledRoute(PROTECTED_RESOURCE_PATH, service_metadata, methods=["GET"]),
    ]


def _answer(metadata: dict[str, Any]) -> Response:
    return JSONResponse(metadata, headers={"Cache-Control": CACHE_CONTROL})
