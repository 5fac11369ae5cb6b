"""The committed OpenAPI document is the API: every change to it is a visible diff.

Regenerate after an intended API change with
`MNEME_WRITE_OPENAPI=1 pytest tests/api/test_openapi_document.py`, then review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from httpx import AsyncClient

DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"


def operations(spec: dict[str, Any]) -> list[tuple[str, str, str]]:
    return sorted(
        (method.upper(), path, operation["operationId"])
        for path, item in spec["paths"].items()
        for method, operation in item.items()
    )


def test_the_served_document_is_the_committed_one(app: FastAPI) -> None:
    served = app.openapi()
    if os.environ.get("MNEME_WRITE_OPENAPI"):
        DOCUMENT.write_text(json.dumps(served, indent=2, ensure_ascii=False) + "\n")
    committed = json.loads(DOCUMENT.read_text())
    # Operations first: a renamed handler would silently rename a generated SDK's method.
    assert operations(served) == operations(committed)
    assert served == committed, "API changed: regenerate docs/openapi.json (see module docstring)"


def test_every_operation_id_is_unique(app: FastAPI) -> None:
    ids = [operation_id for _, _, operation_id in operations(app.openapi())]
    assert len(ids) == len(set(ids))


async def test_every_operation_declares_the_shared_problems(client: AsyncClient) -> None:
    """Including the problems raised before the route's own code runs."""
    document = (await client.get("/openapi.json")).json()
    checked = 0
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            declared = set(operation["responses"])
            expected = {"422"}
            if path.startswith("/v1/"):
                expected |= {"401", "429", "503"}
            if "requestBody" in operation:
                expected.add("413")
            assert expected <= declared, f"{method.upper()} {path} lacks {expected - declared}"
            problem = operation["responses"]["422"]["content"]["application/problem+json"]
            assert problem["schema"] == {"$ref": "#/components/schemas/Problem"}
            checked += 1
    assert checked > 40
