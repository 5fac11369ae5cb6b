"""The memories API: validation, dedupe, org rules, addressing, history, embedder failures."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from fastapi import FastAPI
from httpx import AsyncClient

from service.auth.owner import Owner
from service.config import Settings
from service.memories.filters import MemoryFilter
from service.providers import EmbedderUnavailable
from tests.conftest import assert_problem, bearer, new_tenant
from tests.fixtures.factories import remember


def user(settings: Settings, tenant: str, user_id: str = "alice") -> dict[str, str]:
    return bearer(settings, tenant, user_id)


async def listing(
    client: AsyncClient, headers: dict[str, str], path: str = "/v1/users/me/memories"
) -> list[dict[str, Any]]:
    response = await client.get(path, headers=headers)
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def test_memory_round_trip_keeps_every_field(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = user(settings, tenant)
    created = await remember(
        client,
        headers,
        kind="episodic",
        text="Went to Lisbon for a conference",
        category="travel",
        confidence=0.9,
        lifecycle="proposed",
        needs_review=True,
        event_at="2024-05-01T10:00:00Z",
        evidence="I was in Lisbon last May",
        metadata={"source": "chat"},
        expires_at="2999-01-01T00:00:00Z",
    )
    assert created["duplicate"] is False
    assert created["embedding_model"] == "all-MiniLM-L6-v2-onnx-int8-dynamic"
    fetched = (await client.get(f"/v1/users/me/memories/{created['id']}", headers=headers)).json()
    for field in (
        "kind",
        "text",
        "category",
        "confidence",
        "lifecycle",
        "needs_review",
        "evidence",
        "metadata",
        "user_id",
        "scope",
    ):
        assert fetched[field] == created[field], field
    assert (fetched["scope"], fetched["user_id"]) == ("user", "alice")
    assert fetched["event_at"].startswith("2024-05-01T10:00:00")


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("My SSN is 123-45-6789", "ssn"),
        ("Card 4111 1111 1111 1111 exp 12/29", "payment_card"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow", "pem_private_key"),
        ("aws key AKIAIOSFODNN7EXAMPLE", "cloud_access_key"),
        ("use sk-proj-abcdefghijklmnopqrstuvwxyz123456", "api_secret"),
        ("password: hunter22-secret", "api_secret"),
    ],
)
async def test_secrets_are_refused_naming_the_rule_and_nothing_is_stored(
    client: AsyncClient, settings: Settings, tenant: str, text: str, rule: str
) -> None:
    headers = user(settings, tenant)
    response = await client.post(
        "/v1/users/me/memories/batch",
        headers=headers,
        json={"items": [{"text": "A harmless fact"}, {"text": text}]},
    )
    body = assert_problem(response, 422, "SECRET_REFUSED")
    assert body["rule"] == rule
    assert body["errors"][0]["loc"] == ["body", "items", 1, "text"]
    assert text not in response.text
    assert await listing(client, headers) == []


async def test_ordinary_numbers_are_not_mistaken_for_cards(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    created = await remember(
        client, user(settings, tenant), text="Order 1234 5678 9012 3456 arrives on 2024-06-01"
    )
    assert created["duplicate"] is False


async def test_ids_and_timestamps_whose_digits_pass_a_cards_checksum_are_stored(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    # The digits of this UUID across its hyphens pass the Luhn checksum a card number's do, and
    # so do those of the millisecond timestamp (but no card network issues numbers under 1).
    order, placed_at = "98c828d5-3390-4770-8015-11eb0d9b420c", "1733753037352"
    created = await remember(
        client,
        user(settings, tenant),
        text=f"Order {order} placed at {placed_at} was delivered late",
        metadata={"order_id": order, "placed_at_ms": placed_at},
    )
    assert (created["text"], created["metadata"]) == (
        f"Order {order} placed at {placed_at} was delivered late",
        {"order_id": order, "placed_at_ms": placed_at},
    )


# Text that holds nothing a reader sees: whitespace, format characters (zero-width space,
# byte-order mark, word joiner) and characters that render as nothing (Hangul filler, blank
# Braille pattern).
BLANK_TEXTS = ["   ", "\u200b", "\ufeff\u2060", "\u3164", "\u2800 \u034f"]


@pytest.mark.parametrize("blank", BLANK_TEXTS)
async def test_a_memory_of_nothing_visible_is_refused_on_every_write_and_nothing_changes(
    client: AsyncClient, settings: Settings, tenant: str, blank: str
) -> None:
    headers = user(settings, tenant)
    created = await remember(client, headers, text="Likes green tea")
    memory = f"/v1/users/me/memories/{created['id']}"
    keyed = {"kind": "semantic", "key": "drink"}
    writes = [
        ("POST", "/v1/users/me/memories", None, {"text": blank}),
        ("POST", "/v1/users/me/memories/batch", None, {"items": [{"text": blank}]}),
        ("PATCH", memory, None, {"text": blank}),
        ("PUT", "/v1/users/me/keyed-memories", keyed, {"text": blank}),
        ("POST", "/v1/users/me/memories", None, {"text": "x", "speaker": blank}),
    ]
    for method, path, params, body in writes:
        response = await client.request(method, path, params=params, json=body, headers=headers)
        assert_problem(response, 422, "VALIDATION_FAILED")
    assert [m["text"] for m in await listing(client, headers)] == ["Likes green tea"]


async def test_a_memory_keeps_its_visible_text_without_invisible_characters_around_it(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = user(settings, tenant)
    created = await remember(client, headers, text="\u200b Likes green tea\ufeff ")
    assert created["text"] == "Likes green tea"
    memory = f"/v1/users/me/memories/{created['id']}"
    patched = await client.patch(memory, json={"text": "\u2060Likes oolong\u3164"}, headers=headers)
    assert patched.status_code == 200 and patched.json()["text"] == "Likes oolong"


async def test_text_over_4000_characters_is_refused(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = user(settings, tenant)
    response = await client.post(
        "/v1/users/me/memories", json={"text": "x" * 4001}, headers=headers
    )
    assert_problem(response, 422, "VALIDATION_FAILED")
    assert await listing(client, headers) == []


async def test_exact_duplicates_return_the_existing_memory(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = user(settings, tenant)
    first = await remember(client, headers, text="Prefers green tea")
    again = await remember(client, headers, text="  prefers   GREEN tea ")
    assert again["duplicate"] is True and again["id"] == first["id"]
    other_kind = await remember(client, headers, text="Prefers green tea", kind="episodic")
    assert other_kind["duplicate"] is False
    batch = await client.post(
        "/v1/users/me/memories/batch",
        headers=headers,
        json={"items": [{"text": "Owns a cat"}, {"text": "owns a cat"}]},
    )
    items = batch.json()["items"]
    assert [item["duplicate"] for item in items] == [False, True]
    assert items[0]["id"] == items[1]["id"]
    assert len(await listing(client, headers)) == 3


async def test_end_users_cannot_write_org_memory_whatever_the_body_says(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = user(settings, tenant)
    via_user_route = await client.post(
        "/v1/users/me/memories",
        headers=headers,
        json={"text": "Refunds within 90 days", "scope": "org"},
    )
    assert_problem(via_user_route, 422, "VALIDATION_FAILED")
    via_org_route = await client.post(
        "/v1/org/memories", headers=headers, json={"text": "Refunds within 90 days"}
    )
    assert_problem(via_org_route, 403, "ORG_WRITE_FORBIDDEN")
    service = bearer(settings, tenant, "agent", service=True)
    assert_problem(
        await client.post(
            "/v1/org/memories", headers=service, json={"text": "Refunds within 90 days"}
        ),
        403,
        "ORG_WRITE_FORBIDDEN",
    )
    assert await listing(client, headers, "/v1/org/memories") == []


async def test_a_user_route_refuses_org_scope_even_from_an_admin_and_stores_nothing(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    admin = bearer(settings, tenant, "agent", admin=True, service=True)
    one = await client.post(
        "/v1/users/alice/memories",
        headers=admin,
        json={"text": "Refunds within 90 days", "scope": "org"},
    )
    body = assert_problem(one, 422, "VALIDATION_FAILED")
    assert "/v1/org/memories" in body["detail"]
    assert [e["loc"] for e in body["errors"]] == [["body", "scope"]]
    batch = await client.post(
        "/v1/users/alice/memories/batch",
        headers=admin,
        json={"items": [{"text": "Owns a cat"}, {"text": "Office closes at six", "scope": "org"}]},
    )
    body = assert_problem(batch, 422, "VALIDATION_FAILED")
    assert "/v1/org/memories" in body["detail"]
    assert [e["loc"] for e in body["errors"]] == [["body", "items", 1, "scope"]]
    assert await listing(client, admin, "/v1/org/memories") == []
    assert await listing(client, admin, "/v1/users/alice/memories") == []


async def test_the_org_route_refuses_user_scope_and_stores_nothing(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """A memory meant for one user is never stored tenant-wide: the organization's route
    refuses an item that names `scope: user`, as a user's route refuses `scope: org`."""
    admin = bearer(settings, tenant, "root", admin=True)
    one = await client.post(
        "/v1/org/memories", headers=admin, json={"text": "Ada's private note.", "scope": "user"}
    )
    body = assert_problem(one, 422, "VALIDATION_FAILED")
    assert "/v1/users/" in body["detail"]
    assert [e["loc"] for e in body["errors"]] == [["body", "scope"]]
    batch = await client.post(
        "/v1/org/memories/batch",
        headers=admin,
        json={
            "items": [
                {"text": "Office closes at six", "scope": "org"},
                {"text": "Ada's private note.", "scope": "user"},
            ]
        },
    )
    body = assert_problem(batch, 422, "VALIDATION_FAILED")
    assert [e["loc"] for e in body["errors"]] == [["body", "items", 1, "scope"]]
    assert await listing(client, admin, "/v1/org/memories") == []
    # Left out, or named as the route's own, the scope is the organization's.
    for item in ({"text": "Office closes at six"}, {"text": "Lunch at noon", "scope": "org"}):
        written = await client.post("/v1/org/memories", headers=admin, json=item)
        assert written.status_code == 201 and written.json()["scope"] == "org", written.text


async def test_org_memory_reaches_every_user_of_the_tenant_only(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    admin = bearer(settings, tenant, "root", admin=True)
    created = (
        await client.post(
            "/v1/org/memories",
            headers=admin,
            json={"text": "Refunds are accepted within 30 days", "category": "policy"},
        )
    ).json()
    assert created["scope"] == "org" and created["user_id"] is None
    for reader in ("alice", "bob"):
        items = await listing(client, user(settings, tenant, reader), "/v1/org/memories")
        assert [item["id"] for item in items] == [created["id"]]
        hits = (
            await client.post(
                f"/v1/users/{reader}/memories/search",
                headers=user(settings, tenant, reader),
                json={"query": "refund policy"},
            )
        ).json()["hits"]
        assert created["id"] in [hit["memory"]["id"] for hit in hits]
    stranger = user(settings, new_tenant(), "alice")
    assert await listing(client, stranger, "/v1/org/memories") == []
    assert_problem(
        await client.get(f"/v1/org/memories/{created['id']}", headers=stranger), 404, "NOT_FOUND"
    )


async def test_other_users_and_tenants_get_404_on_every_route(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    owner = user(settings, tenant, "alice")
    memory = await remember(client, owner, text="Allergic to peanuts")
    path = f"/v1/users/alice/memories/{memory['id']}"
    by_id = [
        ("GET", path, None),
        ("PATCH", path, {"text": "x"}),
        ("DELETE", path, None),
        ("GET", f"{path}/history", None),
    ]
    addressing_alice = [
        ("GET", "/v1/users/alice/memories", None),
        ("POST", "/v1/users/alice/memories", {"text": "planted"}),
        ("POST", "/v1/users/alice/memories/batch", {"items": [{"text": "planted"}]}),
        ("POST", "/v1/users/alice/memories/search", {"query": "peanuts"}),
        ("DELETE", "/v1/users/alice/memories?all=true", None),
        ("GET", "/v1/users/alice/procedures", None),
        ("PUT", "/v1/users/alice/procedures", {"style": "planted"}),
    ]
    bob = user(settings, tenant, "bob")  # another end user of the same tenant
    for method, url, body in by_id + addressing_alice:
        assert_problem(await client.request(method, url, json=body, headers=bob), 404, "NOT_FOUND")
    # A service of another tenant addresses *its own* tenant's "alice": this memory does not
    # exist there.
    foreign_service = bearer(settings, new_tenant(), "agent", service=True)
    for method, url, body in by_id:
        assert_problem(
            await client.request(method, url, json=body, headers=foreign_service), 404, "NOT_FOUND"
        )
    foreign_list = await client.get("/v1/users/alice/memories", headers=foreign_service)
    assert foreign_list.json()["items"] == []
    still_there = await client.get(f"/v1/users/me/memories/{memory['id']}", headers=owner)
    assert still_there.json()["text"] == "Allergic to peanuts"
    assert [m["text"] for m in await listing(client, owner)] == ["Allergic to peanuts"]


async def test_service_writes_for_any_user_of_its_tenant(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    service = bearer(settings, tenant, "agent", service=True)
    response = await client.post(
        "/v1/users/carol/memories", headers=service, json={"text": "Carol likes jazz"}
    )
    assert response.status_code == 201
    items = await listing(client, user(settings, tenant, "carol"))
    assert [item["text"] for item in items] == ["Carol likes jazz"]


async def test_update_confirm_and_delete_are_recorded_in_history(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = user(settings, tenant)
    memory = await remember(
        client,
        headers,
        text="Lives in Lisbon",
        lifecycle="proposed",
        needs_review=True,
        confidence=0.75,
    )
    url = f"/v1/users/me/memories/{memory['id']}"
    changed = (
        await client.patch(
            url, headers=headers, json={"text": "Lives in Berlin", "category": "location"}
        )
    ).json()
    assert changed["text"] == "Lives in Berlin" and changed["embedding_model"]
    confirmed = (await client.patch(url, headers=headers, json={"lifecycle": "confirmed"})).json()
    assert (confirmed["lifecycle"], confirmed["needs_review"]) == ("confirmed", False)
    assert (await client.delete(url, headers=headers)).status_code == 204
    assert_problem(await client.get(url, headers=headers), 404, "NOT_FOUND")
    history = (await client.get(f"{url}/history", headers=headers)).json()["items"]
    assert [(e["action"], e["old_text"], e["new_text"]) for e in history] == [
        ("add", None, "Lives in Lisbon"),
        ("update", "Lives in Lisbon", "Lives in Berlin"),
        ("update", "Lives in Berlin", "Lives in Berlin"),
        ("delete", "Lives in Berlin", None),
    ]
    assert history[1]["changes"] == {"category": "location"}
    assert history[0]["actor"] == "alice"


async def test_patch_into_an_existing_text_is_a_conflict(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = user(settings, tenant)
    await remember(client, headers, text="Likes tea")
    other = await remember(client, headers, text="Likes coffee")
    response = await client.patch(
        f"/v1/users/me/memories/{other['id']}", headers=headers, json={"text": "likes TEA"}
    )
    assert_problem(response, 409, "DUPLICATE_MEMORY")
    refused = await client.patch(
        f"/v1/users/me/memories/{other['id']}", headers=headers, json={"text": "SSN 123-45-6789"}
    )
    assert_problem(refused, 422, "SECRET_REFUSED")
    unchanged = (await client.get(f"/v1/users/me/memories/{other['id']}", headers=headers)).json()
    assert unchanged["text"] == "Likes coffee"


async def test_list_filters_and_cursor_pages(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = user(settings, tenant)
    for index in range(5):
        await remember(client, headers, text=f"Episode number {index}", kind="episodic")
    await remember(client, headers, text="Prefers aisle seats", category="preference")
    episodic = await listing(client, headers, "/v1/users/me/memories?kind=episodic")
    assert len(episodic) == 5
    preferences = await listing(client, headers, "/v1/users/me/memories?category=preference")
    assert [m["text"] for m in preferences] == ["Prefers aisle seats"]
    seen: list[str] = []
    cursor = None
    while True:
        url = "/v1/users/me/memories?limit=2" + (f"&cursor={cursor}" if cursor else "")
        page = (await client.get(url, headers=headers)).json()
        seen += [item["text"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen[0] == "Prefers aisle seats" and len(seen) == 6 and len(set(seen)) == 6


async def test_delete_by_filter_needs_a_filter_or_all(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = user(settings, tenant)
    await remember(client, headers, text="Went skiing", kind="episodic")
    await remember(client, headers, text="Went surfing", kind="episodic")
    await remember(client, headers, text="Vegetarian")
    assert_problem(
        await client.delete("/v1/users/me/memories", headers=headers), 422, "VALIDATION_FAILED"
    )
    deleted = await client.delete("/v1/users/me/memories?kind=episodic", headers=headers)
    assert deleted.json()["deleted"] == 2
    assert [m["text"] for m in await listing(client, headers)] == ["Vegetarian"]
    everything = await client.delete("/v1/users/me/memories?all=true", headers=headers)
    assert everything.json()["deleted"] == 1


async def test_procedures_are_typed_slots_and_replacements_are_superseded(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = user(settings, tenant)
    first = await client.put(
        "/v1/users/me/procedures",
        headers=headers,
        json={"style": "Answer briefly", "safety": "Never give medical advice"},
    )
    assert first.json()["style"]["text"] == "Answer briefly"
    old_id = first.json()["style"]["memory_id"]
    second = (
        await client.put(
            "/v1/users/me/procedures",
            headers=headers,
            json={"style": "Answer in detail", "safety": ""},
        )
    ).json()
    assert second["style"]["text"] == "Answer in detail"
    assert second["safety"] is None and second["workflow"] is None
    old = (await client.get(f"/v1/users/me/memories/{old_id}", headers=headers)).json()
    assert old["lifecycle"] == "superseded"
    assert old["superseded_by"] == second["style"]["memory_id"]
    history = (await client.get(f"/v1/users/me/memories/{old_id}/history", headers=headers)).json()[
        "items"
    ]
    assert [e["action"] for e in history] == ["add", "supersede"]
    org = await client.put("/v1/org/procedures", headers=headers, json={"style": "Formal"})
    assert_problem(org, 403, "ORG_WRITE_FORBIDDEN")


@pytest.mark.parametrize("blank", [*BLANK_TEXTS, "\u0088\u001c"])
async def test_a_procedure_slot_of_nothing_visible_clears_it_like_an_empty_string(
    client: AsyncClient, settings: Settings, tenant: str, blank: str
) -> None:
    headers = user(settings, tenant)
    path = "/v1/users/me/procedures"
    await client.put(path, headers=headers, json={"style": "Answer briefly"})
    cleared = await client.put(path, headers=headers, json={"style": blank, "workflow": blank})
    assert cleared.status_code == 200, cleared.text
    assert cleared.json()["style"] is None and cleared.json()["workflow"] is None
    kept = await client.put(path, headers=headers, json={"style": "\u200b Be kind \ufeff"})
    assert kept.json()["style"]["text"] == "Be kind"


class FailingEmbedder:
    """The live column's model, down: a write stores no vector, a search goes lexical."""

    dims = 384

    def __init__(self, model_name: str) -> None:
        self.model_name = model_name

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise EmbedderUnavailable("down for the test")

    async def embed_query(self, text: str) -> list[float]:
        raise EmbedderUnavailable("down for the test")

    async def aclose(self) -> None:
        return None


async def test_embedder_failure_still_stores_and_a_later_pass_embeds(
    app: FastAPI, client: AsyncClient, settings: Settings, tenant: str
) -> None:
    backfill = app.state.mneme.embedding_backfill
    real_embedder, real_delays = backfill.embedder, backfill.retry_delays
    # Generous retry gaps: the embedder is back long before the second attempt.
    backfill.embedder = FailingEmbedder(real_embedder.model_name)
    backfill.retry_delays = (0.5, 1.0, 2.0)
    headers = user(settings, tenant)
    try:
        created = await remember(client, headers, text="Speaks Portuguese fluently")
        assert created["embedding_model"] is None
        lexical = (
            await client.post(
                "/v1/users/me/memories/search", headers=headers, json={"query": "Portuguese"}
            )
        ).json()
        assert lexical["query_embedded"] is False
        assert [h["memory"]["id"] for h in lexical["hits"]] == [created["id"]]
    finally:
        backfill.embedder = real_embedder
    await app.state.mneme.background.drain()
    backfill.retry_delays = real_delays
    fetched = (await client.get(f"/v1/users/me/memories/{created['id']}", headers=headers)).json()
    assert fetched["embedding_model"] == real_embedder.model_name
    vector_only = (
        await client.post(
            "/v1/users/me/memories/search",
            headers=headers,
            json={"query": "language skills", "mode": "vector"},
        )
    ).json()
    assert vector_only["hits"][0]["memory"]["id"] == created["id"]


async def test_idempotent_retry_replays_instead_of_writing_twice(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = {**bearer(settings, tenant, "agent", service=True), "Idempotency-Key": "turn-42"}
    body = {"items": [{"text": "Dana moved to Porto"}, {"text": "Dana adopted a dog"}]}
    first = await client.post("/v1/users/dana/memories/batch", headers=headers, json=body)
    retry = await client.post("/v1/users/dana/memories/batch", headers=headers, json=body)
    assert first.status_code == retry.status_code == 201
    assert retry.json() == first.json()
    assert retry.headers.get("idempotent-replayed") == "true"
    assert all(item["duplicate"] is False for item in retry.json()["items"])
    other = await client.post(
        "/v1/users/dana/memories/batch",
        headers=headers,
        json={"items": [{"text": "Something else"}]},
    )
    assert_problem(other, 409, "IDEMPOTENCY_KEY_REUSED")
    items = await listing(client, headers, "/v1/users/dana/memories")
    assert sorted(m["text"] for m in items) == ["Dana adopted a dog", "Dana moved to Porto"]


async def test_a_patch_refusing_a_null_or_a_past_expiry_names_the_field(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """As every other refused input, each null is named in `errors`, and nothing changes."""
    headers = user(settings, tenant)
    memory = await remember(client, headers, text="Plays chess")
    path = f"/v1/users/me/memories/{memory['id']}"
    required = ("text", "lifecycle", "confidence", "needs_review")
    for field in required:
        response = await client.patch(path, headers=headers, json={field: None})
        body = assert_problem(response, 422, "VALIDATION_FAILED")
        assert [e["loc"] for e in body["errors"]] == [["body", field]]
    every = await client.patch(
        path, headers=headers, json={**dict.fromkeys(required), "category": "games"}
    )
    body = assert_problem(every, 422, "VALIDATION_FAILED")
    assert sorted(e["loc"][1] for e in body["errors"]) == sorted(required)
    unchanged = (await client.get(path, headers=headers)).json()
    assert unchanged["category"] is None and unchanged["text"] == "Plays chess"
    # The fields a null clears still take one.
    cleared = await client.patch(path, headers=headers, json={"category": None, "event_at": None})
    assert cleared.status_code == 200, cleared.text
    past = await client.patch(path, headers=headers, json={"expires_at": "2020-01-01T00:00:00Z"})
    body = assert_problem(past, 422, "VALIDATION_FAILED")
    assert [e["loc"] for e in body["errors"]] == [["body", "expires_at"]]


async def test_user_listing_can_include_org_memories(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    admin = bearer(settings, tenant, "root", admin=True)
    await client.post("/v1/org/memories", headers=admin, json={"text": "Office closes at six"})
    headers = user(settings, tenant)
    await remember(client, headers, text="Works remotely on Fridays")
    own = await listing(client, headers)
    both = await listing(client, headers, "/v1/users/me/memories?scope=user&scope=org")
    org_only = await listing(client, headers, "/v1/users/me/memories?scope=org")
    assert [m["text"] for m in own] == ["Works remotely on Fridays"]
    assert sorted(m["text"] for m in both) == ["Office closes at six", "Works remotely on Fridays"]
    assert [m["text"] for m in org_only] == ["Office closes at six"]


async def test_a_user_route_reads_the_org_memories_it_lists_and_changes_none(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """A client that follows the ids of a listing with `scope=org` reads each memory on the
    same route (as the org route shows it), and is told where such a memory is changed."""
    admin = bearer(settings, tenant, "root", admin=True)
    created = await client.post(
        "/v1/org/memories", headers=admin, json={"text": "Office closes at six"}
    )
    assert created.status_code == 201, created.text
    headers = user(settings, tenant)
    [listed] = await listing(client, headers, "/v1/users/me/memories?scope=org")
    path = f"/v1/users/me/memories/{listed['id']}"
    read = await client.get(path, headers=headers)
    assert read.status_code == 200, read.text
    assert read.json() == listed and read.headers["etag"] == created.headers["etag"]
    cached = await client.get(path, headers={**headers, "If-None-Match": read.headers["etag"]})
    assert cached.status_code == 304
    history = await client.get(f"{path}/history", headers=headers)
    assert [event["action"] for event in history.json()["items"]] == ["add"]

    for writer in (headers, admin):
        for response in (
            await client.patch(path, headers=writer, json={"text": "Office closes at five"}),
            await client.delete(path, headers=writer),
        ):
            body = assert_problem(response, 422, "VALIDATION_FAILED")
            assert f"/v1/org/memories/{listed['id']}" in body["detail"]
            assert [e["loc"] for e in body["errors"]] == [["path", "memory_id"]]
    unchanged = await client.get(f"/v1/org/memories/{listed['id']}", headers=admin)
    assert unchanged.headers["etag"] == created.headers["etag"]
    stranger = user(settings, new_tenant(), "alice")
    assert_problem(await client.get(path, headers=stranger), 404, "NOT_FOUND")
    assert_problem(await client.get(f"{path}/history", headers=stranger), 404, "NOT_FOUND")
    assert_problem(await client.delete(path, headers=stranger), 404, "NOT_FOUND")


async def test_user_route_never_deletes_org_memories(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    admin = bearer(settings, tenant, "root", admin=True)
    await client.post("/v1/org/memories", headers=admin, json={"text": "Office closes at six"})
    response = await client.delete("/v1/users/root/memories?scope=org&all=true", headers=admin)
    assert_problem(response, 422, "VALIDATION_FAILED")
    assert len(await listing(client, admin, "/v1/org/memories")) == 1


async def test_history_records_a_change_of_time_in_the_api_s_own_format(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = user(settings, tenant)
    created = await client.post(
        "/v1/users/me/memories", headers=headers, json={"text": "Lives in Lisbon"}
    )
    url = f"/v1/users/me/memories/{created.json()['id']}"
    patched = await client.patch(url, headers=headers, json={"lifecycle": "superseded"})
    assert patched.status_code == 200, patched.text
    history = (await client.get(f"{url}/history", headers=headers)).json()["items"]
    recorded = history[-1]["changes"]["invalid_at"]
    # The same instant, written as every timestamp the API returns (RFC 3339, "T" separator).
    assert recorded == patched.json()["invalid_at"]
    assert "T" in recorded


@pytest.mark.parametrize("field", ["kinds", "categories", "lifecycles"])
async def test_an_empty_filter_list_is_refused_not_read_as_no_filter(
    client: AsyncClient, settings: Settings, tenant: str, field: str
) -> None:
    headers = user(settings, tenant)
    retired = await remember(client, headers, text="Superseded but edited.", category="note")
    patched = await client.patch(
        f"/v1/users/me/memories/{retired['id']}", headers=headers, json={"lifecycle": "superseded"}
    )
    assert patched.status_code == 200, patched.text
    search = await client.post(
        "/v1/users/me/memories/search",
        headers=headers,
        json={"query": "Superseded but edited", "mode": "lexical", field: []},
    )
    body = assert_problem(search, 422, "VALIDATION_FAILED")
    assert body["errors"][0]["loc"] == ["body", field]
    compact = await client.post(
        "/v1/users/me/memories/compact", headers=headers, json={"categories": []}
    )
    assert_problem(compact, 422, "VALIDATION_FAILED")
    # Inside the service too, an empty list is a condition no memory meets.
    empty: dict[str, Any] = {field: []}
    none = MemoryFilter.build([Owner.user("alice")], **empty)
    assert getattr(none, field) == () and none.has_conditions


async def test_evidence_of_nothing_visible_is_refused_and_evidence_is_kept_trimmed(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = user(settings, tenant)
    for blank in ("   ", "\u200b\n"):
        refused = await client.post(
            "/v1/users/me/memories", headers=headers, json={"text": "Ada.", "evidence": blank}
        )
        body = assert_problem(refused, 422, "VALIDATION_FAILED")
        assert body["errors"][0]["loc"] == ["body", "evidence"]
    assert await listing(client, headers) == []
    kept = await remember(client, headers, text="Ada.", evidence="  She said so.\u200b ")
    assert kept["evidence"] == "She said so."


@pytest.mark.parametrize("method", ["GET", "PATCH", "DELETE"])
async def test_another_method_on_the_search_path_is_a_405_naming_post(
    client: AsyncClient, settings: Settings, tenant: str, method: str
) -> None:
    """`…/memories/search` is not a memory id: the memory routes take only a UUID there, so a
    GET, PATCH or DELETE of it is the search route's 405, not a memory id refused (422)."""
    headers = bearer(settings, tenant, "ada")
    answer = await client.request(method, "/v1/users/me/memories/search", headers=headers)
    assert_problem(answer, 405, "METHOD_NOT_ALLOWED")
    assert answer.headers["allow"] == "POST"


async def test_a_memory_path_that_names_no_uuid_is_a_404(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    for path in ("/v1/users/me/memories/nope", "/v1/org/memories/nope/history"):
        assert_problem(await client.get(path, headers=headers), 404, "NOT_FOUND")
