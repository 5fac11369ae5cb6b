"""The API document declares every problem an operation can answer, including the ones raised
before the route's own code runs."""

from __future__ import annotations

from httpx import AsyncClient


async def test_every_operation_declares_the_shared_problems(client: AsyncClient) -> None:
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
