"""A start that cannot succeed as configured says why in one line.

`StartRefused` is raised for what an operator fixes in the configuration or the environment: a
database that cannot be reached, a server too old for the service, a runtime role that could
bypass row-level security. Its message says what is wrong and what to change.
`RefusedStartMiddleware` reports it to the ASGI server as that message alone. Starlette reports a
failed start with the whole traceback, which through the app's nested lifespans (one per
router) runs to a hundred lines and more before the message. Any other failure keeps its
traceback: that is a defect, and the traceback is what a developer reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

STARTUP_FAILED = "lifespan.startup.failed"


class StartRefused(RuntimeError):
    """The service cannot start as configured; the message says why and what to change."""


class RefusedStartMiddleware:
    """Reports a start refused with `StartRefused` as its message; passes everything else
    through unchanged (for a request, one comparison)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        # The failed start's report is sent after the app has raised, when it is known what
        # failed: Starlette sends it (with the traceback) before it raises.
        held: list[Message] = []

        async def hold_start_failure(message: Message) -> None:
            if message["type"] == STARTUP_FAILED:
                held.append(message)
                return
            await send(message)

        try:
            await self.app(scope, receive, hold_start_failure)
        except StartRefused as refusal:
            if held:
                held[:] = [{"type": STARTUP_FAILED, "message": f"mneme cannot start: {refusal}"}]
            raise
        finally:
            for message in held:
                await send(message)
