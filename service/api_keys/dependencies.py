"""Wiring of the API-keys domain: its service per unit of work (admins only)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from service.accounts.dependencies import account_service
from service.api_keys.repository import ApiKeyRepository
from service.api_keys.service import ApiKeyService
from service.audit.service import AuditTrail
from service.dependencies import AdminPrincipal, UnitOfWork
from service.services import Services


def api_key_service(services: Services) -> ApiKeyService:
    return ApiKeyService(
        ApiKeyRepository(services.session, services.tenant_id),
        services.get(account_service),
        AuditTrail(services.session, services.principal),
        services.principal,
    )


async def get_api_key_service(services: UnitOfWork, _admin: AdminPrincipal) -> ApiKeyService:
    return services.get(api_key_service)


ApiKeySvc = Annotated[ApiKeyService, Depends(get_api_key_service)]
