"""SQL for API keys; runs inside the tenant-scoped transaction."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import func, text

from service.api_keys.models import ApiKey
from service.kit.repository import TenantRowRepository

MARK_KEY_USED_SQL = text(
    """
    UPDATE api_key SET last_used_at = now()
     WHERE tenant_id = :tenant_id AND id = :key_id
       AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')
    """
)
"""Record use at most once a minute per key, so authentication is not a write per request."""


class ApiKeyRepository(TenantRowRepository[ApiKey, uuid.UUID]):
    model = ApiKey

    async def add(self, key: ApiKey) -> ApiKey:
        self._session.add(key)
        await self._session.flush()
        await self._session.refresh(key)
        return key

    async def get(self, key_id: uuid.UUID, *, for_update: bool = False) -> ApiKey | None:
        """The key; with `for_update`, locked until the transaction ends (as it is now, not as
        an earlier statement of this request loaded it)."""
        return await self.get_by_id(key_id, for_update=for_update)

    async def list_page(
        self, *, after: tuple[datetime, uuid.UUID] | None, limit: int, include_revoked: bool
    ) -> list[ApiKey]:
        statement = self.scoped()
        if not include_revoked:
            statement = statement.where(ApiKey.revoked_at.is_(None))
        if after is not None:
            created_at, key_id = after
            statement = statement.where(
                func.row(ApiKey.created_at, ApiKey.id) < func.row(created_at, key_id)
            )
        statement = statement.order_by(ApiKey.created_at.desc(), ApiKey.id.desc()).limit(limit)
        return list((await self._session.execute(statement)).scalars())

    async def revoke(self, key_id: uuid.UUID) -> ApiKey | None:
        """Revoke the key unless it already is; the key as revoked, or None."""
        return await self.update_if(key_id, {"revoked_at": func.now()}, ApiKey.revoked_at.is_(None))

    async def mark_used(self, key_id: uuid.UUID) -> None:
        await self._session.execute(
            MARK_KEY_USED_SQL, {"tenant_id": self._tenant_id, "key_id": key_id}
        )
