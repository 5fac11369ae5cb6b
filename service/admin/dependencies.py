"""The admin domain's injectables."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from service.admin.repository import AdminRepository
from service.admin.service import AdminService, UserLifecycle
from service.audit.service import AuditTrail
from service.dependencies import AdminPrincipal, CurrentPrincipal, Session, State


async def get_admin_service(
    session: Session, principal: AdminPrincipal, state: State
) -> AdminService:
    return AdminService(
        AdminRepository(session, principal.tenant_id),
        AuditTrail(session, principal),
        principal.tenant_id,
        profile_max_bytes=state.settings.profile_max_bytes,
    )


AdminSvc = Annotated[AdminService, Depends(get_admin_service)]


async def get_user_lifecycle(state: State, principal: CurrentPrincipal) -> UserLifecycle:
    # Runs its own transactions (see service.admin.service), so it takes no request Session.
    return UserLifecycle(state.sessionmaker, principal)


Lifecycle = Annotated[UserLifecycle, Depends(get_user_lifecycle)]
