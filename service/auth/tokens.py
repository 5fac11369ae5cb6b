"""Bearer JWT verification (HS256 secret and RS256/ES256 via JWKS).

PyJWT does the cryptography and claim checks; its `PyJWKClient` caches the JWKS and refetches
it when a token names a `kid` it has not seen (key rotation), so we do not hand-roll either.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import jwt
from jwt import PyJWKClient
from pydantic import TypeAdapter, ValidationError

# Minting lives apart (it needs no web framework); imported from here as it always was.
from service.auth.dev_tokens import mint_dev_token as mint_dev_token
from service.auth.principal import (
    TENANT_ID_MAX,
    AccountClaims,
    Principal,
)
from service.config import JWKS_ALGORITHMS, Settings
from service.errors import ServiceUnavailable, Unauthenticated
from service.kit.expiring import ExpiringValues
from service.kit.secrets import find_secret
from service.kit.types import (
    LATEST_NUMERIC_DATE,
    SOCIALS_MAX,
    AccountEmail,
    AccountName,
    AvatarUrl,
    ProviderName,
    account_value,
    is_storable_text,
    is_valid_identifier,
    is_valid_user_id,
)

ASYMMETRIC_ALGORITHMS = frozenset(JWKS_ALGORITHMS)
# Linked-account providers that are not OAuth identities: email+password is not a "linked
# account" and must not be shown as one.
PASSWORD_PROVIDERS = frozenset({"credential", "password", "pwd", "email"})

VERIFIED_TOKEN_SECONDS = 60
"""How long a verified token's principal is reused for the same token string (never past
the token's own expiry, nor past the JWKS cache's lifespan: a key dropped from the key set
stops a token no later than it would without this memory)."""
VERIFIED_TOKENS_KEPT = 4096
"""The most tokens remembered at once; past it the memory starts again (a verification each)."""

NUMERIC_DATE_CLAIMS = ("exp", "nbf", "iat")


@dataclass(frozen=True, slots=True)
class _Verified:
    principal: Principal
    expires_at: float
    """The token's `exp` claim (seconds since the epoch)."""


class TokenVerifier:
    """Verifies bearer JWTs and turns their claims into a `Principal`."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        secret = settings.jwt_hs256_secret
        self._hs256_secret = secret.get_secret_value() if secret is not None else None
        self._jwks: PyJWKClient | None = (
            PyJWKClient(
                settings.jwks_url,
                cache_keys=True,
                lifespan=max(settings.jwks_cache_seconds, 1),
                timeout=5,
                cooldown_duration=settings.jwks_refresh_cooldown_seconds,
            )
            if settings.jwks_url
            else None
        )
        # An agent sends the same bearer token with every call of a session; its signature and
        # claims are checked once, and the principal reused while the token is valid.
        remembered = VERIFIED_TOKEN_SECONDS
        if settings.jwks_url:
            remembered = min(remembered, settings.jwks_cache_seconds)
        self._verified: ExpiringValues[str, _Verified] | None = (
            ExpiringValues(timedelta(seconds=remembered), VERIFIED_TOKENS_KEPT)
            if remembered > 0
            else None
        )

    async def verify(self, token: str) -> Principal:
        verified = self._verified
        if verified is not None:
            held = verified.get(token)
            # PyJWT's own rule for `exp`: a token is expired once exp <= now - leeway.
            leeway = self._settings.jwt_leeway_seconds
            if held is not None and held.expires_at > time.time() - leeway:
                return held.principal
        claims = await self.decode(token)
        principal = self.principal_from_claims(claims)
        if verified is not None:
            verified.put(token, _Verified(principal, float(claims["exp"])))
        return principal

    async def decode(self, token: str) -> dict[str, Any]:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise Unauthenticated("The bearer token is not a well-formed JWT.") from exc
        algorithm = header.get("alg")
        if algorithm not in self._settings.accepted_jwt_algorithms:
            raise Unauthenticated(f"Tokens signed with {algorithm!r} are not accepted.")

        key: Any
        if algorithm == "HS256":
            if self._hs256_secret is None:
                raise Unauthenticated("HS256 tokens are not accepted by this deployment.")
            key = self._hs256_secret
        elif algorithm in ASYMMETRIC_ALGORITHMS:
            key = await self._signing_key(token)
        else:
            raise Unauthenticated(f"Tokens signed with {algorithm!r} are not accepted.")

        settings = self._settings
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                audience=settings.jwt_audience,
                issuer=settings.jwt_issuer,
                leeway=settings.jwt_leeway_seconds,
                options={
                    "require": ["exp", "iat"],
                    "verify_aud": settings.jwt_audience is not None,
                },
            )
        except jwt.ExpiredSignatureError as exc:
            raise Unauthenticated("The bearer token has expired.") from exc
        except jwt.ImmatureSignatureError as exc:
            raise Unauthenticated("The bearer token is not valid yet (nbf/iat).") from exc
        except jwt.InvalidAudienceError as exc:
            raise Unauthenticated("The bearer token was issued for another audience.") from exc
        except jwt.InvalidIssuerError as exc:
            raise Unauthenticated("The bearer token comes from an untrusted issuer.") from exc
        except jwt.MissingRequiredClaimError as exc:
            raise Unauthenticated(f"The bearer token lacks the {exc.claim!r} claim.") from exc
        except jwt.PyJWTError as exc:
            raise Unauthenticated("The bearer token's signature or claims are invalid.") from exc
        # PyJWT checks a time claim through `int()`: a string of digits or a boolean passes, and
        # so does an integer too large for a float, which then breaks everything that reads it.
        # RFC 7519 has a JSON number of seconds, and nothing else.
        for name in NUMERIC_DATE_CLAIMS:
            if name in claims and not _is_numeric_date(claims[name]):
                raise Unauthenticated(
                    f"The bearer token's {name!r} claim is not a number of seconds since 1970 "
                    "(up to the year 9999)."
                )
        return claims

    async def _signing_key(self, token: str) -> Any:
        if self._jwks is None:
            raise Unauthenticated("Asymmetric tokens need MNEME_JWKS_URL, which is not set.")
        jwks = self._jwks
        try:
            # PyJWKClient fetches over blocking urllib: keep it off the event loop.
            signing_key = await asyncio.to_thread(jwks.get_signing_key_from_jwt, token)
        except jwt.PyJWKClientConnectionError as exc:
            raise ServiceUnavailable("The identity provider's key set is unreachable.") from exc
        except (jwt.PyJWKClientError, jwt.DecodeError) as exc:
            raise Unauthenticated("The token's signing key is not in the trusted key set.") from exc
        return signing_key.key

    def principal_from_claims(self, claims: dict[str, Any]) -> Principal:
        settings = self._settings
        tenant_id = claims.get(settings.tenant_claim)
        if not isinstance(tenant_id, str) or not is_valid_identifier(tenant_id, TENANT_ID_MAX):
            raise Unauthenticated(f"The token has no valid tenant claim {settings.tenant_claim!r}.")
        subject = claims.get(settings.user_claim)
        if not isinstance(subject, str) or not is_valid_user_id(subject):
            raise Unauthenticated(f"The token has no valid user claim {settings.user_claim!r}.")
        roles = frozenset(_string_list(claims.get(settings.roles_claim)))
        scopes = frozenset(_string_list(claims.get(settings.scope_claim)))
        is_service = settings.service_scope in scopes
        return Principal(
            tenant_id=tenant_id,
            subject=subject,
            kind="service" if is_service else "user",
            credential="jwt",
            roles=roles,
            is_admin=settings.admin_role in roles,
            account=None if is_service else account_claims(claims, settings),
        )


def _is_numeric_date(value: object) -> bool:
    # The comparison holds for an int of any size and is false for NaN; `math.isfinite` would
    # itself overflow on an int too large for a float.
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and 0 <= value <= LATEST_NUMERIC_DATE
    )


def account_claims(claims: dict[str, Any], settings: Settings) -> AccountClaims:
    """The auth overlay from the token (claim names are settings; OIDC standard by default).

    Linked providers come from the socials claim — a list of provider names or of
    `{"provider": …}` objects — or, failing that, from `amr` (a list of names). A claim of
    another type is left out as if the token did not carry it, as is each item of a list that
    is neither: the token's request cannot be refused for what its issuer put in it.
    """
    providers: list[str] = []
    for identity in _claim_list(claims.get(settings.socials_claim)):
        if isinstance(identity, dict) and isinstance(identity.get("provider"), str):
            providers.append(identity["provider"])
        elif isinstance(identity, str):
            providers.append(identity)
    if not providers:
        providers = [m for m in _claim_list(claims.get("amr")) if isinstance(m, str)]
    socials = tuple(
        dict.fromkeys(
            p
            for p in providers
            if p.lower() not in PASSWORD_PROVIDERS
            and find_secret(p) is None
            and _holds(_PROVIDER, p)
        )
    )[:SOCIALS_MAX]
    return AccountClaims(
        name=_overlay_text(claims.get(settings.name_claim), _NAME),
        email=_overlay_text(claims.get(settings.email_claim), _EMAIL),
        avatar=_overlay_text(claims.get(settings.avatar_claim), _AVATAR),
        socials=socials,
    )


def _claim_list(value: object) -> list[object]:
    """A claim that must be a JSON array (a string or an object iterates as something else)."""
    return value if isinstance(value, list) else []


def _string_list(value: object) -> list[str]:
    if isinstance(value, str):
        return [part for part in value.split() if part]
    if isinstance(value, list | tuple):
        return [item for item in value if isinstance(item, str)]
    return []


_NAME: TypeAdapter[str] = TypeAdapter(AccountName)
_EMAIL: TypeAdapter[str] = TypeAdapter(AccountEmail)
_AVATAR: TypeAdapter[str] = TypeAdapter(AvatarUrl)
_PROVIDER: TypeAdapter[str] = TypeAdapter(ProviderName)


def _holds(rule: TypeAdapter[str], value: str) -> bool:
    try:
        rule.validate_python(value)
    except ValidationError:
        return False
    return is_storable_text(value)


def _overlay_text(value: object, rule: TypeAdapter[str]) -> str | None:
    """A name, email or avatar claim as the overlay records it. One the secret policy refuses
    (say, an avatar URL signed with a token) is left out, and so is one Postgres text cannot
    hold (a NUL, a lone surrogate), one longer than the overlay holds or not of its shape (an
    email that is no address, an avatar that is no web URL): a service setting it gets a 422,
    but a token's request cannot be refused for what its issuer put in it. One with nothing
    visible is no value, as when a service sets it."""
    if not isinstance(value, str) or account_value(value) is None or not _holds(rule, value):
        return None
    return None if find_secret(value) is not None else value
