"""Wiring of the profile domain: its service per request."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from sqlalchemy.ext.asyncio import AsyncSession

from service.accounts.dependencies import build_account_service
from service.audit.service import AuditTrail
from service.auth.principal import Principal
from service.config import Settings
from service.dependencies import CurrentPrincipal, Session, State
from service.profile.repository import ProfileRepository
from service.profile.service import ProfileService


def build_profile_service(
    session: AsyncSession, principal: Principal, settings: Settings
) -> ProfileService:
    return ProfileService(
        ProfileRepository(session, principal.tenant_id),
        build_account_service(session, principal),
        AuditTrail(session, principal),
        settings,
        principal,
    )


async def get_profile_service(
    session: Session, principal: CurrentPrincipal, state: State
) -> ProfileService:
    return build_profile_service(session, principal, state.settings)


ProfileSvc = Annotated[ProfileService, Depends(get_profile_service)]
