"""An app with the profile routers mounted, and ways to look at what the database holds."""

from __future__ import annotations

from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.conftest import as_tenant


async def stored_profile(
    engine: AsyncEngine, tenant: str, user_id: str | None
) -> tuple[dict[str, Any], int] | None:
    """The stored document and version of a user's (or, for None, the org's) profile row."""
    async with engine.begin() as connection:
        await as_tenant(connection, tenant)
        row = (
            await connection.execute(
                text(
                    "SELECT document, version FROM profile "
                    "WHERE (CAST(:u AS text) IS NULL AND scope = 'org') OR user_id = :u"
                ),
                {"u": user_id},
            )
        ).one_or_none()
    return None if row is None else (row.document, row.version)


async def audit_entries(engine: AsyncEngine, tenant: str, prefix: str) -> list[dict[str, Any]]:
    """Audit rows of the tenant whose action starts with `prefix`, oldest first."""
    async with engine.begin() as connection:
        await as_tenant(connection, tenant)
        rows = (
            await connection.execute(
                text(
                    "SELECT action, actor_id, target_id, detail FROM audit_log "
                    "WHERE action LIKE :prefix ORDER BY created_at"
                ),
                {"prefix": prefix + "%"},
            )
        ).all()
    return [dict(row._mapping) for row in rows]


async def account_row_text(engine: AsyncEngine, tenant: str, user_id: str) -> str:
    """The whole user_account row as JSON text, to search for anything that must not be there."""
    async with engine.begin() as connection:
        await as_tenant(connection, tenant)
        value = (
            await connection.execute(
                text("SELECT row_to_json(u)::text FROM user_account u WHERE u.id = :u"),
                {"u": user_id},
            )
        ).scalar_one_or_none()
    return value or ""
