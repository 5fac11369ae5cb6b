"""The Memory page and the API docs are served from the package, with nothing from a CDN."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import AsyncIterator

import pytest
from fastapi import FastAPI
from httpx import ASGITransport, AsyncClient
from pydantic import AnyHttpUrl, SecretStr, ValidationError

from service.config import Settings
from service.main import create_app
from tests.conftest import TEST_SECRET, assert_problem

# src= / href= / url(...) values, and any absolute URL written in a script.
REFERENCE = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']|url\(["']?([^"')]+)""")
EXTERNAL = re.compile(r"""["'`(]\s*(?:https?:)?//""")


def references(html: str) -> list[str]:
    return [a or b for a, b in REFERENCE.findall(html)]


@pytest.fixture
async def prod_client(settings: Settings) -> AsyncIterator[AsyncClient]:
    # Page routes need no database: the app is driven without its lifespan.
    prod = settings.model_copy(update={"env": "prod", "jwt_hs256_secret": SecretStr(TEST_SECRET)})
    app = create_app(prod)
    async with AsyncClient(transport=ASGITransport(app=app), base_url="http://mneme.test") as c:
        yield c


@pytest.mark.parametrize("path", ["/docs", "/redoc"])
async def test_api_docs_load_only_local_assets(client: AsyncClient, path: str) -> None:
    page = await client.get(path)
    assert page.status_code == 200
    refs = references(page.text)
    scripts = [r for r in refs if r.endswith(".js")]
    assert scripts, page.text
    for ref in refs:
        assert ref.startswith("/"), f"{path} loads {ref} from elsewhere"
        asset = await client.get(ref)
        assert asset.status_code == 200, ref
    assert not EXTERNAL.search(page.text.replace("http://mneme.test", "")), page.text
    bundle = await client.get(scripts[0])
    assert "javascript" in bundle.headers["content-type"]
    assert len(bundle.content) > 100_000


async def test_swagger_ui_is_a_release_that_renders_openapi_3_1(client: AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    assert document["openapi"].startswith("3.1")
    bundle = (await client.get("/docs-assets/swagger-ui-bundle.js")).text
    # Swagger UI renders OpenAPI 3.1 from version 5 on.
    assert re.search(r'"5\.\d+\.\d+"', bundle)


async def test_memory_page_and_its_assets_are_served(client: AsyncClient) -> None:
    index = await client.get("/memory/")
    assert index.status_code == 200
    assert index.headers["content-type"].startswith("text/html")
    refs = references(index.text)
    assert {"style.css", "app.js"} <= set(refs)
    for ref in refs:
        if ref.startswith("#"):
            continue
        asset = await client.get(f"/memory/{ref}")
        assert asset.status_code == 200, ref
        assert not EXTERNAL.search(asset.text), f"{ref} references another host"
    assert not EXTERNAL.search(index.text)


async def test_page_config_in_dev_offers_dev_tokens_and_no_oidc(client: AsyncClient) -> None:
    config = (await client.get("/memory/config.json")).json()
    assert config == {"oidc": None, "dev_tokens": True}


async def test_page_config_carries_the_oidc_client(settings: Settings) -> None:
    configured = settings.model_copy(
        update={
            "web_oidc_issuer": "https://id.example.org/realms/acme",
            "web_oidc_client_id": "mneme-page",
        }
    )
    app: FastAPI = create_app(configured)
    async with AsyncClient(transport=ASGITransport(app=app), base_url="http://mneme.test") as c:
        config = (await c.get("/memory/config.json")).json()
    assert config["oidc"] == {
        "issuer": "https://id.example.org/realms/acme",
        "client_id": "mneme-page",
        "scopes": "openid profile email",
        "token": "access_token",
    }


async def test_dev_token_from_the_page_authenticates_its_user(client: AsyncClient) -> None:
    minted = await client.post("/memory/dev-token", json={"tenant": "t-page", "user": "ada"})
    assert minted.status_code == 200
    headers = {"Authorization": f"Bearer {minted.json()['token']}"}
    me = await client.get("/v1/users/me", headers=headers)
    assert me.status_code == 200
    assert (me.json()["id"], me.json()["tenant_id"]) == ("ada", "t-page")
    admin = await client.get("/v1/admin/users", headers=headers)
    assert_problem(admin, 403, "FORBIDDEN")


async def test_dev_token_admin_flag_grants_the_admin_role(client: AsyncClient) -> None:
    minted = await client.post(
        "/memory/dev-token", json={"tenant": "t-page-admin", "user": "root", "admin": True}
    )
    headers = {"Authorization": f"Bearer {minted.json()['token']}"}
    assert (await client.get("/v1/admin/users", headers=headers)).status_code == 200


async def test_dev_token_refuses_an_invalid_user_id(client: AsyncClient) -> None:
    response = await client.post("/memory/dev-token", json={"tenant": "t-page", "user": "a/b"})
    body = assert_problem(response, 422, "VALIDATION_FAILED")
    # As for any body, the refusal names the field it refuses.
    assert [error["loc"] for error in body["errors"]] == [["body", "user"]]
    response = await client.post("/memory/dev-token", json={"tenant": "t page", "user": "me"})
    body = assert_problem(response, 422, "VALIDATION_FAILED")
    assert [error["loc"] for error in body["errors"]] == [["body", "tenant"], ["body", "user"]]


async def test_prod_has_no_dev_token_minter(prod_client: AsyncClient) -> None:
    response = await prod_client.post("/memory/dev-token", json={"tenant": "acme", "user": "ada"})
    # No route: the path falls through to the static page mount, which serves only GET.
    body = assert_problem(response, 405, "METHOD_NOT_ALLOWED")
    assert "token" not in body
    config = (await prod_client.get("/memory/config.json")).json()
    assert config["dev_tokens"] is False
    # The page itself is still served in prod (it signs in through OIDC there).
    assert (await prod_client.get("/memory/")).status_code == 200


async def test_memory_without_the_slash_redirects_to_the_page(client: AsyncClient) -> None:
    response = await client.get("/memory")
    assert response.status_code in (307, 308)
    assert response.headers["location"].endswith("/memory/")


async def test_the_page_loads_only_its_own_files_and_cannot_be_framed(client: AsyncClient) -> None:
    for path in ["/memory/", "/memory/app.js", "/memory/style.css"]:
        response = await client.get(path)
        assert response.status_code == 200, path
        policy = dict(
            directive.strip().split(" ", 1)
            for directive in response.headers["content-security-policy"].split(";")
        )
        assert policy["default-src"] == "'none'"
        assert policy["script-src"] == "'self'"
        assert policy["style-src"] == "'self'"
        assert policy["connect-src"] == "'self'"
        assert policy["frame-ancestors"] == "'none'"
        assert response.headers["x-frame-options"] == "DENY"
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "no-referrer"


async def test_the_page_may_connect_to_its_identity_provider_and_nowhere_else(
    settings: Settings,
) -> None:
    configured = settings.model_copy(
        update={
            "web_oidc_issuer": "https://accounts.example.org/realms/acme",
            "web_oidc_client_id": "mneme-page",
            "web_oidc_connect_origins": [AnyHttpUrl("https://tokens.example-apis.com/v1/token")],
        }
    )
    app: FastAPI = create_app(configured)
    async with AsyncClient(transport=ASGITransport(app=app), base_url="http://mneme.test") as c:
        response = await c.get("/memory/")
    policy = response.headers["content-security-policy"]
    assert (
        "connect-src 'self' https://accounts.example.org https://tokens.example-apis.com;" in policy
    )


def test_a_connect_origin_that_is_not_a_url_is_refused_at_start_up() -> None:
    with pytest.raises(ValidationError):
        Settings(web_oidc_connect_origins=["tokens.example.com"])


def _policy(header: str) -> dict[str, str]:
    policy: dict[str, str] = {}
    for directive in header.split(";"):
        name, _, sources = directive.strip().partition(" ")
        policy[name] = sources
    return policy


@pytest.mark.parametrize("path", ["/docs", "/redoc", "/docs/oauth2-redirect"])
async def test_the_api_docs_run_only_their_own_scripts_and_cannot_be_framed(
    client: AsyncClient, path: str
) -> None:
    page = await client.get(path)
    assert page.status_code == 200
    policy = _policy(page.headers["content-security-policy"])
    assert policy["default-src"] == "'none'"
    assert policy["frame-ancestors"] == "'none'"
    assert policy["connect-src"] == "'self'"
    sources = policy["script-src"].split()
    assert "'unsafe-inline'" not in sources and "'self'" in sources
    # Every inline script of the page is allowed by its hash, and nothing else inline is.
    inline = re.findall(r"<script>(.*?)</script>", page.text, re.DOTALL)
    hashes = {
        "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"
        for script in inline
    }
    assert hashes == {source for source in sources if source.startswith("'sha256-")}
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["x-content-type-options"] == "nosniff"


async def test_only_redoc_may_compile_code_and_start_a_worker(client: AsyncClient) -> None:
    redoc = _policy((await client.get("/redoc")).headers["content-security-policy"])
    swagger = _policy((await client.get("/docs")).headers["content-security-policy"])
    assert "'unsafe-eval'" in redoc["script-src"] and redoc["worker-src"] == "blob:"
    assert "'unsafe-eval'" not in swagger["script-src"] and "worker-src" not in swagger
    # Swagger UI starts from one inline script, allowed by its hash.
    assert sum(source.startswith("'sha256-") for source in swagger["script-src"].split()) == 1


@pytest.mark.parametrize(
    ("path", "status"),
    [("/openapi.json", 200), ("/healthz", 200), ("/v1/users/me", 401), ("/nowhere", 404)],
)
async def test_api_responses_carry_the_security_headers(
    client: AsyncClient, path: str, status: int
) -> None:
    response = await client.get(path)
    assert response.status_code == status
    policy = _policy(response.headers["content-security-policy"])
    assert policy["default-src"] == "'none'" and policy["frame-ancestors"] == "'none'"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["x-frame-options"] == "DENY"


async def test_a_docs_asset_is_not_sniffed(client: AsyncClient) -> None:
    bundle = await client.get("/docs-assets/swagger-ui-bundle.js")
    assert bundle.headers["x-content-type-options"] == "nosniff"


async def test_swagger_ui_sends_the_document_to_no_outside_validator(client: AsyncClient) -> None:
    page = (await client.get("/docs")).text
    assert '"validatorUrl": null' in page
