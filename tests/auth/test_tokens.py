"""JWT authentication: HS256 with the dev secret, RS256/ES256 against a JWKS, and every
way a token can be refused (each a 401 problem with WWW-Authenticate)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import jwt
import pytest
from asgi_lifespan import LifespanManager
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from httpx import ASGITransport, AsyncClient

from service.auth.tokens import TokenVerifier, mint_dev_token
from service.config import Settings
from service.embedded_postgres import EmbeddedCluster
from service.errors import Unauthenticated
from service.main import create_app
from tests.conftest import TEST_SECRET, assert_problem, bearer, make_settings

ISSUER = "https://idp.example.test/"
AUDIENCE = "mneme-api"


class JwksServer:
    """A loopback identity provider publishing a key set that tests can rotate."""

    def __init__(self) -> None:
        self.keys: list[dict[str, Any]] = []
        self.fetches = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.fetches += 1
                body = json.dumps({"keys": outer.keys}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/.well-known/jwks.json"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def publish(self, kid: str, public_key: Any, algorithm: str) -> None:
        if algorithm.startswith("RS"):
            jwk = jwt.algorithms.RSAAlgorithm.to_jwk(public_key, as_dict=True)
        else:
            jwk = jwt.algorithms.ECAlgorithm.to_jwk(public_key, as_dict=True)
        self.keys.append({**jwk, "kid": kid, "alg": algorithm, "use": "sig"})

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture(scope="module")
def jwks() -> Iterator[JwksServer]:
    server = JwksServer()
    yield server
    server.close()


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def oidc_settings(cluster: EmbeddedCluster, jwks: JwksServer, settings: Settings) -> Settings:
    return make_settings(
        cluster,
        jwks_url=jwks.url,
        jwt_issuer=ISSUER,
        jwt_audience=AUDIENCE,
        jwks_refresh_cooldown_seconds=0,
        migrate_on_start=False,
    )


@pytest.fixture(scope="module")
async def oidc_client(oidc_settings: Settings) -> AsyncIterator[AsyncClient]:
    application = create_app(oidc_settings)
    async with (
        LifespanManager(application),
        AsyncClient(
            transport=ASGITransport(app=application), base_url="http://mneme.test"
        ) as client,
    ):
        yield client


def claims(tenant: str, user: str, **extra: Any) -> dict[str, Any]:
    now = int(time.time())
    return {
        "sub": user,
        "org_id": tenant,
        "iss": ISSUER,
        "aud": AUDIENCE,
        "iat": now,
        "exp": now + 300,
        **extra,
    }


def sign(payload: dict[str, Any], key: Any, algorithm: str, kid: str | None = None) -> str:
    headers = {"kid": kid} if kid else None
    return jwt.encode(payload, key, algorithm=algorithm, headers=headers)


async def test_rs256_token_from_the_jwks_authenticates(
    oidc_client: AsyncClient, jwks: JwksServer, rsa_key: rsa.RSAPrivateKey, tenant: str
) -> None:
    jwks.publish("rsa-1", rsa_key.public_key(), "RS256")
    token = sign(claims(tenant, "alice"), rsa_key, "RS256", kid="rsa-1")
    response = await oidc_client.get("/v1/users/me", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
    assert (response.json()["id"], response.json()["tenant_id"]) == ("alice", tenant)


async def test_es256_token_from_the_jwks_authenticates(
    oidc_client: AsyncClient, jwks: JwksServer, tenant: str
) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    jwks.publish("ec-1", key.public_key(), "ES256")
    token = sign(
        claims(tenant, "bob", name="Bob", email="bob@example.test"), key, "ES256", kid="ec-1"
    )
    response = await oidc_client.get("/v1/users/me", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
    me = response.json()
    assert (me["id"], me["tenant_id"]) == ("bob", tenant)
    # The account details are the ones this token carried, so it was this token that was read.
    assert (me["name"], me["email"]) == ("Bob", "bob@example.test")


async def test_rotated_key_is_fetched_when_an_unknown_kid_arrives(
    oidc_client: AsyncClient, jwks: JwksServer, rsa_key: rsa.RSAPrivateKey, tenant: str
) -> None:
    jwks.publish("rsa-1", rsa_key.public_key(), "RS256")
    warm = sign(claims(tenant, "carol"), rsa_key, "RS256", kid="rsa-1")
    assert (
        await oidc_client.get("/v1/users/me", headers={"Authorization": f"Bearer {warm}"})
    ).status_code == 200
    rotated = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwks.publish("rsa-rotated", rotated.public_key(), "RS256")
    fetches_before = jwks.fetches
    token = sign(claims(tenant, "carol"), rotated, "RS256", kid="rsa-rotated")
    response = await oidc_client.get("/v1/users/me", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
    assert jwks.fetches > fetches_before


async def test_token_signed_by_a_key_outside_the_jwks_is_refused(
    oidc_client: AsyncClient, jwks: JwksServer, rsa_key: rsa.RSAPrivateKey, tenant: str
) -> None:
    jwks.publish("rsa-1", rsa_key.public_key(), "RS256")
    impostor = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    token = sign(claims(tenant, "mallory"), impostor, "RS256", kid="rsa-1")
    response = await oidc_client.get("/v1/users/me", headers={"Authorization": f"Bearer {token}"})
    assert_problem(response, 401, "UNAUTHENTICATED")
    assert response.headers["www-authenticate"].startswith("Bearer ")


@pytest.mark.parametrize(
    ("override", "reason"),
    [
        ({"aud": "someone-else"}, "audience"),
        ({"iss": "https://evil.example/"}, "issuer"),
        ({"exp": int(time.time()) - 3600}, "expired"),
        ({"nbf": int(time.time()) + 3600}, "not valid yet"),
        ({"org_id": None}, "tenant claim"),
        ({"sub": "../etc"}, "user claim"),
    ],
)
async def test_token_with_bad_claims_is_refused(
    oidc_client: AsyncClient,
    jwks: JwksServer,
    rsa_key: rsa.RSAPrivateKey,
    tenant: str,
    override: dict[str, Any],
    reason: str,
) -> None:
    jwks.publish("rsa-1", rsa_key.public_key(), "RS256")
    payload = {k: v for k, v in {**claims(tenant, "dave"), **override}.items() if v is not None}
    token = sign(payload, rsa_key, "RS256", kid="rsa-1")
    response = await oidc_client.get("/v1/users/me", headers={"Authorization": f"Bearer {token}"})
    body = assert_problem(response, 401, "UNAUTHENTICATED")
    assert reason in body["detail"]
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


async def test_hs256_dev_token_authenticates(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "erin", name="Erin", email="erin@example.test")
    response = await client.get("/v1/users/me", headers=headers)
    assert response.status_code == 200, response.text
    me = response.json()
    assert (me["id"], me["tenant_id"]) == ("erin", tenant)
    assert (me["name"], me["email"]) == ("Erin", "erin@example.test")


async def test_hs256_token_with_the_wrong_secret_is_refused(
    client: AsyncClient, tenant: str
) -> None:
    token = sign(claims(tenant, "erin"), "a-different-secret-of-sufficient-length!!", "HS256")
    response = await client.get("/v1/users/me", headers={"Authorization": f"Bearer {token}"})
    assert_problem(response, 401, "UNAUTHENTICATED")


@pytest.mark.parametrize(
    "override",
    [
        {"exp": 10**309},  # an integer past the range of a float
        {"exp": 1e300},  # a date no datetime holds
        {"exp": str(int(time.time()) + 3600)},  # a NumericDate is a number, not digits in text
        {"iat": str(int(time.time()))},
        {"iat": True},
        {"nbf": str(int(time.time()))},
        {"iat": -1},
    ],
    ids=["huge-exp", "far-exp", "text-exp", "text-iat", "boolean-iat", "text-nbf", "negative-iat"],
)
async def test_a_time_claim_that_is_not_a_numeric_date_is_refused(
    client: AsyncClient, tenant: str, override: dict[str, Any]
) -> None:
    token = sign(claims(tenant, "erin", **override), TEST_SECRET, "HS256")
    response = await client.get("/v1/users/me", headers={"Authorization": f"Bearer {token}"})
    body = assert_problem(response, 401, "UNAUTHENTICATED")
    assert "claim is not a number of seconds" in body["detail"]


async def test_unsigned_token_is_refused(client: AsyncClient, tenant: str) -> None:
    token = jwt.encode(claims(tenant, "erin"), key="", algorithm="none")
    response = await client.get("/v1/users/me", headers={"Authorization": f"Bearer {token}"})
    body = assert_problem(response, 401, "UNAUTHENTICATED")
    assert "not accepted" in body["detail"]


@pytest.mark.parametrize(
    ("header", "challenge"),
    [
        # No Bearer credential at all: the scheme alone, no error code (RFC 6750 §3.1).
        (None, 'Bearer realm="mneme"'),
        ("Basic dXNlcjpwdw==", 'Bearer realm="mneme"'),
        ("Bearer not-a-jwt", 'Bearer realm="mneme", error="invalid_token", error_description='),
    ],
)
async def test_missing_or_malformed_credentials_are_refused(
    client: AsyncClient, header: str | None, challenge: str
) -> None:
    headers = {"Authorization": header} if header else {}
    response = await client.get("/v1/users/me", headers=headers)
    assert_problem(response, 401, "UNAUTHENTICATED")
    sent = response.headers["www-authenticate"]
    assert sent.startswith(challenge), sent
    if "error=" not in challenge:
        assert sent == challenge


async def test_asymmetric_token_without_a_configured_jwks_is_refused(
    client: AsyncClient, rsa_key: rsa.RSAPrivateKey, tenant: str
) -> None:
    token = sign(claims(tenant, "frank"), rsa_key, "RS256", kid="rsa-1")
    response = await client.get("/v1/users/me", headers={"Authorization": f"Bearer {token}"})
    assert_problem(response, 401, "UNAUTHENTICATED")


def test_claims_map_to_a_principal_with_configured_claim_names() -> None:
    settings = Settings(
        _env_file=None,
        jwt_hs256_secret=TEST_SECRET,
        tenant_claim="tid",
        roles_claim="groups",
        admin_role="mneme-admins",
    )
    verifier = TokenVerifier(settings)
    principal = verifier.principal_from_claims(
        {
            "sub": "svc-1",
            "tid": "acme",
            "groups": ["mneme-admins"],
            "scope": "openid mneme:service",
        }
    )
    assert (principal.tenant_id, principal.subject) == ("acme", "svc-1")
    assert principal.is_admin and principal.is_service
    assert principal.account is None


def test_account_overlay_drops_the_password_provider() -> None:
    verifier = TokenVerifier(Settings(_env_file=None, jwt_hs256_secret=TEST_SECRET))
    principal = verifier.principal_from_claims(
        {
            "sub": "u1",
            "org_id": "acme",
            "name": "Ada",
            "email": "ada@example.test",
            "picture": "https://img.example/ada.png",
            "identities": [
                {"provider": "github"},
                {"provider": "credential"},
                {"provider": "google"},
            ],
        }
    )
    assert principal.kind == "user"
    assert principal.account is not None
    assert principal.account.socials == ("github", "google")
    assert principal.account.name == "Ada"


@pytest.mark.parametrize(
    ("claims", "socials"),
    [
        # A socials claim that is not a list is left out: `amr` is used as without it.
        ({"identities": 5}, ()),
        ({"identities": True}, ()),
        ({"identities": "google"}, ()),
        ({"identities": {"provider": "github"}}, ()),
        ({"identities": 5, "amr": ["otp", "github"]}, ("otp", "github")),
        ({"identities": [{"provider": 5}, 7, None, "gitlab"]}, ("gitlab",)),
        # So is an `amr` that is not a list, or an item of it that is not a name.
        ({"amr": "github"}, ()),
        ({"amr": {"github": True}}, ()),
        ({"amr": [["github"], "mfa"]}, ("mfa",)),
    ],
)
def test_a_providers_claim_that_is_not_a_list_is_left_out(
    claims: dict[str, Any], socials: tuple[str, ...]
) -> None:
    verifier = TokenVerifier(Settings(_env_file=None, jwt_hs256_secret=TEST_SECRET))
    principal = verifier.principal_from_claims({"sub": "u1", "org_id": "acme", **claims})
    assert principal.account is not None
    assert principal.account.socials == socials


@pytest.mark.parametrize("value", [5, True, ["Ada"], {"text": "Ada"}, 1.5])
def test_a_name_email_or_avatar_claim_that_is_not_text_is_left_out(value: object) -> None:
    verifier = TokenVerifier(Settings(_env_file=None, jwt_hs256_secret=TEST_SECRET))
    principal = verifier.principal_from_claims(
        {"sub": "u1", "org_id": "acme", "name": value, "email": value, "picture": value}
    )
    assert principal.account is not None
    assert (principal.account.name, principal.account.email, principal.account.avatar) == (
        None,
        None,
        None,
    )


def test_overlay_claim_names_are_settings() -> None:
    settings = Settings(
        _env_file=None,
        jwt_hs256_secret=TEST_SECRET,
        avatar_claim="avatar_url",
        socials_claim="linked",
    )
    principal = TokenVerifier(settings).principal_from_claims(
        {
            "sub": "u1",
            "org_id": "acme",
            "avatar_url": "https://img.example/a.png",
            "picture": "https://ignored.example/p.png",
            "linked": ["gitlab", "credential"],
        }
    )
    assert principal.account is not None
    assert principal.account.avatar == "https://img.example/a.png"
    assert principal.account.socials == ("gitlab",)


def test_unauthenticated_error_carries_a_bearer_challenge() -> None:
    error = Unauthenticated("expired")
    assert error.headers["WWW-Authenticate"].startswith('Bearer realm="mneme"')


async def test_a_verified_token_is_remembered_and_still_refused_once_it_expires() -> None:
    settings = Settings(_env_file=None, jwt_hs256_secret=TEST_SECRET, jwt_leeway_seconds=0)
    verifier = TokenVerifier(settings)
    token = mint_dev_token(settings, tenant_id="acme", user_id="ada", ttl_seconds=1)
    first = await verifier.verify(token)
    # The same token again: the principal verified the first time, not a new check.
    assert await verifier.verify(token) is first
    # Another token is its own: nothing of the first carries over.
    other = await verifier.verify(mint_dev_token(settings, tenant_id="acme", user_id="bob"))
    assert (other.subject, other is first) == ("bob", False)
    # Remembered or not, a token past its `exp` is refused as PyJWT refuses it.
    expires = jwt.decode(token, options={"verify_signature": False})["exp"]
    await asyncio.sleep(max(0.0, expires - time.time()) + 0.05)
    with pytest.raises(Unauthenticated, match="expired"):
        await verifier.verify(token)


async def test_a_token_is_not_remembered_longer_than_the_key_set() -> None:
    # With a JWKS cached for 0 s, a key dropped from the set stops its tokens at once, so no
    # verified token is reused either.
    settings = Settings(
        _env_file=None,
        jwt_hs256_secret=TEST_SECRET,
        jwks_url="http://127.0.0.1:9/.well-known/jwks.json",
        jwks_cache_seconds=0,
    )
    verifier = TokenVerifier(settings)
    token = mint_dev_token(settings, tenant_id="acme", user_id="ada")
    first = await verifier.verify(token)
    again = await verifier.verify(token)
    assert again == first and again is not first
