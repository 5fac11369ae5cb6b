"""The audit trail: services record administrative actions in the request's transaction."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from service.audit.models import AuditEntry
from service.auth.principal import Principal
from service.observability import current_request_id


class AuditTrail:
    def __init__(self, session: AsyncSession, principal: Principal) -> None:
        self._session = session
        self._principal = principal

    async def record(
        self,
        action: str,
        *,
        target_type: str,
        target_id: str | None,
        detail: dict[str, Any] | None = None,
    ) -> AuditEntry:
        entry = AuditEntry(
            tenant_id=self._principal.tenant_id,
            actor_kind=self._principal.kind,
            actor_id=self._principal.subject,
            action=action,
            target_type=target_type,
            target_id=target_id,
            detail=detail or {},
            request_id=current_request_id(),
        )
        self._session.add(entry)
        await self._session.flush()
        return entry
