"""OAuth discovery for MCP hosts: a 401 from /mcp names the RFC 9728 protected-resource
metadata, the metadata names the identity provider the service trusts, and the MCP SDK's own
OAuth client signs in through it (against a loopback identity provider) and calls the tools."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from httpx import ASGITransport, AsyncClient
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)

from service.config import Settings
from service.main import create_app
from tests.conftest import assert_problem, new_tenant
from tests.fixtures.identity_provider import IdentityProvider
from tests.fixtures.loopback import free_port, serving
from tests.integrations.test_mcp_input_edges import MCP_HEADERS

BASE_URL = "http://mneme.test"
MCP_URL = f"{BASE_URL}/mcp"
METADATA_URL = f"{BASE_URL}/.well-known/oauth-protected-resource/mcp"
LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


@pytest.fixture(scope="module")
def provider() -> Iterator[IdentityProvider]:
    port = free_port()
    idp = IdentityProvider(f"http://127.0.0.1:{port}", new_tenant(), "olga")
    with serving(idp.app(), port):
        yield idp


@pytest.fixture(scope="module")
async def oauth_app(settings: Settings, provider: IdentityProvider) -> AsyncIterator[FastAPI]:
    """The service trusting the provider: its issuer, its keys, and tokens for /mcp."""
    configured = settings.model_copy(
        update={
            "jwks_url": f"{provider.issuer}/jwks",
            "jwt_issuer": provider.issuer,
            "jwt_audience": MCP_URL,
            "jwks_refresh_cooldown_seconds": 0,
            "migrate_on_start": False,
        }
    )
    application = create_app(configured)
    async with LifespanManager(application):
        yield application


@pytest.fixture
async def oauth_client(oauth_app: FastAPI) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(transport=ASGITransport(app=oauth_app), base_url=BASE_URL) as c:
        yield c


def challenge(www_authenticate: str) -> dict[str, str]:
    """The parameters of a `Bearer` challenge."""
    scheme, _, rest = www_authenticate.partition(" ")
    assert scheme == "Bearer"
    parameters = {}
    for part in rest.split('", '):
        name, _, value = part.partition("=")
        parameters[name.strip()] = value.strip('"')
    return parameters


async def test_a_401_from_mcp_names_the_metadata_of_the_resource_and_its_provider(
    oauth_client: AsyncClient, provider: IdentityProvider
) -> None:
    for headers in ({}, {"Authorization": "Bearer not-a-token"}):
        refused = await oauth_client.post(
            "/mcp", json=LIST_TOOLS, headers={**headers, **MCP_HEADERS}
        )
        assert_problem(refused, 401, "UNAUTHENTICATED")
        parameters = challenge(refused.headers["www-authenticate"])
        assert parameters["resource_metadata"] == METADATA_URL
        assert parameters["scope"] == "openid profile email"

    response = await oauth_client.get(METADATA_URL)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    metadata = response.json()
    # The SDK's own model of RFC 9728 metadata accepts it.
    ProtectedResourceMetadata.model_validate(metadata)
    assert metadata == {
        "resource": MCP_URL,
        "authorization_servers": [provider.issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": "Mneme",
        "scopes_supported": ["openid", "profile", "email"],
    }
    # The service's own metadata, at the root, describes everything below it.
    root = await oauth_client.get("/.well-known/oauth-protected-resource")
    assert root.status_code == 200
    assert root.json() == {**metadata, "resource": f"{BASE_URL}/"}

    # The REST routes' 401s are unchanged: only /mcp points hosts at discovery.
    rest = await oauth_client.get("/v1/users/me/memories")
    assert_problem(rest, 401, "UNAUTHENTICATED")
    assert "resource_metadata" not in rest.headers["www-authenticate"]


async def test_without_an_issuer_there_is_nothing_to_discover(client: AsyncClient) -> None:
    for path in (
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ):
        missing = await client.get(path)
        assert_problem(missing, 404, "NOT_FOUND")
        assert "MNEME_JWT_ISSUER" in missing.json()["detail"]
    refused = await client.post("/mcp", json=LIST_TOOLS, headers=MCP_HEADERS)
    assert_problem(refused, 401, "UNAUTHENTICATED")
    assert "resource_metadata" not in refused.headers["www-authenticate"]


class MemoryTokenStorage:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def test_the_sdk_oauth_client_signs_in_through_the_discovered_provider(
    oauth_app: FastAPI, oauth_client: AsyncClient, provider: IdentityProvider
) -> None:
    """What an OAuth-discovering host does with nothing but the server's URL."""
    authorization_urls: list[str] = []
    user_agent = httpx2.AsyncClient()

    async def redirect(url: str) -> None:
        authorization_urls.append(url)

    async def callback() -> AuthorizationCodeResult:
        # The user signs in at the provider, which redirects back with the code.
        answer = await user_agent.get(authorization_urls[-1])
        assert answer.status_code == 302, answer.text
        query = parse_qs(urlsplit(answer.headers["location"]).query)
        return AuthorizationCodeResult(code=query["code"][0], state=query["state"][0])

    storage = MemoryTokenStorage()
    auth = OAuthClientProvider(
        MCP_URL,
        OAuthClientMetadata(
            client_name="a host",
            redirect_uris=["http://localhost:3030/callback"],
            grant_types=["authorization_code"],
            token_endpoint_auth_method="none",
        ),
        storage,
        redirect_handler=redirect,
        callback_handler=callback,
    )
    http = httpx2.AsyncClient(
        auth=auth, mounts={BASE_URL: httpx2.ASGITransport(app=oauth_app)}, timeout=30.0
    )
    async with user_agent, http, Client(streamable_http_client(MCP_URL, http_client=http)) as mcp:
        written = await mcp.call_tool("remember", {"text": "Olga sails on weekends."})
        assert not written.is_error, written.content
        recalled = await mcp.call_tool("recall", {"query": "what does Olga do on weekends"})
    assert recalled.structured_content is not None
    [hit] = recalled.structured_content["hits"]
    assert hit["text"] == "Olga sails on weekends."

    # The provider was asked for a token for /mcp, with the scopes the metadata named.
    [asked] = provider.authorizations
    assert asked["resource"] == MCP_URL
    assert asked["scope"] == "openid profile email"
    assert storage.tokens is not None
    # The memory is the provider's user's, in the provider's tenant, as the REST API sees it.
    token = {"Authorization": f"Bearer {storage.tokens.access_token}"}
    listed = await oauth_client.get("/v1/users/me/memories", headers=token)
    assert listed.status_code == 200, listed.text
    [memory] = listed.json()["items"]
    assert memory["user_id"] == "olga" and memory["id"] == hit["id"]
