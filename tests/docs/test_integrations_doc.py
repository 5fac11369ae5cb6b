"""The snippets of docs/integrations.md, run as written against a live server."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from httpx import AsyncClient
from mcp import Client, StdioServerParameters

from benchmarks.server import RunningServer, settings_environment
from service.auth.tokens import mint_dev_token
from service.config import Settings
from tests.conftest import bearer
from tests.docs.snippets import snippets

DOCUMENT = "docs/integrations.md"


def blocks(language: str) -> list[str]:
    return [snippet.code for snippet in snippets(DOCUMENT, language)]


async def run_snippet(code: str, environment: dict[str, str]) -> str:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        code,
        env={**os.environ, **environment},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 300)
    assert process.returncode == 0, stderr.decode()[-2000:]
    return stdout.decode()


async def test_the_python_mcp_client_snippet_runs(
    live_server: RunningServer, settings: Settings, tenant: str
) -> None:
    [mcp_snippet, _] = blocks("python")
    token = mint_dev_token(settings, tenant_id=tenant, user_id="ines")
    environment = {"MNEME_URL": live_server.base_url, "MNEME_TOKEN": token}
    output = await run_snippet(mcp_snippet, environment)
    assert "French" in output


async def test_the_langgraph_swap_snippet_runs(
    live_server: RunningServer, settings: Settings, tenant: str
) -> None:
    [_, langgraph_snippet] = blocks("python")
    token = mint_dev_token(settings, tenant_id=tenant, user_id="jon")
    output = await run_snippet(
        langgraph_snippet, {"MNEME_URL": live_server.base_url, "MNEME_TOKEN": token}
    )
    assert output.strip() == "Prefers answers in French."


def test_the_http_client_config_names_the_endpoint_and_the_bearer_header() -> None:
    [http_config, _] = [json.loads(block) for block in blocks("json")]
    server = http_config["mcpServers"]["mneme"]
    assert server["type"] == "http" and server["url"].endswith("/mcp")
    assert server["headers"] == {"Authorization": "Bearer <token>"}


async def test_the_claude_desktop_config_starts_mcp_stdio_for_the_token_user(
    client: AsyncClient, settings: Settings, tenant: str, tmp_path: Path
) -> None:
    [_, desktop_config] = [json.loads(block) for block in blocks("json")]
    server: dict[str, Any] = desktop_config["mcpServers"]["mneme"]
    assert set(server["env"]) == {
        "MNEME_MCP_TOKEN",
        "MNEME_DATABASE_URL",
        "MNEME_JWT_HS256_SECRET",
    }
    token = mint_dev_token(settings, tenant_id=tenant, user_id="gus")
    # The config's values for this test deployment; the command from this virtualenv.
    environment = {**settings_environment(settings), "MNEME_MCP_TOKEN": token}
    command = StdioServerParameters(
        command=str(Path(sys.executable).parent / server["command"]),
        args=server["args"],
        env=environment,
        cwd=str(tmp_path),
    )
    async with Client(command, read_timeout_seconds=120) as stdio:
        written = await stdio.call_tool("remember", {"text": "Gus sails on Sundays."})
        hits = await stdio.call_tool("recall", {"query": "when does Gus sail?"})
    assert written.structured_content is not None and hits.structured_content is not None
    assert [h["id"] for h in hits.structured_content["hits"]] == [written.structured_content["id"]]
    # Written for the token's user, as the REST API sees it.
    listed = await client.get("/v1/users/me/memories", headers=bearer(settings, tenant, "gus"))
    assert [m["id"] for m in listed.json()["items"]] == [written.structured_content["id"]]
