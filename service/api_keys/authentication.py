"""Authenticating a request that carries a Mneme API key (a service principal)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from service.api_keys.credential import looks_like_api_key, parse_api_key
from service.api_keys.repository import ApiKeyRepository
from service.api_keys.service import SERVICE_SUBJECT_PREFIX, authenticate_api_key
from service.auth.principal import Principal
from service.db import tenant_transaction
from service.errors import Unauthenticated


class ApiKeyAuthenticator:
    """The `CredentialAuthenticator` for API keys: looks the key up in its own tenant."""

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        self._sessionmaker = sessionmaker

    def accepts(self, token: str) -> bool:
        return looks_like_api_key(token)

    async def authenticate(self, token: str) -> Principal:
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
