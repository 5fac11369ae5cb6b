"""Dev token minting (`mneme token`, the web console's dev sign-in, tests and benchmarks).

Apart from the verifier in `service.auth.tokens` so that minting a token loads PyJWT and the
settings only, not the web framework the verifier's errors are made of.
"""

from __future__ import annotations

import time
from typing import Any

import jwt

from service.auth.principal import TENANT_ID_MAX
from service.config import Settings
from service.kit.types import (
    CALLER_ALIAS,
    IDENTIFIER_MAX,
    is_valid_identifier,
    is_valid_user_id,
)


def mint_dev_token(
    settings: Settings,
    *,
    tenant_id: str,
    user_id: str,
    admin: bool = False,
    service: bool = False,
    ttl_seconds: int | None = None,
    extra_claims: dict[str, Any] | None = None,
) -> str:
    """An HS256 token for local development, signed with the configured dev secret."""
    if settings.jwt_hs256_secret is None:
        raise RuntimeError("no HS256 secret is configured (MNEME_JWT_HS256_SECRET)")
    if not is_valid_identifier(tenant_id, TENANT_ID_MAX) or not is_valid_user_id(user_id):
        raise ValueError(
            f"tenant ids are 1-{TENANT_ID_MAX} and user ids 1-{IDENTIFIER_MAX} characters of "
            f"A-Z a-z 0-9 . _ : @ | + = -, starting with a letter or digit (and a user is not "
            f"called {CALLER_ALIAS!r})"
        )
    now = int(time.time())
    claims: dict[str, Any] = {
        settings.user_claim: user_id,
        settings.tenant_claim: tenant_id,
        "iat": now,
        "exp": now + (ttl_seconds or settings.dev_token_ttl_seconds),
    }
    if admin:
        claims[settings.roles_claim] = [settings.admin_role]
    if service:
        claims[settings.scope_claim] = settings.service_scope
    if settings.jwt_issuer:
        claims["iss"] = settings.jwt_issuer
    if settings.jwt_audience:
        claims["aud"] = settings.jwt_audience
    claims.update(extra_claims or {})
    return jwt.encode(claims, settings.jwt_hs256_secret.get_secret_value(), algorithm="HS256")
