"""Wiring of the accounts domain: its service per unit of work, and the per-transaction hooks."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from sqlalchemy.ext.asyncio import AsyncSession

from service.accounts.repository import AccountRepository, end_user_current_sql
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


class EndUserRecord:
    """Each end-user request records the account details its token carries (the overlay). The
    common request changes nothing: whether the row already says it is asked in the query of
    the transaction's BEGIN, no round trip of its own (a `TransactionHook`)."""

    def with_begin(self, principal: Principal) -> str | None:
        if principal.account is None:
            return None
        return end_user_current_sql(principal.tenant_id, principal.subject, principal.account)

    async def __call__(
        self, session: AsyncSession, principal: Principal, begun: str | None
    ) -> None:
        if principal.account is None:
            return
        await AccountRepository(session, principal.tenant_id).touch_end_user(
            principal.subject,
            principal.account,
            current=None if begun is None else begun == "SELECT 1",
        )


async def hold_tenant_writes(session: AsyncSession, tenant_id: str) -> None:
    await AccountRepository(session, tenant_id).hold_tenant_writes()
