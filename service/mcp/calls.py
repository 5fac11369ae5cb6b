"""One MCP tool call = one unit of work (`service.services`): a tenant-scoped transaction with
the domain services built on it.

A call acts as a `McpCaller`: the principal its credential authenticated and the one user it
addresses, both fixed before any tool runs (by the HTTP endpoint, or by `mneme mcp-stdio` at
start-up). Tool arguments never name a tenant or a user, so nothing a client sends widens access.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel

from service.auth.owner import Owner
from service.auth.principal import Principal
from service.context.dependencies import context_builder
from service.context.service import ContextBuilder
from service.errors import Unauthenticated
from service.memories.dependencies import memory_search, memory_service
from service.memories.search import MemorySearch
from service.memories.service import MemoryService
from service.profile.dependencies import profile_service
from service.profile.service import ProfileService
from service.services import Services, unit_of_work
from service.state import AppState

CALLER_STATE_KEY = "mneme_mcp_caller"
"""Where the HTTP endpoint leaves the authenticated caller on the request's state."""


@dataclass(frozen=True)
class McpCaller:
    """Who an MCP connection acts as, and for which user of its tenant."""

    state: AppState
    principal: Principal
    owner: Owner

    @property
    def user_id(self) -> str:
        assert self.owner.user_id is not None  # an MCP caller always addresses one user
        return self.owner.user_id


CallerResolver = Callable[[Context[Any]], McpCaller]
"""Finds the caller of the tool call or resource read in progress."""


def caller_from_request(ctx: Context[Any]) -> McpCaller:
    """The caller the HTTP endpoint authenticated for this request."""
    request = ctx.request_context.request
    caller = getattr(getattr(request, "state", None), CALLER_STATE_KEY, None)
    if not isinstance(caller, McpCaller):
        # Only reachable if the MCP app were served without `McpEndpoint` in front of it.
        raise Unauthenticated("This MCP request carries no authenticated caller.")
    return caller


@dataclass
class McpCall:
    """One call's unit of work, with the services its tools use."""

    services: Services
    caller: McpCaller

    @property
    def owner(self) -> Owner:
        return self.caller.owner

    @property
    def memories(self) -> MemoryService:
        return self.services.get(memory_service)

    @property
    def search(self) -> MemorySearch:
        return self.services.get(memory_search)

    @property
    def profiles(self) -> ProfileService:
        return self.services.get(profile_service)

    @property
    def context(self) -> ContextBuilder:
        return self.services.get(context_builder)


@asynccontextmanager
async def mcp_call(caller: McpCaller) -> AsyncIterator[McpCall]:
    """The call's one transaction: committed when the block ends, rolled back if it raises."""
    async with unit_of_work(caller.state, caller.principal) as services:
        yield McpCall(services, caller)


def success_result(body: BaseModel, text: str | None = None) -> CallToolResult:
    """A tool result: the model reads `text` (the JSON body unless given), clients the structure.

    Fields that are null are left out: each costs the model tokens and tells it nothing."""
    structured = body.model_dump(mode="json", by_alias=True, exclude_none=True)
    rendered = text if text is not None else json.dumps(structured, separators=(",", ":"))
    return CallToolResult(
        content=[TextContent(type="text", text=rendered)], structured_content=structured
    )
