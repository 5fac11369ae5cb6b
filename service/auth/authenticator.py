"""Turn an `Authorization` header into a `Principal` (JWT or API key), or refuse it."""

from __future__ import annotations

from typing import Protocol

from opentelemetry import trace

from service.auth.failure_limit import FailedAuthenticationLimit, TooManyFailedAuthentications
from service.auth.principal import Principal
from service.auth.tokens import TokenVerifier
from service.errors import Unauthenticated
from service.observability import Metrics, bind_tenant, tracer


class CredentialAuthenticator(Protocol):
    """A kind of bearer credential other than a JWT (API keys), recognised by its shape."""

    def accepts(self, token: str) -> bool: ...

    async def authenticate(self, token: str) -> Principal: ...


class Authenticator:
    def __init__(
        self,
        verifier: TokenVerifier,
        api_keys: CredentialAuthenticator,
        metrics: Metrics,
        failure_limit: FailedAuthenticationLimit,
    ) -> None:
        self._verifier = verifier
        self._api_keys = api_keys
        self._metrics = metrics
        self._failure_limit = failure_limit

    async def authenticate(self, authorization: str | None, client_address: str) -> Principal:
        with tracer.start_as_current_span("auth") as span:
            try:
                principal = await self._authenticate(authorization)
            except Unauthenticated as exc:
                # Only a failure is counted, after the credential was checked: what an address
                # did before never refuses a valid credential.
                try:
                    await self._failure_limit.record_failure(client_address)
                except TooManyFailedAuthentications as limited:
                    self._metrics.auth_failures.labels("limited").inc()
                    span.set_status(trace.Status(trace.StatusCode.ERROR, limited.detail))
                    raise limited from exc
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
            raise Unauthenticated("Send `Authorization: Bearer <token>`.", error=None)
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise Unauthenticated("Only the Bearer scheme is accepted.", error=None)
        if self._api_keys.accepts(token):
            return await self._api_keys.authenticate(token)
        return await self._verifier.verify(token)
