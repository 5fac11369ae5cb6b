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
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
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
from tests.conftest import bearer, new_tenant
from tests.fuzz.hostile import import_bodies
from tests.fuzz.tally import counting_session

pytestmark = pytest.mark.fuzz

MAX_EXAMPLES = int(os.environ.get("MNEME_FUZZ_EXAMPLES", "15"))
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


# Import bodies shaped like an export (a header, then typed records holding hostile values), so
# that generated cases reach the line checks instead of all failing on the first line.
schemathesis.openapi.media_type(
    "application/x-ndjson", import_bodies(st.sampled_from(["me", "ada", "ada\n"]))
)


@schemathesis.serializer("application/x-ndjson")
def _ndjson(_context: Any, value: Any) -> bytes:
    """The import body is NDJSON text; the document describes it as a binary string."""
    if isinstance(value, bytes):
        return value
    return str(value).encode("utf-8", "surrogatepass")


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
        case.call_and_validate(base_url=base_url, session=session, headers=headers, checks=CHECKS)

    with counting_session() as session:
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
