"""Turn an `Authorization` header into a `Principal` (JWT or API key), or refuse it."""

from __future__ import annotations

from opentelemetry import trace
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from service.api_keys.credential import looks_like_api_key, parse_api_key
from service.api_keys.repository import ApiKeyRepository
from service.api_keys.service import SERVICE_SUBJECT_PREFIX, authenticate_api_key
from service.auth.principal import Principal
from service.auth.tokens import TokenVerifier
from service.db import tenant_transaction
from service.errors import Unauthenticated
from service.observability import Metrics, bind_tenant, tracer


class Authenticator:
    def __init__(
        self,
        verifier: TokenVerifier,
        sessionmaker: async_sessionmaker[AsyncSession],
        metrics: Metrics,
    ) -> None:
        self._verifier = verifier
        self._sessionmaker = sessionmaker
        self._metrics = metrics

    async def authenticate(self, authorization: str | None) -> Principal:
        with tracer.start_as_current_span("auth") as span:
            try:
                principal = await self._authenticate(authorization)
            except Unauthenticated as exc:
                reason = "missing" if authorization is None else "invalid"
                self._metrics.auth_failures.labels(reason).inc()
                span.set_status(trace.Status(trace.StatusCode.ERROR, exc.detail))
                raise
            span.set_attribute("mneme.tenant_id", principal.tenant_id)
            bind_tenant(principal.tenant_id)
            span.set_attribute("mneme.principal.kind", principal.kind)
            span.set_attribute("mneme.principal.credential", principal.credential)
            return principal

    async def _authenticate(self, authorization: str | None) -> Principal:
        if not authorization:
            raise Unauthenticated("Send `Authorization: Bearer <token>`.", error="invalid_request")
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise Unauthenticated("Only the Bearer scheme is accepted.", error="invalid_request")
        if looks_like_api_key(token):
            return await self._authenticate_api_key(token)
        return await self._verifier.verify(token)

    async def _authenticate_api_key(self, token: str) -> Principal:
        parsed = parse_api_key(token)
        if parsed is None:
            raise Unauthenticated("The API key is malformed.")
        async with tenant_transaction(self._sessionmaker, parsed.tenant_id) as session:
            key = await authenticate_api_key(ApiKeyRepository(session, parsed.tenant_id), parsed)
        if key is None:
            raise Unauthenticated("The API key is unknown, revoked or expired.")
        return Principal(
            tenant_id=key.tenant_id,
            subject=SERVICE_SUBJECT_PREFIX + str(key.id),
            kind="service",
            credential="api_key",
            roles=frozenset(key.roles),
            is_admin="admin" in key.roles,
        )
