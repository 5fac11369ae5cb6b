"""`mneme mcp-stdio` holds what it reads to the rules the HTTP endpoint applies: a value no
column can hold (a NUL character) comes back as the tool's error rather than reaching the
database as a failed statement; and a line the SDK cannot read (a lone surrogate in the
arguments, text that is not JSON) is answered as over HTTP, not dropped with its client left
waiting."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from httpx import AsyncClient
from mcp import Client, StdioServerParameters

from benchmarks.server import settings_environment
from service.auth.tokens import mint_dev_token
from service.config import Settings
from tests.conftest import bearer
from tests.integrations.test_mcp_errors import post_mcp, tool_call

ANSWER_GUARD_SECONDS = 120
"""How long a test waits for an answer before failing instead of hanging: a guard, not a
measure (the server starts, migrates and embeds well within it)."""


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


class StdioConnection:
    """`mneme mcp-stdio` spoken to line by line, to send what no SDK client sends."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        await self.process.stdin.drain()

    async def answers(self, ids: set[Any]) -> dict[Any, dict[str, Any]]:
        """The answers to the messages with these ids (None: JSON-RPC's null), as they come."""
        assert self.process.stdout is not None
        answers: dict[Any, dict[str, Any]] = {}
        while set(answers) != ids:
            line = await asyncio.wait_for(self.process.stdout.readline(), ANSWER_GUARD_SECONDS)
            assert line, f"mcp-stdio ended; answered only {sorted(map(str, answers))}"
            answer = json.loads(line)
            assert answer["id"] in ids - set(answers), answer
            answers[answer["id"]] = answer
        return answers


@asynccontextmanager
async def stdio_connection(settings: Settings, token: str) -> AsyncIterator[StdioConnection]:
    """A running `mneme mcp-stdio` for `token`, past the protocol's handshake."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "service",
        "mcp-stdio",
        env={**settings_environment(settings), "MNEME_MCP_TOKEN": token},
        cwd=str(Path(__file__).parents[2]),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    connection = StdioConnection(process)
    try:
        initialize = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"},
            },
        }
        await connection.send(json.dumps(initialize).encode())
        await connection.answers({0})
        await connection.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        yield connection
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), ANSWER_GUARD_SECONDS)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise


async def test_a_line_the_sdk_cannot_read_is_answered_as_over_http_and_stores_nothing(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    surrogate = tool_call("remember", '{"text": "Nell rows \\ud800 on Mondays."}')
    lines = {
        7: surrogate,
        None: b"{not json",
        8: b'{"jsonrpc": "2.0", "id": 8, "method": "tools/call", '
        b'"params": {"name": "remem\\u0000ber", "arguments": {"text": "x"}}}',
        9: b'{"jsonrpc": "2.0", "id": 9, "method": 5}',
        10: b'{"jsonrpc": "2.0", "id": 10, "method": "tools/call", '
        b'"params": {"name": "recall", "arguments": {"query": "rowing"}}}',
    }
    token = mint_dev_token(settings, tenant_id=tenant, user_id="nell")
    async with stdio_connection(settings, token) as stdio:
        for line in lines.values():
            await stdio.send(line)
        answers = await stdio.answers(set(lines))

    # The surrogate: the tool error `/mcp` answers, word for word.
    over_http = await post_mcp(client, bearer(settings, tenant, "nell"), surrogate)
    assert answers[7] == over_http.json()
    assert answers[7]["result"]["structuredContent"]["errors"][0]["type"] == "lone_surrogate"
    # Text that is not JSON: a parse error for no id, with the REST API's problem.
    not_json = answers[None]["error"]
    assert not_json["code"] == -32700
    assert not_json["message"].startswith("VALIDATION_FAILED: The text is not JSON")
    assert not_json["data"]["code"] == "VALIDATION_FAILED"
    assert not_json["data"]["errors"][0]["type"] == "json_invalid"
    # What `/mcp` refuses before the SDK reads it: an invalid request, answered by its id.
    for request_id, code, kind in (
        (8, "VALIDATION_FAILED", "nul_character"),
        (9, "BAD_REQUEST", None),
    ):
        error = answers[request_id]["error"]
        assert error["code"] == -32600
        assert error["message"].startswith(f"{code}: ")
        assert error["data"]["code"] == code
        if kind is not None:
            assert error["data"]["errors"][0]["type"] == kind
    # The connection serves on.
    assert answers[10]["result"]["isError"] is False
    listed = await client.get("/v1/users/me/memories", headers=bearer(settings, tenant, "nell"))
    assert listed.json()["items"] == []
