"""The service refuses to serve a database it cannot serve at all or safely: a PostgreSQL older
than 16 (its search statement needs `any_value()`), or a runtime role that could bypass
row-level security."""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from service.db import PrivilegedRuntimeRole, assert_database_can_serve, unsupported_server


async def test_the_runtime_role_on_the_tests_server_can_serve(runtime_engine: AsyncEngine) -> None:
    await assert_database_can_serve(runtime_engine)


async def test_a_role_that_bypasses_row_level_security_is_refused(
    owner_engine: AsyncEngine,
) -> None:
    # The owner role has BYPASSRLS and owns the tables.
    with pytest.raises(PrivilegedRuntimeRole, match="BYPASSRLS"):
        await assert_database_can_serve(owner_engine)


def test_a_server_older_than_postgresql_16_is_refused_with_what_it_runs() -> None:
    assert unsupported_server(180003, "18.3") is None
    assert unsupported_server(160000, "16.0") is None
    problem = unsupported_server(150020, "15.20 (Debian 15.20-0+deb12u1)")
    assert problem is not None
    assert "PostgreSQL 15.20 (Debian 15.20-0+deb12u1)" in problem
    assert "PostgreSQL 16 or later" in problem
