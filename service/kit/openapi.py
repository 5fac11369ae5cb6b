"""Problems every operation can answer, declared once for the whole OpenAPI document.

Some refusals happen before a route's own code runs, in middleware or shared dependencies:
an unusable URL or JSON body (422), a body over the size limit (413), a missing or bad
credential (401), a rate limit (429), a database outage (503). Declaring them on each route by
hand would be repeated everywhere and forgotten on the next route, so they are added to every
operation of the generated document here.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from fastapi import FastAPI

from service.errors import PROBLEM_CONTENT_TYPE


def _problem(status: int) -> dict[str, Any]:
    return {
        "description": HTTPStatus(status).phrase,
        "content": {PROBLEM_CONTENT_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
    }


def _common_statuses(path: str, operation: dict[str, Any]) -> list[int]:
    statuses = [422]  # the input guard checks every URL
    if "requestBody" in operation:
        statuses.append(413)
    if path.startswith("/v1/"):
        statuses += [401, 429, 503]
    return statuses


def declare_common_problems(app: FastAPI) -> None:
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        document = generate()
        for path, operations in document.get("paths", {}).items():
            for operation in operations.values():
                responses = operation.setdefault("responses", {})
                for status in _common_statuses(path, operation):
                    responses.setdefault(str(status), _problem(status))
        return document

    app.openapi = openapi  # type: ignore[method-assign]
