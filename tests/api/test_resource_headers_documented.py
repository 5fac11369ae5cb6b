"""The OpenAPI document tells SDK users which answers name a resource and its version."""

from __future__ import annotations

from httpx import AsyncClient


async def test_every_created_answer_declares_its_location(client: AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    created = [
        (method, path, operation["responses"]["201"])
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        if "201" in operation["responses"]
    ]
    assert len(created) >= 9
    for method, path, response in created:
        assert "Location" in response.get("headers", {}), f"{method.upper()} {path}"
        assert "application/json" in response["content"], f"{method.upper()} {path}"


async def test_conditional_headers_come_with_their_answers(client: AsyncClient) -> None:
    """A read that sends an ETag honours If-None-Match (304); a write that takes If-Match
    takes If-None-Match too, and declares the 412 either answers."""
    document = (await client.get("/openapi.json")).json()
    guarded = 0
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            parameters = {parameter["name"] for parameter in operation.get("parameters", [])}
            tagged = "ETag" in operation["responses"].get("200", {}).get("headers", {})
            if method == "get" and tagged:
                assert "if-none-match" in parameters, where
                assert "ETag" in operation["responses"]["304"]["headers"], where
            if "if-match" in parameters:
                assert "412" in operation["responses"], where
                assert "if-none-match" in parameters, where
                guarded += 1
    # Memory and org memory PATCH/DELETE, keyed PUT/DELETE, thread PATCH/DELETE, API key
    # revoke, profile and org profile PATCH/DELETE.
    assert guarded >= 13
