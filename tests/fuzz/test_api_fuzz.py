"""Property-based fuzzing of every operation from the OpenAPI document (schemathesis).

The real service runs under uvicorn in a child process, on the test database, and every
operation is called with generated valid and invalid input under three credentials: an end
user, an admin and an API key. Every response must be a non-5xx, with a status code, content
type and body the document declares. Hypothesis runs derandomized (a fixed seed) with a bounded
number of examples, so a run is repeatable and fits a small CI machine.

Run with `pytest -m fuzz` (deselected by the default `pytest`).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from service.config import Settings
from tests.conftest import TEST_SECRET, bearer, new_tenant

pytestmark = pytest.mark.fuzz

MAX_EXAMPLES = int(os.environ.get("MNEME_FUZZ_EXAMPLES", "15"))
STARTUP_DEADLINE_SECONDS = 120
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _ready(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/readyz", timeout=2) as response:  # noqa: S310
            return bool(response.status == 200)
    except OSError:
        return False


@pytest.fixture(scope="module")
def fuzz_base_url(settings: Settings) -> Iterator[str]:
    assert settings.database_url is not None and settings.migration_database_url is not None
    port = _free_port()
    env = {
        **os.environ,
        "MNEME_DATABASE_URL": settings.database_url.get_secret_value(),
        "MNEME_MIGRATION_DATABASE_URL": settings.migration_database_url.get_secret_value(),
        "MNEME_MIGRATE_ON_START": "false",
        "MNEME_JOBS_ENABLED": "false",
        "MNEME_JWT_HS256_SECRET": TEST_SECRET,
        "MNEME_RATE_LIMIT_ENABLED": "false",
        "MNEME_AUTH_FAILURE_LIMIT": "1000000/minute",
        "MNEME_LOG_LEVEL": "warning",
    }
    server = subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "service", "serve", "--port", str(port)], env=env
    )
    base_url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + STARTUP_DEADLINE_SECONDS
    while not _ready(base_url):
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            pytest.fail("the service did not start")
        time.sleep(0.2)
    yield base_url
    server.terminate()
    server.wait(timeout=30)


@pytest.fixture(scope="module")
def fuzz_schema(fuzz_base_url: str) -> Any:
    return schemathesis.openapi.from_url(f"{fuzz_base_url}/openapi.json")


@pytest.fixture(scope="module")
def identities(fuzz_base_url: str, settings: Settings) -> dict[str, dict[str, str]]:
    tenant = new_tenant()
    admin = bearer(settings, tenant, "root", admin=True)
    created = requests.post(
        f"{fuzz_base_url}/v1/admin/api-keys", json={"name": "fuzz"}, headers=admin, timeout=10
    )
    assert created.status_code == 201, created.text
    return {
        "user": bearer(settings, tenant, "ada"),
        "admin": admin,
        "api_key": {"Authorization": f"Bearer {created.json()['key']}"},
    }


def _fuzz_operation(
    operation: Any, mode: GenerationMode, headers: dict[str, str], base_url: str, *, as_me: bool
) -> None:
    pinned = {"user_id": "me"} if as_me and "{user_id}" in operation.path else None

    @given(case=operation.as_strategy(generation_mode=mode, path_parameters=pinned))
    @settings(
        max_examples=MAX_EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def run(case: Any) -> None:
        case.call_and_validate(base_url=base_url, headers=headers, checks=CHECKS)

    run()


@pytest.mark.parametrize("identity", ["user", "admin", "api_key"])
def test_every_operation_keeps_its_contract(
    identity: str, fuzz_schema: Any, identities: dict[str, dict[str, str]], fuzz_base_url: str
) -> None:
    failures: list[str] = []
    operations = [result.ok() for result in fuzz_schema.get_all_operations()]
    assert len(operations) > 40
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            try:
                # An end user may address only itself: generated user ids would all be 404s.
                _fuzz_operation(
                    operation,
                    mode,
                    identities[identity],
                    fuzz_base_url,
                    as_me=identity != "api_key",
                )
            except Unsatisfiable:
                # Nothing can be invalid about an operation without parameters or a body.
                assert mode is GenerationMode.NEGATIVE, operation.label
            except Exception as failure:  # every operation is tried, then all are reported
                failures.append(f"{operation.label} [{mode.value}]: {failure}")
    assert not failures, "\n\n".join(failures)
