"""Wiring of the profile domain: its service per unit of work."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from service.accounts.dependencies import account_service
from service.audit.service import AuditTrail
from service.dependencies import provided
from service.profile.repository import ProfileRepository
from service.profile.service import ProfileService
from service.services import Services


def profile_service(services: Services) -> ProfileService:
    return ProfileService(
        ProfileRepository(services.session, services.tenant_id),
        services.get(account_service),
        AuditTrail(services.session, services.principal),
        services.state.settings,
        services.principal,
    )


ProfileSvc = Annotated[ProfileService, Depends(provided(profile_service))]
