"""The stdio transport of `mneme mcp-stdio`: the SDK's, with each line checked before the SDK
reads it.

A line is held to what the HTTP endpoint holds a body to, and to being one JSON-RPC message
(`service.mcp.errors.stdio_refusal`); what that refuses is answered as over HTTP: a tool call
whose arguments break the input rules is that call's tool error, anything else a JSON-RPC
error (`-32700` for text that is not JSON). The SDK's transport drops a line it cannot read
without an answer, which would leave a client waiting for its id until its own timeout.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterable, AsyncIterator
from typing import TYPE_CHECKING, cast

import anyio
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import jsonrpc_message_adapter

from service.mcp.errors import stdio_refusal

if TYPE_CHECKING:
    from mcp.shared._stream_protocols import WriteStream

    from service.mcp.server import McpServer


async def serve_stdio(server: McpServer) -> None:
    """Serve MCP on stdin and stdout until stdin ends, as `server.run_stdio_async()` does,
    with each line checked first."""
    checked = CheckedLines(_stdin_lines())
    # The transport only iterates its input, for its lines of text.
    transport = stdio_server(stdin=cast("anyio.AsyncFile[str]", checked))
    async with transport as (read_stream, write_stream):
        checked.answer_on(write_stream)
        await server.serve(read_stream, write_stream)


async def _stdin_lines() -> AsyncIterator[bytes]:
    """stdin's lines as they arrive, as bytes, each read in a worker thread (as the SDK's)."""
    async for line in anyio.wrap_file(sys.stdin.buffer):
        yield line


class CheckedLines:
    """The input of the SDK's stdio transport: `lines` that pass `stdio_refusal`, as text.
    A refused line is answered here, on the transport's write stream, before the next line is
    read; a blank line holds no message and is skipped."""

    def __init__(self, lines: AsyncIterable[bytes]) -> None:
        self._lines = lines
        self._answers: WriteStream[SessionMessage] | None = None
        self._answering = anyio.Event()

    def answer_on(self, stream: WriteStream[SessionMessage]) -> None:
        """Answer refused lines on `stream`: the transport's, which exists once it runs (and
        it reads its first line before that)."""
        self._answers = stream
        self._answering.set()

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in self._lines:
            if not line.strip():
                continue
            answer = stdio_refusal(line)
            if answer is None:
                # `stdio_refusal` refuses text that is not UTF-8.
                yield line.decode()
                continue
            await self._answering.wait()
            assert self._answers is not None
            message = jsonrpc_message_adapter.validate_python(answer)
            await self._answers.send(SessionMessage(message))
