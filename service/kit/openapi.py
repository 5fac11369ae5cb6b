"""Problems and response headers every operation can answer, declared once for the whole
OpenAPI document.

Some refusals happen before a route's own code runs, in middleware or shared dependencies:
an unusable URL or JSON body (422), a body over the size limit (413), a missing or bad
credential (401), a rate limit (429), a database outage (503). Some headers are added to
answers by middleware, whatever the route: the request id, the caller's quotas, how long to
wait before a retry, whether an answer is a replay. Declaring them on each route by hand would
be repeated everywhere and forgotten on the next route, so they are added to every operation of
the generated document here.
"""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from typing import Any, Final

from fastapi import FastAPI

from service.errors import PROBLEM_CONTENT_TYPE
from service.kit.idempotency import REPLAYED_HEADER

HEADERS_PREFIX: Final = "#/components/headers/"

READS_ONLY: Final = {"x-mneme-reads-only": True}
"""`openapi_extra` of a POST operation that changes nothing (a search, a context block): a
client may send it again after a failure as it would a GET (the clients' retries read it)."""

RESPONSE_HEADERS: Final[Mapping[str, dict[str, Any]]] = {
    "X-Request-Id": {
        "description": "The request's id: the caller's own `X-Request-ID` when it is 1-128 "
        "characters of `A-Za-z0-9._:-`, else a new one. Logs carry it; quote it when reporting "
        "a problem.",
        "schema": {"type": "string"},
    },
    "RateLimit-Policy": {
        "description": "The caller's quotas (IETF draft RateLimit header fields): per policy "
        '(`"principal"`, `"tenant"`), the quota `q` and its window `w` in seconds. On every '
        "answer to an authenticated request while the limits are on.",
        "schema": {"type": "string"},
        "example": '"principal";q=600;w=60, "tenant";q=6000;w=60',
    },
    "RateLimit": {
        "description": "What is left of each quota in `RateLimit-Policy`: remaining requests "
        "`r` and the seconds `t` until the window frees one.",
        "schema": {"type": "string"},
        "example": '"principal";r=599;t=60, "tenant";r=5999;t=60',
    },
    "Retry-After": {
        "description": "Seconds to wait before sending the request again.",
        "schema": {"type": "integer", "minimum": 1},
    },
    REPLAYED_HEADER: {
        "description": "`true` when this is the stored answer of an earlier request with the "
        "same `Idempotency-Key` (which was not applied again); absent otherwise.",
        "schema": {"type": "string", "enum": ["true"]},
    },
}
"""Headers that middleware and shared dependencies add, as OpenAPI header objects."""

CURRENT_ETAG_HEADER: Final = {
    "description": "The resource's current version, when it exists: read it again, or send "
    "this tag in `If-Match` to overwrite whatever it holds now.",
    "schema": {"type": "string"},
}

IDEMPOTENCY_HEADER: Final = "Idempotency-Key"


def _problem(status: int) -> dict[str, Any]:
    return {
        "description": HTTPStatus(status).phrase,
        "content": {PROBLEM_CONTENT_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
    }


def _takes_idempotency_key(operation: Mapping[str, Any]) -> bool:
    return any(
        parameter.get("in") == "header" and parameter.get("name") == IDEMPOTENCY_HEADER
        for parameter in operation.get("parameters", ())
    )


def _common_statuses(path: str, operation: dict[str, Any]) -> list[int]:
    statuses = [422]  # the input guard checks every URL
    if "requestBody" in operation:
        statuses.append(413)
    if path.startswith("/v1/"):
        statuses += [401, 429, 503]
    if _takes_idempotency_key(operation):
        statuses.append(409)  # the key reused for another request, or still in flight
    return statuses


def _headers_of(path: str, operation: Mapping[str, Any], status: str) -> list[str]:
    """The middleware-added headers an answer with this status can carry."""
    names = ["X-Request-Id"]  # every answer
    # The quotas are charged once the caller is authenticated: never on a 401.
    if path.startswith("/v1/") and status != "401":
        names += ["RateLimit-Policy", "RateLimit"]
    idempotent = _takes_idempotency_key(operation)
    # A rate limit, an outage, an unavailable model; a request with the same key in flight.
    if status in {"429", "503"} or (status == "409" and idempotent):
        names.append("Retry-After")
    if status.startswith("2") and idempotent:
        names.append(REPLAYED_HEADER)
    return names


def declare_common_responses(app: FastAPI) -> None:
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        document = generate()
        document.setdefault("components", {})["headers"] = dict(RESPONSE_HEADERS)
        for path, operations in document.get("paths", {}).items():
            for operation in operations.values():
                responses = operation.setdefault("responses", {})
                for status in _common_statuses(path, operation):
                    responses.setdefault(str(status), _problem(status))
                for status, response in responses.items():
                    headers = response.setdefault("headers", {})
                    for name in _headers_of(path, operation, status):
                        headers.setdefault(name, {"$ref": HEADERS_PREFIX + name})
                    # A 412 carries the resource's current version, when it exists.
                    if status == "412":
                        headers.setdefault("ETag", dict(CURRENT_ETAG_HEADER))
        return document

    app.openapi = openapi  # type: ignore[method-assign]
