"""How MCP answers what it refuses (every refusal goes through here): a tool call the tool
refuses is a tool result with `isError: true` whose text and structured content are the
problem document the REST API would answer.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.types import CallToolResult, TextContent
from pydantic import ValidationError

from service.errors import PROBLEM_TYPE_BASE, DomainError, ValidationFailed, invalid_input


def problem_document(error: DomainError) -> dict[str, Any]:
    """The RFC 9457 body the REST API would answer with, minus what only HTTP has."""
    body: dict[str, Any] = {
        "type": PROBLEM_TYPE_BASE + error.code.lower().replace("_", "-"),
        "title": error.title,
        "status": error.status,
        "detail": error.detail,
        "code": error.code,
    }
    body.update({k: v for k, v in error.extensions.items() if k not in body})
    return body


def invalid_arguments(exc: ValidationError, location: str = "arguments") -> ValidationFailed:
    """A pydantic failure as the same problem the REST API answers (`VALIDATION_FAILED`, or
    `SECRET_REFUSED` when the secret policy refused a value)."""
    errors = [
        {
            "loc": [location, *(str(p) if not isinstance(p, int) else p for p in err["loc"])],
            "msg": str(err.get("msg", "")),
            "type": str(err.get("type", "")),
        }
        for err in exc.errors()
    ]
    return invalid_input(f"{len(errors)} invalid argument(s); see `errors`.", errors)


def problem_result(error: DomainError) -> CallToolResult:
    """A tool error the model can read and act on: the problem as text and as structure."""
    problem = problem_document(error)
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(problem, default=str))],
        structured_content=problem,
        is_error=True,
    )
