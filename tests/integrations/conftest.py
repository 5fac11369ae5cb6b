"""One live server (uvicorn on loopback, as `mneme serve` runs it) for the integration tests:
the MCP SDK's client and the LangGraph store talk to it over real HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from benchmarks.server import RunningServer, loopback_server
from service.config import Settings


@pytest.fixture(scope="session")
async def live_server(settings: Settings) -> AsyncIterator[RunningServer]:
    async with loopback_server(settings) as server:
        yield server
