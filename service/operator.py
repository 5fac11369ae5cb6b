"""The operator at a terminal: who the `mneme admin` commands act as, and their connection.

The commands connect as the runtime role, like the service itself, so every statement they
run is held to the tenant's row-level security; and they act as an admin of that one tenant,
named `cli:<login name>` in the audit trail, so the trail tells an operator's purge or import
from an admin's request.
"""

from __future__ import annotations

import getpass
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from service.auth.principal import Principal
from service.config import Settings, get_settings
from service.db import create_sessionmaker, open_command_engine

OPERATOR_PREFIX = "cli:"


def operator_principal(tenant_id: str) -> Principal:
    """The operator running the command, as an admin of `tenant_id`."""
    return Principal(
        tenant_id=tenant_id,
        subject=f"{OPERATOR_PREFIX}{getpass.getuser()}",
        kind="service",
        credential="api_key",
        is_admin=True,
    )


@dataclass(frozen=True, slots=True)
class OperatorConnection:
    """What a command needs to open its tenant-scoped transactions."""

    settings: Settings
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    operator: Principal


@asynccontextmanager
async def operator_connection(tenant_id: str) -> AsyncIterator[OperatorConnection]:
    """A one-connection pool to the configured database (the embedded one started if none is
    configured), as the runtime role, closed when the block ends."""
    settings = get_settings()
    target, engine = await open_command_engine(settings, as_owner=False)
    try:
        yield OperatorConnection(
            settings, engine, create_sessionmaker(engine), operator_principal(tenant_id)
        )
    finally:
        await engine.dispose()
        target.close()
