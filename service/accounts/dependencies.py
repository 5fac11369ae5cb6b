"""Wiring of the accounts domain: its service per unit of work, and the per-transaction hooks."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from sqlalchemy.ext.asyncio import AsyncSession

from service.accounts.repository import AccountRepository
from service.accounts.service import AccountService
from service.audit.service import AuditTrail
from service.auth.principal import Principal
from service.dependencies import provided
from service.services import Services


def account_service(services: Services) -> AccountService:
    return AccountService(
        AccountRepository(services.session, services.tenant_id),
        audit=AuditTrail(services.session, services.principal),
        principal=services.principal,
    )


AccountSvc = Annotated[AccountService, Depends(provided(account_service))]


async def record_end_user(session: AsyncSession, principal: Principal) -> None:
    """Each end-user request records the account details its token carries (the overlay)."""
    if principal.account is not None:
        await AccountRepository(session, principal.tenant_id).touch_end_user(
            principal.subject, principal.account
        )


async def ensure_tenant(session: AsyncSession, tenant_id: str) -> None:
    await AccountRepository(session, tenant_id).ensure_tenant()
