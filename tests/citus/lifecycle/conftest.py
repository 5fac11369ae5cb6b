"""The fixtures the admin tests take (`settings`, `app`, hence `client`, `owner_engine`,
`runtime_engine`), pointed at the Citus cluster instead of the embedded Postgres."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings


@pytest.fixture(scope="session")
def settings(citus_settings: Settings) -> Settings:
    return citus_settings


@pytest.fixture(scope="session")
def app(citus_app: FastAPI) -> FastAPI:
    return citus_app


@pytest.fixture(scope="session")
def owner_engine(citus_owner_engine: AsyncEngine) -> AsyncEngine:
    return citus_owner_engine


@pytest.fixture(scope="session")
def runtime_engine(citus_runtime_engine: AsyncEngine) -> AsyncEngine:
    return citus_runtime_engine
