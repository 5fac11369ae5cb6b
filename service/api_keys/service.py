"""API key use cases: admins create, list and revoke keys; the auth layer verifies them."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from service.accounts.service import AccountService
from service.api_keys.credential import (
    ParsedApiKey,
    display_prefix,
    new_api_key,
    secret_matches,
)
from service.api_keys.models import ApiKey
from service.api_keys.repository import ApiKeyRepository
from service.api_keys.schemas import ApiKeyCreate, ApiKeyCreated, ApiKeyRead
from service.audit.service import AuditTrail
from service.auth.principal import Principal
from service.errors import NotFound, ValidationFailed
from service.kit.pagination import Page, decode_newest_first_cursor, newest_first_cursor
from service.kit.resource_headers import (
    entity_tag,
    require_preconditions,
)
from service.kit.secrets import refuse_secrets

SERVICE_SUBJECT_PREFIX = "api-key:"


def api_key_etag(key: ApiKeyRead) -> str:
    """A key's entity tag (its secret, shown once at creation, is no part of it)."""
    return entity_tag(key, ApiKeyRead)


class ApiKeyService:
    def __init__(
        self,
        repository: ApiKeyRepository,
        accounts: AccountService,
        audit: AuditTrail,
        principal: Principal,
    ) -> None:
        self._repository = repository
        self._accounts = accounts
        self._audit = audit
        self._principal = principal

    async def create(self, request: ApiKeyCreate) -> ApiKeyCreated:
        # The name is listed to every admin and kept in the audit trail: never a credential
        # (a key pasted into its own name included).
        refuse_secrets(request.name, ("body", "name"))
        if request.expires_at is not None and request.expires_at <= datetime.now(UTC):
            raise ValidationFailed(
                "expires_at must be in the future.",
                errors=[{"loc": ["body", "expires_at"], "msg": "in the past", "type": "value"}],
            )
        await self._accounts.hold_tenant_writes()
        # A service admin may be the tenant's first caller: the key needs its tenant row.
        await self._accounts.ensure_tenant()
        key_id = uuid.uuid4()
        full_key, secret_hash = new_api_key(self._principal.tenant_id, key_id)
        key = await self._repository.add(
            ApiKey(
                tenant_id=self._principal.tenant_id,
                id=key_id,
                name=request.name,
                display_prefix=display_prefix(full_key),
                secret_hash=secret_hash,
                roles=sorted(set(request.roles)),
                created_by=self._principal.subject,
                expires_at=request.expires_at,
            )
        )
        await self._audit.record(
            "api_key.create",
            target_type="api_key",
            target_id=str(key_id),
            detail={"name": request.name, "roles": key.roles},
        )
        return ApiKeyCreated(**ApiKeyRead.model_validate(key).model_dump(), key=full_key)

    async def list(
        self, *, cursor: str | None, limit: int, include_revoked: bool
    ) -> Page[ApiKeyRead]:
        after = decode_newest_first_cursor(cursor)
        keys = await self._repository.list_page(
            after=after, limit=limit + 1, include_revoked=include_revoked
        )
        items = [ApiKeyRead.model_validate(key) for key in keys[:limit]]
        return Page[ApiKeyRead](items=items, next_cursor=newest_first_cursor(keys, limit))

    async def get(self, key_id: uuid.UUID) -> ApiKeyRead:
        return ApiKeyRead.model_validate(await self._load(key_id))

    async def revoke(
        self,
        key_id: uuid.UUID,
        *,
        if_match: str | None = None,
        if_none_match: str | None = None,
    ) -> ApiKeyRead:
        """Revoke under the key's row lock; with `if_match`, only if the key is still in that
        state, and with `if_none_match`, only if it is not (`*`: never, since it exists).
        Revoking twice is harmless: the revoked key comes back."""
        await self._accounts.hold_tenant_writes()
        existing = ApiKeyRead.model_validate(await self._load(key_id, for_update=True))
        current = api_key_etag(existing)
        require_preconditions(
            if_match,
            if_none_match,
            current,
            changed="The API key changed since you read it; read it again and retry.",
            unchanged="The API key exists in the state If-None-Match names; nothing changed.",
        )
        key = await self._repository.revoke(key_id)
        if key is None:
            return existing
        await self._audit.record("api_key.revoke", target_type="api_key", target_id=str(key_id))
        return ApiKeyRead.model_validate(key)

    async def _load(self, key_id: uuid.UUID, *, for_update: bool = False) -> ApiKey:
        key = await self._repository.get(key_id, for_update=for_update)
        if key is None:
            raise NotFound(f"No API key {key_id} in this tenant.")
        return key


async def authenticate_api_key(repository: ApiKeyRepository, parsed: ParsedApiKey) -> ApiKey | None:
    """The live key matching `parsed`, or None (unknown, wrong secret, revoked or expired)."""
    key = await repository.get(parsed.key_id)
    if key is None or not secret_matches(parsed.secret, key.secret_hash):
        return None
    if key.revoked_at is not None:
        return None
    if key.expires_at is not None and key.expires_at <= datetime.now(UTC):
        return None
    await repository.mark_used(key.id)
    return key
