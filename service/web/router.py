"""Static pages served by the service: the Memory page and Swagger UI, both without a CDN.

The Memory page is plain HTML and one JavaScript module committed under `static/` (no build
step, no Node at run time); it signs in in the browser and then calls only the public API with
its bearer token, like any other client. Swagger UI's and ReDoc's files come from the
`fastapi-offline` wheel (Swagger UI 5, which renders OpenAPI 3.1), so `/docs` and `/redoc` work
on a machine with no internet.
"""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

import fastapi_offline
from fastapi import APIRouter, Body, FastAPI
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from pydantic import AfterValidator, BaseModel
from starlette.responses import Response
from starlette.types import Scope

from service.auth.principal import TENANT_ID_MAX
from service.auth.tokens import mint_dev_token
from service.config import Settings
from service.kit.routing import ApiRoute
from service.kit.types import JsonBool, UserId, identifier_rule, is_valid_identifier

STATIC_DIR = Path(__file__).parent / "static"
# Only the package's files are used, not its FastAPI subclass.
DOCS_ASSETS_DIR = Path(fastapi_offline.__file__).parent / "static"
PAGE_PATH = "/memory"
SWAGGER_ASSETS_PATH = "/docs-assets"
DOCS_PATH = "/docs"
REDOC_PATH = "/redoc"
OAUTH2_REDIRECT_PATH = "/docs/oauth2-redirect"


class OidcConfig(BaseModel):
    issuer: str
    client_id: str
    scopes: str
    token: str


class PageConfig(BaseModel):
    """What the page needs to know before it can sign anybody in."""

    oidc: OidcConfig | None
    dev_tokens: bool


def _tenant_id(value: str) -> str:
    if not is_valid_identifier(value, TENANT_ID_MAX):
        raise ValueError(f"must be a tenant id: {identifier_rule(TENANT_ID_MAX)}")
    return value


class DevTokenRequest(BaseModel):
    """Whom the page's development token names: ids as tokens carry them (a refused one is a
    422 whose `errors` name the field, as for any body)."""

    tenant: Annotated[str, AfterValidator(_tenant_id)]
    user: UserId
    admin: JsonBool = False


class DevToken(BaseModel):
    token: str


class PageFiles(StaticFiles):
    """The Memory page's files, each answered with the page's security headers."""

    def __init__(self, *, directory: Path, headers: dict[str, str]) -> None:
        super().__init__(directory=directory, html=True)
        self.security_headers = headers

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(self.security_headers)
        return response


def page_security_headers(settings: Settings) -> dict[str, str]:
    """The page holds a bearer token in the browser, so it loads nothing but its own files:
    no inline script or style, no other origin except the identity provider it signs in with,
    never framed (clickjacking a Delete button), and no Referer carrying the sign-in code."""
    connect = ["'self'", *_oidc_origins(settings)]
    policy = "; ".join(
        [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self' data:",
            f"connect-src {' '.join(connect)}",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ]
    )
    return {
        "Content-Security-Policy": policy,
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
    }


def _oidc_origins(settings: Settings) -> list[str]:
    """Origins the page's sign-in talks to: the issuer (discovery) and any the provider's token
    endpoint lives on (e.g. Google's issuer and token endpoint are different hosts)."""
    if not (settings.web_oidc_issuer and settings.web_oidc_client_id):
        return []
    origins: list[str] = []
    for url in [settings.web_oidc_issuer, *map(str, settings.web_oidc_connect_origins)]:
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        if origin not in origins:
            origins.append(origin)
    return origins


def install_web(app: FastAPI, settings: Settings) -> None:
    """Mount the Memory page and the offline API docs on `app` (created with docs_url=None and
    redoc_url=None, so FastAPI's CDN-loading pages are not registered)."""
    router = APIRouter(route_class=ApiRoute, include_in_schema=False)

    @router.get(f"{PAGE_PATH}/config.json")
    async def get_page_config() -> PageConfig:
        oidc = (
            OidcConfig(
                issuer=settings.web_oidc_issuer,
                client_id=settings.web_oidc_client_id,
                scopes=settings.web_oidc_scopes,
                token=settings.web_oidc_token,
            )
            if settings.web_oidc_issuer and settings.web_oidc_client_id
            else None
        )
        return PageConfig(oidc=oidc, dev_tokens=_dev_tokens_enabled(settings))

    if _dev_tokens_enabled(settings):
        # Registered only in dev: in prod the path does not exist at all, so no setting or
        # request can reach a token minter there.
        @router.post(f"{PAGE_PATH}/dev-token")
        async def mint_page_dev_token(request: Annotated[DevTokenRequest, Body()]) -> DevToken:
            token = mint_dev_token(
                settings, tenant_id=request.tenant, user_id=request.user, admin=request.admin
            )
            return DevToken(token=token)

    openapi_url = app.openapi_url or "/openapi.json"
    docs = _DocsPage(
        get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=OAUTH2_REDIRECT_PATH,
            swagger_js_url=f"{SWAGGER_ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{SWAGGER_ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{SWAGGER_ASSETS_PATH}/favicon.png",
            # Swagger UI's default validator badge sends the document's URL to
            # validator.swagger.io; the page fetches from this origin only.
            swagger_ui_parameters={"validatorUrl": None},
        )
    )
    # ReDoc's bundle compiles JSON Schema validators at run time (Ajv, with `new Function`) and
    # runs its search index in a Worker made from a blob: URL. The page holds no credential.
    redoc = _DocsPage(
        get_redoc_html(
            openapi_url=openapi_url,
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{SWAGGER_ASSETS_PATH}/redoc.standalone.js",
            redoc_favicon_url=f"{SWAGGER_ASSETS_PATH}/favicon.png",
            with_google_fonts=False,
        ),
        script_sources=("'unsafe-eval'",),
        worker_sources=("blob:",),
    )
    oauth2_redirect = _DocsPage(get_swagger_ui_oauth2_redirect_html())

    @router.get(DOCS_PATH)
    async def get_docs() -> HTMLResponse:
        return docs.response()

    @router.get(REDOC_PATH)
    async def get_redoc() -> HTMLResponse:
        return redoc.response()

    @router.get(OAUTH2_REDIRECT_PATH)
    async def get_docs_oauth2_redirect() -> HTMLResponse:
        return oauth2_redirect.response()

    app.include_router(router)
    app.mount(
        SWAGGER_ASSETS_PATH,
        StaticFiles(directory=DOCS_ASSETS_DIR),
        name="docs-assets",
    )
    app.mount(
        PAGE_PATH,
        PageFiles(directory=STATIC_DIR, headers=page_security_headers(settings)),
        name="memory-page",
    )


_INLINE_SCRIPT = re.compile(rb"<script>(.*?)</script>", re.DOTALL)


class _DocsPage:
    """An API documentation page, rendered once, with the security headers that fit it.

    Swagger UI's and ReDoc's pages start their bundles with an inline script (FastAPI writes
    it); the policy allows exactly those scripts by hash, the bundles from this origin, and
    fetches (the OpenAPI document, "Try it out") to this origin only. Styles may be inline
    because both renderers set them at run time. No page may be framed.
    """

    def __init__(
        self,
        page: HTMLResponse,
        *,
        script_sources: tuple[str, ...] = (),
        worker_sources: tuple[str, ...] = (),
    ) -> None:
        self._body = bytes(page.body)
        inline = [
            "'sha256-" + base64.b64encode(hashlib.sha256(script).digest()).decode() + "'"
            for script in _INLINE_SCRIPT.findall(self._body)
        ]
        scripts = " ".join(["'self'", *inline, *script_sources])
        directives = [
            "default-src 'none'",
            f"script-src {scripts}",
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data:",
            "connect-src 'self'",
            *([f"worker-src {' '.join(worker_sources)}"] if worker_sources else []),
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ]
        self._headers = {
            "Content-Security-Policy": "; ".join(directives),
            "X-Content-Type-Options": "nosniff",
            "X-Frame-Options": "DENY",
            "Referrer-Policy": "no-referrer",
        }

    def response(self) -> HTMLResponse:
        return HTMLResponse(self._body, headers=self._headers)


def _dev_tokens_enabled(settings: Settings) -> bool:
    return settings.is_dev and settings.jwt_hs256_secret is not None
