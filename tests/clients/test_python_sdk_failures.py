"""Failed answers the generated models were not made for still raise the `mneme` layer's typed
exceptions: a gateway's HTML error page in front of the service, and a problem code added to the
API after the client was generated (a live server answers neither on cue, so a loopback
stand-in of the gateway and of a newer service answers them)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from mneme import (
    Mneme,
    MnemeError,
    NotFound,
    RetryPolicy,
    ServerError,
    ValidationFailed,
    connect,
    unwrap,
)
from mneme.errors import error_from_response
from mneme_client.api.memories import get_memory
from mneme_client.models import ProblemCode
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from tests.fixtures.loopback import free_port, serving

# Not a code of this client's `ProblemCode`: what a service newer than the client may answer.
NEW_CODE = "QUOTA_EXHAUSTED"
GATEWAY_PAGE = "<html><body><h1>502 Bad Gateway</h1></body></html>"


async def gateway_page(request: Request) -> Response:
    return HTMLResponse(GATEWAY_PAGE, status_code=502)


async def newer_problem(request: Request) -> Response:
    problem = {
        "type": "https://mneme.dev/problems/quota-exhausted",
        "title": "Quota exhausted",
        "status": 404,
        "detail": "This tenant used its memories for the month.",
        "instance": request.url.path,
        "code": NEW_CODE,
        "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
    }
    return JSONResponse(problem, status_code=404, media_type="application/problem+json")


@pytest.fixture(scope="module")
def gateway() -> Iterator[str]:
    routes = [
        Route("/gateway/v1/users/me/context", gateway_page, methods=["POST"]),
        Route("/gateway/v1/users/me/memories/{memory_id}", gateway_page),
        Route("/newer/v1/users/me/context", newer_problem, methods=["POST"]),
        Route("/newer/v1/users/me/memories/{memory_id}", newer_problem),
    ]
    with serving(Starlette(routes=routes), free_port()) as base_url:
        yield base_url


def test_the_stand_in_code_is_unknown_to_the_generated_client() -> None:
    assert NEW_CODE not in {code.value for code in ProblemCode}


async def test_a_gateway_error_page_is_a_server_error(gateway: str) -> None:
    async with Mneme(f"{gateway}/gateway", "token", retry=RetryPolicy(attempts=1)) as mneme:
        with pytest.raises(ServerError) as failed:
            await mneme.context("Which seat should I book?")
    assert (failed.value.status, failed.value.code) == (502, "HTTP_502")
    assert failed.value.detail == GATEWAY_PAGE
    assert failed.value.problem == {}


async def test_a_problem_code_newer_than_the_client_keeps_its_code(gateway: str) -> None:
    async with Mneme(f"{gateway}/newer", "token") as mneme:
        with pytest.raises(NotFound) as refused:
            await mneme.context("Which seat should I book?")
    assert (refused.value.status, refused.value.code) == (404, NEW_CODE)
    assert refused.value.detail == "This tenant used its memories for the month."
    assert refused.value.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.mark.parametrize(
    ("prefix", "raised", "code"),
    [("gateway", ServerError, "HTTP_502"), ("newer", NotFound, NEW_CODE)],
)
def test_the_synchronous_generated_functions_raise_them_too(
    gateway: str, prefix: str, raised: type[MnemeError], code: str
) -> None:
    client = connect(f"{gateway}/{prefix}", "token", retry=RetryPolicy(attempts=1))
    with client, pytest.raises(raised) as failed:
        unwrap(get_memory.sync_detailed("me", uuid.uuid4(), client=client))
    assert failed.value.code == code


@pytest.mark.parametrize(
    ("status", "code", "raised"),
    [
        (405, "METHOD_NOT_ALLOWED", MnemeError),
        (408, "REQUEST_TIMEOUT", MnemeError),
        (415, "UNSUPPORTED_MEDIA_TYPE", ValidationFailed),
        (422, "VALIDATION_FAILED", ValidationFailed),
        (431, "REQUEST_HEADER_FIELDS_TOO_LARGE", ValidationFailed),
    ],
)
def test_a_status_no_class_stands_for_is_a_mneme_error_not_a_validation_failure(
    status: int, code: str, raised: type[MnemeError]
) -> None:
    problem = json.dumps({"status": status, "code": code, "title": code, "detail": code})
    error = error_from_response(status, {}, problem.encode())
    assert (type(error), error.status, error.code) == (raised, status, code)
