"""The admin domain's injectables."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from service.admin.service import AdminService, UserLifecycle
from service.dependencies import AdminPrincipal, CurrentPrincipal, State, UnitOfWork
from service.services import Services


def admin_service(services: Services) -> AdminService:
    return AdminService.acting_as(
        services.session,
        services.principal,
        profile_max_bytes=services.state.settings.profile_max_bytes,
        vector_columns=services.state.vector_columns,
    )


async def get_admin_service(services: UnitOfWork, _admin: AdminPrincipal) -> AdminService:
    return services.get(admin_service)


AdminSvc = Annotated[AdminService, Depends(get_admin_service)]


async def get_user_lifecycle(state: State, principal: CurrentPrincipal) -> UserLifecycle:
    # Runs its own transactions (see service.admin.service), so it takes no request Session.
    owner_indexes = state.owner_indexes
    return UserLifecycle(
        state.sessionmaker,
        principal,
        on_purged=owner_indexes.refresh_soon if owner_indexes is not None else None,
    )


Lifecycle = Annotated[UserLifecycle, Depends(get_user_lifecycle)]
