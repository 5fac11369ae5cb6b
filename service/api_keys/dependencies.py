"""Wiring of the API-keys domain: its service per request (admins only)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from service.accounts.dependencies import AccountSvc
from service.api_keys.repository import ApiKeyRepository
from service.api_keys.service import ApiKeyService
from service.audit.service import AuditTrail
from service.dependencies import AdminPrincipal, Session


async def get_api_key_service(
    session: Session, principal: AdminPrincipal, accounts: AccountSvc
) -> ApiKeyService:
    return ApiKeyService(
        ApiKeyRepository(session, principal.tenant_id),
        accounts,
        AuditTrail(session, principal),
        principal,
    )


ApiKeySvc = Annotated[ApiKeyService, Depends(get_api_key_service)]
