"""Deleting by filter removes exactly what the same filter lists, and nothing else."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from tests.conftest import as_tenant, assert_problem, bearer, new_tenant
from tests.fixtures.factories import remember

KINDS = ("semantic", "episodic", "procedural")
CATEGORIES = ("travel", "food", "work")
LIFECYCLES = ("proposed", "confirmed", "superseded")
EVERY_LIFECYCLE = [("lifecycle", lifecycle) for lifecycle in LIFECYCLES]


async def listed_ids(
    client: AsyncClient,
    headers: dict[str, str],
    params: Sequence[tuple[str, str]],
    path: str = "/v1/users/me/memories",
) -> list[str]:
    """Every id the listing returns for `params`, following the cursor to the end."""
    ids: list[str] = []
    cursor: str | None = None
    while True:
        query = [*params, ("limit", "100")] + ([("cursor", cursor)] if cursor else [])
        response = await client.get(f"{path}?{urlencode(query)}", headers=headers)
        assert response.status_code == 200, response.text
        page = response.json()
        ids.extend(item["id"] for item in page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            return ids


async def history_lengths(
    client: AsyncClient, headers: dict[str, str], ids: Sequence[str], prefix: str
) -> dict[str, int]:
    lengths = {}
    for memory_id in ids:
        response = await client.get(f"{prefix}/{memory_id}/history", headers=headers)
        assert response.status_code == 200, response.text
        lengths[memory_id] = len(response.json()["items"])
    return lengths


async def test_an_event_window_limits_what_a_delete_removes(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    created = await client.post(
        "/v1/users/me/memories/batch",
        headers=headers,
        json={
            "items": [
                {"kind": "episodic", "text": "Moved to Lisbon", "event_at": "2020-03-01T00:00:00Z"},
                {"kind": "episodic", "text": "Moved to Porto", "event_at": "2025-03-01T00:00:00Z"},
            ]
        },
    )
    assert created.status_code == 201, created.text
    old, new = (item["id"] for item in created.json()["items"])

    response = await client.delete(
        "/v1/users/me/memories?kind=episodic&event_before=2021-01-01T00:00:00Z", headers=headers
    )

    assert response.status_code == 200, response.text
    assert response.json() == {"matched": 1, "deleted": 1, "dry_run": False, "ids": [old]}
    assert await listed_ids(client, headers, []) == [new]


MORE_THAN_ONE_STATEMENT_BINDS = 33_000
"""More memories than PostgreSQL's protocol has parameters for one statement (32,767)."""


@pytest.mark.slow
async def test_every_memory_of_a_user_with_tens_of_thousands_is_deleted(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine
) -> None:
    # A statement that named each memory by a parameter of its own could not be sent.
    tenant = new_tenant()
    headers = bearer(settings, tenant, "alice")
    await remember(client, headers, kind="semantic", text="User keeps note 0")
    async with owner_engine.begin() as connection:
        await as_tenant(connection, tenant)
        await connection.execute(
            text(
                "INSERT INTO memory (tenant_id, scope, user_id, kind, text) "
                "SELECT :tenant, 'user', 'alice', 'semantic', 'User keeps note ' || n "
                "FROM generate_series(1, :count) AS n"
            ),
            {"tenant": tenant, "count": MORE_THAN_ONE_STATEMENT_BINDS},
        )

    response = await client.delete("/v1/users/me/memories?all=true", headers=headers)

    assert response.status_code == 200, response.text
    assert response.json()["deleted"] == MORE_THAN_ONE_STATEMENT_BINDS + 1
    assert await listed_ids(client, headers, []) == []


async def test_a_dry_run_counts_and_names_without_deleting(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    items = [{"kind": "episodic", "text": f"Trip number {n}"} for n in range(25)]
    response = await client.post(
        "/v1/users/me/memories/batch", headers=headers, json={"items": items}
    )
    assert response.status_code == 201

    dry = await client.delete("/v1/users/me/memories?kind=episodic&dry_run=true", headers=headers)

    assert dry.status_code == 200, dry.text
    body = dry.json()
    assert (body["matched"], body["deleted"], body["dry_run"]) == (25, 0, True)
    everything = await listed_ids(client, headers, [("kind", "episodic")])
    assert body["ids"] == everything[:20]
    assert len(everything) == 25


async def test_an_event_window_alone_is_a_filter(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    await client.post("/v1/users/me/memories", headers=headers, json={"text": "Kept"})
    response = await client.delete(
        "/v1/users/me/memories?event_before=2000-01-01T00:00:00Z", headers=headers
    )
    assert response.json()["deleted"] == 0
    assert_problem(
        await client.delete("/v1/users/me/memories?limit=5", headers=headers),
        422,
        "VALIDATION_FAILED",
    )


def random_filter(
    rng: random.Random, base: datetime, marks: list[datetime]
) -> list[tuple[str, str]]:
    """Query parameters for a random, non-empty filter over the corpus below."""
    params: list[tuple[str, str]] = []
    while not params:
        if rng.random() < 0.5:
            params += [("kind", k) for k in rng.sample(KINDS, rng.randint(1, 2))]
        if rng.random() < 0.4:
            params += [("category", c) for c in rng.sample(CATEGORIES, rng.randint(1, 2))]
        if rng.random() < 0.4:
            params += [("lifecycle", c) for c in rng.sample(LIFECYCLES, rng.randint(1, 3))]
        if rng.random() < 0.4:
            year = base.year - rng.randint(0, 8)
            params.append(("event_after", f"{year}-06-01T00:00:00Z"))
        if rng.random() < 0.4:
            year = base.year - rng.randint(0, 8)
            params.append(("event_before", f"{year}-01-01T00:00:00Z"))
        if rng.random() < 0.3:
            params.append(("created_after", rng.choice(marks).isoformat()))
        if rng.random() < 0.3:
            params.append(("created_before", rng.choice(marks).isoformat()))
    return _spans_in_order(params)


def _spans_in_order(params: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """`params` with each span's bounds in order: a span that ends where or before it begins
    is refused (422), not a filter (`tests/api/test_options_that_select_nothing.py`); one that
    would end there here covers the same time the other way round instead."""
    values = dict(params)
    for after, before in (("event_after", "event_before"), ("created_after", "created_before")):
        if after in values and before in values:
            start, end = sorted((values[after], values[before]), key=datetime.fromisoformat)
            if start == end:
                del values[before]
            else:
                values[after], values[before] = start, end
    spans = {"event_after", "event_before", "created_after", "created_before"}
    return [(name, value) for name, value in params if name not in spans] + [
        (name, values[name]) for name, _ in params if name in spans and name in values
    ]


async def build_corpus(
    client: AsyncClient, settings: Settings, tenant: str, rng: random.Random
) -> list[datetime]:
    """Alice's random memories in three batches (the times between them are `created_*`
    boundaries), a few of them superseded, plus Bob's and the organization's."""
    alice = bearer(settings, tenant, "alice")
    marks = [datetime.now(UTC) - timedelta(seconds=1)]
    for batch in range(3):
        items: list[dict[str, Any]] = []
        for index in range(10):
            item: dict[str, Any] = {
                "kind": rng.choice(KINDS),
                "text": f"memory {batch}-{index} {rng.getrandbits(32):08x}",
                "category": rng.choice([*CATEGORIES, None]),
                "lifecycle": rng.choice(["proposed", "confirmed"]),
            }
            if rng.random() < 0.8:
                item["event_at"] = f"{2026 - rng.randint(0, 9)}-0{rng.randint(1, 9)}-15T00:00:00Z"
            items.append(item)
        response = await client.post(
            "/v1/users/me/memories/batch", headers=alice, json={"items": items}
        )
        assert response.status_code == 201, response.text
        for written in response.json()["items"]:
            if rng.random() < 0.2:
                patched = await client.patch(
                    f"/v1/users/me/memories/{written['id']}",
                    headers=alice,
                    json={"lifecycle": "superseded"},
                )
                assert patched.status_code == 200
        marks.append(datetime.now(UTC))
    bob = bearer(settings, tenant, "bob")
    admin = bearer(settings, tenant, "root", admin=True)
    for headers, path in ((bob, "/v1/users/me/memories"), (admin, "/v1/org/memories")):
        for kind in KINDS:
            response = await client.post(
                path,
                headers=headers,
                json={"kind": kind, "text": f"{path} {kind}", "event_at": "2019-01-01T00:00:00Z"},
            )
            assert response.status_code == 201, response.text
    return marks


# Twelve random corpora and filters, each checked through the whole API.
@pytest.mark.slow
async def test_a_filtered_delete_removes_exactly_what_the_filter_lists(
    client: AsyncClient, settings: Settings
) -> None:
    rng = random.Random(20261130)
    for _ in range(12):
        tenant = new_tenant()
        marks = await build_corpus(client, settings, tenant, rng)
        alice = bearer(settings, tenant, "alice")
        bob = bearer(settings, tenant, "bob")
        params = random_filter(rng, datetime.now(UTC), marks)

        everything_before = await listed_ids(client, alice, EVERY_LIFECYCLE)
        bob_before = await listed_ids(client, bob, EVERY_LIFECYCLE)
        org_before = await listed_ids(client, bob, EVERY_LIFECYCLE, "/v1/org/memories")
        listed = await listed_ids(client, alice, params)
        kept = [i for i in everything_before if i not in listed]
        kept_history = await history_lengths(client, alice, kept, "/v1/users/me/memories")

        dry = await client.delete(
            f"/v1/users/me/memories?{urlencode([*params, ('dry_run', 'true')])}", headers=alice
        )
        assert dry.json()["matched"] == len(listed), params
        assert await listed_ids(client, alice, EVERY_LIFECYCLE) == everything_before

        response = await client.delete(f"/v1/users/me/memories?{urlencode(params)}", headers=alice)

        assert response.status_code == 200, response.text
        assert response.json()["deleted"] == len(listed), params
        assert await listed_ids(client, alice, EVERY_LIFECYCLE) == kept, params
        assert await listed_ids(client, bob, EVERY_LIFECYCLE) == bob_before
        assert await listed_ids(client, bob, EVERY_LIFECYCLE, "/v1/org/memories") == org_before
        assert await history_lengths(client, alice, kept, "/v1/users/me/memories") == kept_history
        for memory_id in listed:
            history = await client.get(f"/v1/users/me/memories/{memory_id}/history", headers=alice)
            assert history.json()["items"][-1]["action"] == "delete"


@pytest.mark.parametrize("path", ["/v1/users/me/memories", "/v1/org/memories"])
@pytest.mark.parametrize("paging", ["limit=1", "cursor=abc", "limit=1&cursor=abc"])
async def test_a_delete_by_filter_refuses_a_page_it_would_not_keep_to(
    client: AsyncClient, settings: Settings, path: str, paging: str
) -> None:
    """A delete removes every memory its filters match: `limit` and `cursor`, copied from a
    listing, are refused instead of ignored, and nothing is deleted."""
    headers = bearer(settings, new_tenant(), "ada", admin=True)
    for words in ("Went to Porto.", "Went to Lisbon."):
        created = await client.post(path, headers=headers, json={"kind": "episodic", "text": words})
        assert created.status_code == 201, created.text
    for dry_run in ("true", "false"):
        response = await client.delete(
            f"{path}?kind=episodic&{paging}&dry_run={dry_run}", headers=headers
        )
        body = assert_problem(response, 422, "VALIDATION_FAILED")
        assert "every" in body["detail"]
        assert {tuple(error["loc"]) for error in body["errors"]} == {
            ("query", part.split("=")[0]) for part in paging.split("&")
        }
    assert len(await listed_ids(client, headers, [("kind", "episodic")], path)) == 2
