"""`mneme mcp-stdio` holds tool arguments to the input rules the HTTP endpoint applies: over
stdio no middleware reads the message first, so a value no column can hold (a NUL character)
must come back as the tool's error, not reach the database as a failed statement."""

from __future__ import annotations

import sys
from pathlib import Path

from httpx import AsyncClient
from mcp import Client, StdioServerParameters

from benchmarks.server import settings_environment
from service.auth.tokens import mint_dev_token
from service.config import Settings
from tests.conftest import bearer


async def test_arguments_no_column_can_hold_are_a_tool_error_over_stdio(
    client: AsyncClient, settings: Settings, tenant: str, tmp_path: Path
) -> None:
    token = mint_dev_token(settings, tenant_id=tenant, user_id="nell")
    command = StdioServerParameters(
        command=sys.executable,
        args=["-m", "service", "mcp-stdio"],
        env={**settings_environment(settings), "MNEME_MCP_TOKEN": token},
        cwd=str(Path(__file__).parents[2]),
    )
    async with Client(command, read_timeout_seconds=120) as stdio:
        written = await stdio.call_tool("remember", {"text": "Nell rows\x00 on Mondays."})
        searched = await stdio.call_tool("recall", {"query": "when\x00 does Nell row?"})

    for result, argument in ((written, "text"), (searched, "query")):
        assert result.is_error
        problem = result.structured_content
        assert problem is not None
        assert problem["code"] == "VALIDATION_FAILED"
        assert problem["errors"][0]["loc"] == ["arguments", argument]
        assert problem["errors"][0]["type"] == "nul_character"
    listed = await client.get("/v1/users/me/memories", headers=bearer(settings, tenant, "nell"))
    assert listed.json()["items"] == []
