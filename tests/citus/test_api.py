"""The service on Citus: the same API, the same answers as on single-node Postgres."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime
from typing import Any

import pytest
from fastapi import FastAPI
from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.auth.owner import Owner
from service.auth.principal import Principal
from service.config import Settings
from service.db import create_sessionmaker, tenant_transaction
from service.jobs import enqueue_thread_summary
from service.memories.repository import MemoryRepository
from service.profile.dependencies import profile_service
from service.profile.schemas import ProfilePatch
from service.services import unit_of_work
from service.threads.dependencies import thread_service
from service.threads.schemas import MessageIn, ThreadUpdate
from tests.conftest import assert_problem, bearer, new_tenant
from tests.fixtures.locks import transaction_start, waiting_locks

pytestmark = pytest.mark.citus

CORPUS = [
    "I adore hiking in the alps every summer",
    "The quarterly tax report is due on the fifteenth",
    "Database migrations run every night at two",
    "Invoice for the Rotterdam warehouse lease, reference ZX-4471-QR, paid in March",
    "Shipment XZ-4417-RQ cancelled",
    "Order AB-1200-KL was delivered to the front desk",
    "Package tracking numbers arrive by email",
    "Prefers window seats on long flights",
    "Allergic to shellfish and peanuts",
    "Walks the dog along the river before work",
    "Learning Portuguese for a move to Lisbon",
    "Keeps a sourdough starter named Clint",
]

QUERIES: list[dict[str, Any]] = [
    {"query": "Which outdoor activity does she love?"},
    {"query": "warehouse invoice ZX-4471-QR"},
    {"query": "food allergies", "mode": "vector"},
    {"query": "tax report deadline", "mode": "lexical"},
    {"query": "travel preferences", "fusion": "linear"},
    {"query": "what does she do in the morning", "limit": 3, "mmr_lambda": 0.5},
]


async def _seed(client: AsyncClient, headers: dict[str, str]) -> None:
    response = await client.post(
        "/v1/users/me/memories/batch",
        headers=headers,
        json={"items": [{"text": text} for text in CORPUS]},
    )
    assert response.status_code == 201, response.text


async def _ranking(
    client: AsyncClient, headers: dict[str, str], body: dict[str, Any]
) -> tuple[list[str], list[float], int]:
    """Texts of the hits best first, their scores, and how many hits there were.

    Memories are compared by text (each database made its own ids). Hits of exactly equal
    score have no defined order on either side, so ties are listed by text; hits scored 0
    (linear fusion's floor for a memory neither side matched) are left out, as which of them
    fill the last places is arbitrary. Scores differ in the last digits between the two
    databases (recency is measured from each one's clock), so they are compared apart.
    """
    response = await client.post("/v1/users/me/memories/search", headers=headers, json=body)
    assert response.status_code == 200, response.text
    hits = [
        (hit["scores"]["final_score"], hit["memory"]["text"]) for hit in response.json()["hits"]
    ]
    scored = sorted((hit for hit in hits if hit[0] > 0), key=lambda hit: (-hit[0], hit[1]))
    return [text for _, text in scored], [score for score, _ in scored], len(hits)


async def test_search_ranks_the_same_memories_as_single_node_postgres(
    client: AsyncClient,
    settings: Settings,
    citus_client: AsyncClient,
    citus_settings: Settings,
) -> None:
    tenant = new_tenant()
    single = bearer(settings, tenant, "alice")
    sharded = bearer(citus_settings, tenant, "alice")
    # One batch each: every memory of a database shares one created_at, so recency weighs
    # them alike on both sides.
    await _seed(client, single)
    await _seed(citus_client, sharded)
    for body in QUERIES:
        texts, scores, count = await _ranking(client, single, body)
        assert texts, body
        sharded_texts, sharded_scores, sharded_count = await _ranking(citus_client, sharded, body)
        assert (sharded_texts, sharded_count) == (texts, count), body
        assert sharded_scores == pytest.approx(scores, rel=1e-6), body


async def test_threads_and_context_work_on_citus(
    citus_client: AsyncClient, citus_settings: Settings
) -> None:
    tenant = new_tenant()
    headers = bearer(citus_settings, tenant, "alice")
    await _seed(citus_client, headers)
    created = await citus_client.post("/v1/users/me/threads", headers=headers, json={})
    assert created.status_code == 201, created.text
    thread_id = created.json()["id"]
    appended = await citus_client.post(
        f"/v1/users/me/threads/{thread_id}/messages",
        headers=headers,
        json={
            "messages": [
                {"role": "user", "content": "Any hiking plans this summer?"},
                {"role": "assistant", "content": "The alps, as every year."},
            ]
        },
    )
    assert appended.status_code == 201, appended.text
    patched = await citus_client.patch(
        "/v1/users/me/profile",
        headers=headers,
        json=[{"op": "add", "path": "/city", "value": "Lisbon"}],
    )
    assert patched.status_code == 200, patched.text

    response = await citus_client.post(
        "/v1/users/me/context",
        headers=headers,
        json={"query": "hiking in the mountains", "thread_id": thread_id},
    )
    assert response.status_code == 200, response.text
    block = response.json()["text"]
    assert "hiking in the alps" in block
    assert "Lisbon" in block
    assert "Any hiking plans this summer?" in block


async def test_another_tenant_cannot_read_a_memory_through_the_api(
    citus_client: AsyncClient, citus_settings: Settings
) -> None:
    owner = bearer(citus_settings, new_tenant(), "alice")
    created = await citus_client.post(
        "/v1/users/me/memories", headers=owner, json={"text": "Keeps a spare key under the mat"}
    )
    assert created.status_code == 201, created.text
    memory_id = created.json()["id"]
    stranger = bearer(citus_settings, new_tenant(), "alice")
    assert_problem(
        await citus_client.get(f"/v1/users/me/memories/{memory_id}", headers=stranger),
        404,
        "NOT_FOUND",
    )
    deleted = await citus_client.delete(f"/v1/users/me/memories/{memory_id}", headers=owner)
    assert deleted.status_code == 204
    assert_problem(
        await citus_client.get(f"/v1/users/me/memories/{memory_id}", headers=owner),
        404,
        "NOT_FOUND",
    )


async def test_a_users_pending_jobs_name_their_threads_on_citus(
    citus_client: AsyncClient,
    citus_settings: Settings,
    citus_runtime_engine: AsyncEngine,
) -> None:
    """The job listing joins the coordinator's queue with a distributed table (the thread, by
    its key), and lists only the user's own jobs."""
    tenant = new_tenant()
    alice = bearer(citus_settings, tenant, "alice")
    created = await citus_client.post("/v1/users/me/threads", headers=alice, json={})
    assert created.status_code == 201, created.text
    thread_id = uuid.UUID(created.json()["id"])
    sessions = create_sessionmaker(citus_runtime_engine)
    try:
        async with tenant_transaction(sessions, tenant) as session:
            await enqueue_thread_summary(session, tenant, thread_id)
        listed = await citus_client.get("/v1/users/me/jobs", headers=alice)
        assert listed.status_code == 200, listed.text
        assert [(job["thread_id"], job["user_id"]) for job in listed.json()["pending"]] == [
            (str(thread_id), "alice")
        ]
        others = await citus_client.get(
            "/v1/users/me/jobs", headers=bearer(citus_settings, tenant, "bob")
        )
        assert others.status_code == 200, others.text
        assert others.json()["pending"] == []
    finally:
        async with citus_runtime_engine.begin() as connection:
            await connection.execute(
                text("DELETE FROM pgqueuer WHERE convert_from(payload, 'UTF8') LIKE :tenant"),
                {"tenant": f"%{tenant}%"},
            )


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value)


async def _history(client: AsyncClient, headers: dict[str, str], path: str) -> list[Any]:
    response = await client.get(f"{path}/history", headers=headers)
    assert response.status_code == 200, response.text
    events: list[dict[str, Any]] = response.json()["items"]
    times = [_time(event["created_at"]) for event in events]
    assert times == sorted(times) and len(set(times)) == len(times)
    return [(event["action"], event["old_text"], event["new_text"]) for event in events]


async def test_a_memorys_changes_are_timed_and_listed_in_the_order_they_were_made_on_citus(
    citus_client: AsyncClient,
    citus_settings: Settings,
    citus_runtime_engine: AsyncEngine,
    citus_owner_engine: AsyncEngine,
) -> None:
    """Each change of a memory reads its time once it holds the memory's lock, in a statement
    of no table, and writes it as a value: Citus takes it in the UPDATE of a distributed table
    (where it refuses `clock_timestamp()`), and a change that waited comes after one made
    meanwhile. Every kind of change: a keyed PUT, a PATCH of the text and of the lifecycle, a
    DELETE, a procedure slot replaced."""
    tenant = new_tenant()
    alice = bearer(citus_settings, tenant, "alice")
    keyed, key = "/v1/users/me/keyed-memories", {"kind": "semantic", "key": "home"}
    created = await citus_client.put(
        keyed, headers=alice, params=key, json={"text": "Alice lives in Porto."}
    )
    assert created.status_code == 201, created.text
    path = f"/v1/users/me/memories/{created.json()['id']}"

    async with tenant_transaction(create_sessionmaker(citus_runtime_engine), tenant) as session:
        # The key's lock, as another put of it holds it: the put below waits for it.
        await MemoryRepository(session, tenant).lock_store_key(
            Owner.user("alice"), "semantic", None, "home"
        )
        putting = asyncio.create_task(
            citus_client.put(
                keyed, headers=alice, params=key, json={"text": "Alice lives in Lisbon."}
            )
        )
        assert await waiting_locks(citus_owner_engine, 1) >= 1
        patched = await citus_client.patch(
            path, headers=alice, json={"text": "Alice lives in Braga."}
        )
        assert patched.status_code == 200, patched.text
        assert not putting.done()
    put = await putting
    assert put.status_code == 200, put.text
    assert _time(put.json()["updated_at"]) > _time(patched.json()["updated_at"])
    for lifecycle in ("superseded", "confirmed"):
        changed = await citus_client.patch(path, headers=alice, json={"lifecycle": lifecycle})
        assert changed.status_code == 200, changed.text
    assert (await citus_client.delete(path, headers=alice)).status_code == 204
    assert await _history(citus_client, alice, path) == [
        ("add", None, "Alice lives in Porto."),
        ("update", "Alice lives in Porto.", "Alice lives in Braga."),
        ("update", "Alice lives in Braga.", "Alice lives in Lisbon."),
        ("supersede", "Alice lives in Lisbon.", "Alice lives in Lisbon."),
        ("update", "Alice lives in Lisbon.", "Alice lives in Lisbon."),
        ("delete", "Alice lives in Lisbon.", None),
    ]

    for style in ("Be kind.", "Be brief."):
        slots = await citus_client.put(
            "/v1/users/me/procedures", headers=alice, json={"style": style}
        )
        assert slots.status_code == 200, slots.text
    listed = await citus_client.get(
        "/v1/users/me/memories", headers=alice, params={"lifecycle": "superseded"}
    )
    [replaced] = listed.json()["items"]
    assert await _history(citus_client, alice, f"/v1/users/me/memories/{replaced['id']}") == [
        ("add", None, "Be kind."),
        ("supersede", "Be kind.", "Be brief."),
    ]


async def test_a_threads_messages_and_changes_are_timed_in_the_order_they_were_made_on_citus(
    citus_app: FastAPI, citus_client: AsyncClient, citus_settings: Settings
) -> None:
    """An append reads its messages' time once it holds the thread, in a statement of no table,
    and writes it as values: Citus takes them in the INSERT of a distributed table, and the
    thread's `updated_at` in its UPDATE; so does a change of the thread. A transaction that
    began before another's append but took the thread after it comes after it."""
    tenant = new_tenant()
    alice = bearer(citus_settings, tenant, "alice")
    created = await citus_client.post("/v1/users/me/threads", headers=alice, json={})
    assert created.status_code == 201, created.text
    path = f"/v1/users/me/threads/{created.json()['id']}"
    thread = uuid.UUID(created.json()["id"])
    principal = Principal(tenant_id=tenant, subject="alice", kind="user", credential="jwt")

    async with unit_of_work(citus_app.state.mneme, principal) as first:
        first_began = await transaction_start(first.session)
        # Sent after the transaction above began, and holding the thread before it does.
        second = await citus_client.post(
            f"{path}/messages",
            headers=alice,
            json={"messages": [{"role": "user", "content": f"Second {n}."} for n in (1, 2)]},
        )
        assert second.status_code == 201, second.text
        assert _time(second.json()["items"][0]["created_at"]) > first_began
        threads = first.get(thread_service)
        await threads.append(
            "alice", thread, [MessageIn(role="user", content=f"First {n}.") for n in (1, 2)]
        )
        await threads.update("alice", thread, ThreadUpdate(title="Plans"))

    listed = await citus_client.get(f"{path}/messages", headers=alice)
    assert listed.status_code == 200, listed.text
    stored = listed.json()["items"]
    assert [m["content"] for m in stored] == ["Second 1.", "Second 2.", "First 1.", "First 2."]
    times = [_time(m["created_at"]) for m in stored]
    assert times == sorted(times) and len(set(times)) == len(times)
    read = (await citus_client.get(path, headers=alice)).json()
    assert read["title"] == "Plans"
    assert _time(read["last_message_at"]) == times[-1]
    assert _time(read["updated_at"]) > times[-1]


async def test_a_profiles_changes_are_timed_in_the_order_they_were_made_on_citus(
    citus_app: FastAPI, citus_client: AsyncClient, citus_settings: Settings
) -> None:
    """A profile patch reads its time once it holds the profile, and writes it as a value,
    which Citus takes in the UPDATE of a distributed table: a patch whose transaction began
    before another's but took the profile after it comes after it."""
    tenant = new_tenant()
    alice = {**bearer(citus_settings, tenant, "alice"), "Content-Type": "application/json"}
    principal = Principal(tenant_id=tenant, subject="alice", kind="user", credential="jwt")
    setting = ProfilePatch.model_validate([{"op": "add", "path": "/pet", "value": "Comet"}])

    async with unit_of_work(citus_app.state.mneme, principal) as first:
        first_began = await transaction_start(first.session)
        second = await citus_client.patch(
            "/v1/users/me/profile",
            headers=alice,
            json=[{"op": "add", "path": "/city", "value": "Porto"}],
        )
        assert second.status_code == 200, second.text
        held = (await citus_client.get("/v1/users/me/profile", headers=alice)).json()
        assert _time(held["updated_at"]) > first_began
        await first.get(profile_service).patch(Owner.user("alice"), setting.root, None)
    patched = (await citus_client.get("/v1/users/me/profile", headers=alice)).json()
    assert patched["profile"] == {"city": "Porto", "pet": "Comet"}
    assert _time(patched["updated_at"]) > _time(held["updated_at"])


async def test_a_purge_redacts_the_organizations_memories_from_the_users_threads_on_citus(
    citus_client: AsyncClient, citus_settings: Settings
) -> None:
    """The redaction locks those memories, then writes the time it read after the locks as a
    value (`updated_at`), which Citus takes in an UPDATE of a distributed table."""
    tenant = new_tenant()
    service = bearer(citus_settings, tenant, "backend", service=True)
    admin = bearer(citus_settings, tenant, "root", admin=True)
    thread = await citus_client.post("/v1/users/alice/threads", headers=service, json={})
    assert thread.status_code == 201, thread.text
    org = await citus_client.post(
        "/v1/org/memories",
        headers=admin,
        json={"text": "The offsite is in Porto.", "source_thread_id": thread.json()["id"]},
    )
    assert org.status_code == 201, org.text

    purged = await citus_client.delete("/v1/admin/users/alice", headers=admin)
    assert purged.status_code == 200, purged.text
    assert purged.json()["redacted"] == {"memory (org provenance)": 1}
    kept = (await citus_client.get(f"/v1/org/memories/{org.json()['id']}", headers=admin)).json()
    assert kept["source_thread_id"] is None
    assert _time(kept["updated_at"]) > _time(org.json()["updated_at"])
