"""Signing in to the Memory page through an OIDC provider: authorization code + PKCE.

A small identity provider runs on a loopback port: discovery, an authorize endpoint that
signs "grace" in at once, a token endpoint that checks the PKCE verifier against the challenge,
and the JWKS Mneme verifies the RS256 access token with.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import parse_qs, urlencode

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, RedirectResponse
from playwright.async_api import Browser, Page, expect

from service.config import Settings
from service.main import create_app
from tests.conftest import new_tenant
from tests.fixtures.loopback import free_port, serving

pytestmark = pytest.mark.browser

CLIENT_ID = "mneme-page"


class FakeProvider:
    def __init__(self, issuer: str, tenant: str) -> None:
        self.issuer = issuer
        self.tenant = tenant
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.pending: dict[str, dict[str, str]] = {}
        self.exchanges: list[dict[str, str]] = []

    def app(self) -> FastAPI:
        app = FastAPI()
        # The page calls discovery and the token endpoint from its own origin.
        app.add_middleware(CORSMiddleware, allow_origins=["*"], allow_methods=["*"])

        @app.get("/.well-known/openid-configuration")
        async def discovery() -> dict[str, Any]:
            return {
                "issuer": self.issuer,
                "authorization_endpoint": f"{self.issuer}/authorize",
                "token_endpoint": f"{self.issuer}/token",
                "jwks_uri": f"{self.issuer}/jwks",
                "code_challenge_methods_supported": ["S256"],
            }

        @app.get("/authorize")
        async def authorize(request: Request) -> RedirectResponse:
            params = dict(request.query_params)
            assert params["response_type"] == "code"
            assert params["client_id"] == CLIENT_ID
            assert params["code_challenge_method"] == "S256"
            code = secrets.token_urlsafe(16)
            self.pending[code] = params
            query = urlencode({"code": code, "state": params["state"]})
            return RedirectResponse(f"{params['redirect_uri']}?{query}", status_code=302)

        @app.post("/token")
        async def token(request: Request) -> JSONResponse:
            form = {k: v[0] for k, v in parse_qs((await request.body()).decode()).items()}
            code_verifier = form.get("code_verifier", "")
            authorized = self.pending.pop(form.get("code", ""), None)
            digest = hashlib.sha256(code_verifier.encode()).digest()
            challenge = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
            if (
                authorized is None
                or form.get("grant_type") != "authorization_code"
                or form.get("client_id") != CLIENT_ID
                or form.get("redirect_uri") != authorized["redirect_uri"]
                or challenge != authorized["code_challenge"]
            ):
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            self.exchanges.append({"redirect_uri": form["redirect_uri"], "verifier": code_verifier})
            return JSONResponse(
                {"access_token": self.sign(), "token_type": "Bearer", "expires_in": 300}
            )

        @app.get("/jwks")
        async def jwks() -> dict[str, Any]:
            public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
            return {"keys": [{**public, "kid": "k1", "use": "sig", "alg": "RS256"}]}

        return app

    def sign(self) -> str:
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "sub": "grace",
            "org_id": self.tenant,
            "name": "Grace Hopper",
            "iat": now,
            "exp": now + 300,
        }
        return jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": "k1"})


@pytest.fixture(scope="module")
def provider() -> Iterator[FakeProvider]:
    port = free_port()
    fake = FakeProvider(f"http://127.0.0.1:{port}", new_tenant())
    with serving(fake.app(), port):
        yield fake


@pytest.fixture(scope="module")
def oidc_server(settings: Settings, provider: FakeProvider) -> Iterator[str]:
    configured = settings.model_copy(
        update={
            "jwks_url": f"{provider.issuer}/jwks",
            "jwt_issuer": provider.issuer,
            "web_oidc_issuer": provider.issuer,
            "web_oidc_client_id": CLIENT_ID,
        }
    )
    with serving(create_app(configured), free_port()) as url:
        yield url


@pytest.fixture
async def page(browser: Browser) -> AsyncIterator[Page]:
    context = await browser.new_context()
    opened = await context.new_page()
    yield opened
    await context.close()


async def test_sign_in_through_the_identity_provider_with_pkce(
    page: Page, oidc_server: str, provider: FakeProvider
) -> None:
    await page.goto(f"{oidc_server}/memory/")
    await page.get_by_role("button", name="Sign in with your account").click()
    await expect(page.locator("#whoami")).to_have_text(
        f"Grace Hopper · grace · tenant {provider.tenant}"
    )
    await expect(page.get_by_role("heading", name="Memories")).to_be_visible()
    # Back on the page without the code in the address bar.
    assert "code=" not in page.url
    [exchange] = provider.exchanges
    assert exchange["redirect_uri"] == f"{oidc_server}/memory/"
    assert len(exchange["verifier"]) >= 43  # RFC 7636: 43-128 characters


async def test_a_forged_state_is_refused(page: Page, oidc_server: str) -> None:
    await page.goto(f"{oidc_server}/memory/?code=stolen&state=forged")
    await expect(page.locator("#alert")).to_contain_text("does not match the request")
    await expect(page.get_by_role("button", name="Sign in with your account")).to_be_visible()
