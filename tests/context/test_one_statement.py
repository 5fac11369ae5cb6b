"""The context's memory sections come from one fusion statement; each section must hold what
its own statement (the same template over that section's filter alone) would have given."""

from __future__ import annotations

import random
import uuid
from collections.abc import Collection, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from httpx import AsyncClient

from service.auth.owner import Owner
from service.config import Settings
from service.context import dependencies as context_dependencies
from service.memories.filters import MemoryFilter
from service.memories.fusion import FusionRepository, SearchParams, sectioned_search_statement
from service.memories.models import normalise_text
from service.memories.schemas import SearchRequest
from service.memories.search import MemorySearch, SectionHits
from service.services import Services
from tests.conftest import bearer, new_tenant
from tests.context.test_context_api import context
from tests.fixtures.factories import remember_all
from tests.search_params import search_params

WORDS = [
    "hiking",
    "coffee",
    "lisbon",
    "greyhound",
    "piano",
    "sushi",
    "marathon",
    "garden",
    "python",
    "invoice",
    "kyoto",
    "sailing",
    "chess",
    "vegan",
    "budget",
    "flight",
    "museum",
    "cello",
    "winter",
    "espresso",
    "tennis",
    "novel",
    "ramen",
    "bicycle",
]


SECTIONS = ["org", "profile", "procedures", "facts", "episodes", "thread", "recent"]


class SectionBySection(MemorySearch):
    """The search service, but each section through its own fusion statement."""

    async def search_sections(
        self,
        owner: Owner,
        requests: Sequence[SearchRequest],
        *,
        query_embedding: list[float] | None,
        not_only_of_messages: Sequence[Collection[uuid.UUID] | None] | None = None,
        shown_texts: Collection[str] | None = None,
        last_database_work: bool = False,
    ) -> list[SectionHits]:
        leaving_out = not_only_of_messages or [None] * len(requests)
        shown = None if shown_texts is None else set(shown_texts)
        each = []
        for request, messages in zip(requests, leaving_out, strict=True):
            # Each section's own statement, the transaction kept open (no reranker here),
            # leaving out what the sections before it show.
            [found] = await super().search_sections(
                owner,
                [request],
                query_embedding=query_embedding,
                not_only_of_messages=[messages],
                shown_texts=shown,
            )
            each.append(found)
            if shown is not None:
                shown.update(normalise_text(hit.memory.text) for hit in found.hits)
        return each


def section_by_section(services: Services) -> MemorySearch:
    """Built in place of `memory_search` for the context builder of a unit of work."""
    return SectionBySection(
        FusionRepository(services.session, services.tenant_id),
        services.state.vector_columns,
        services.tenant_id,
        services.state.settings,
    )


SPEAKERS = ["Alice", "Bob", "Grace"]


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 8)))


async def seed_corpus(
    client: AsyncClient, settings: Settings, rng: random.Random
) -> tuple[dict[str, str], list[str]]:
    """A tenant with org facts, two users' facts and episodes (some from threads, naming their
    source messages, some dated), and procedures; alice's headers and her thread ids."""
    tenant = new_tenant()
    admin = bearer(settings, tenant, "root", admin=True)
    alice = bearer(settings, tenant, "alice")
    bob = bearer(settings, tenant, "bob")
    now = datetime.now(UTC)
    await remember_all(
        client,
        admin,
        *({"text": sentence(rng), "category": "policy"} for _ in range(rng.randint(0, 25))),
        {"text": sentence(rng)},
        org=True,
    )
    await client.put("/v1/org/procedures", headers=admin, json={"style": sentence(rng)})
    threads = []
    for headers in (alice, bob):
        items: list[dict[str, Any]] = []
        # A message of another of the user's conversations, which some memories also name.
        elsewhere = await client.post("/v1/users/me/threads", headers=headers, json={})
        outside = (
            await client.post(
                f"/v1/users/me/threads/{elsewhere.json()['id']}/messages",
                headers=headers,
                json={"messages": [{"role": "user", "content": "Somewhere else entirely."}]},
            )
        ).json()["items"][0]["id"]
        for _ in range(rng.randint(1, 3)):
            thread_id = await client.post("/v1/users/me/threads", headers=headers, json={})
            thread_id = thread_id.json()["id"]
            messages = (
                await client.post(
                    f"/v1/users/me/threads/{thread_id}/messages",
                    headers=headers,
                    json={
                        "messages": [
                            {"role": rng.choice(["user", "assistant"]), "content": sentence(rng)}
                            for _ in range(rng.randint(2, 12))
                        ]
                    },
                )
            ).json()["items"]
            if headers is alice:
                threads.append(thread_id)
            for message in messages:
                if rng.random() < 0.7:
                    sources = [message["id"]]
                    if rng.random() < 0.2:
                        sources.append(outside)
                    items.append(
                        {
                            "text": f"{message['role']}: {message['content']}",
                            "kind": "episodic",
                            "source_thread_id": thread_id,
                            "source_message_ids": sources,
                        }
                    )
        for _ in range(rng.randint(5, 60)):
            item: dict[str, Any] = {
                "text": sentence(rng),
                "kind": rng.choice(["semantic", "semantic", "episodic"]),
                "confidence": round(rng.uniform(0.3, 1.0), 2),
                "lifecycle": rng.choice(["confirmed", "confirmed", "proposed"]),
            }
            if rng.random() < 0.4:
                item["event_at"] = (now - timedelta(days=rng.uniform(0, 400))).isoformat()
            if rng.random() < 0.5:
                item["speaker"] = rng.choice(SPEAKERS)
            items.append(item)
        rng.shuffle(items)
        for start in range(0, len(items), 100):
            await remember_all(client, headers, *items[start : start + 100])
        await client.put(
            "/v1/users/me/procedures", headers=headers, json={"workflow": sentence(rng)}
        )
    return alice, threads


def same_block(one: dict[str, Any], other: dict[str, Any]) -> None:
    assert one["text"] == other["text"]
    assert one["token_count"] == other["token_count"] and one["omitted"] == other["omitted"]
    assert [s["name"] for s in one["sections"]] == [s["name"] for s in other["sections"]]
    for mine, theirs in zip(one["sections"], other["sections"], strict=True):
        assert [(i["id"], i["text"]) for i in mine["items"]] == [
            (i["id"], i["text"]) for i in theirs["items"]
        ]
        for item, twin in zip(mine["items"], theirs["items"], strict=True):
            # now() moves between the two calls, so recency-decayed scores differ a little.
            for name, value in (item["scores"] or {}).items():
                expected = twin["scores"][name]
                if value is None or expected is None:
                    assert value is expected, name
                else:
                    assert value == pytest.approx(expected, rel=1e-6, abs=1e-12), name


@pytest.mark.parametrize("seed", range(6))
async def test_one_statement_gives_the_block_of_one_statement_per_section(
    client: AsyncClient, settings: Settings, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    rng = random.Random(seed)
    alice, threads = await seed_corpus(client, settings, rng)
    requests = []
    for _ in range(5):
        query = sentence(rng)
        if rng.random() < 0.5:
            # The speaker and date priors are taken per section too.
            query += f" said {rng.choice(SPEAKERS)}"
        if rng.random() < 0.4:
            day = datetime.now(UTC) - timedelta(days=rng.randint(0, 400))
            query += f" on {day.day} {day:%B} {day.year}"
        body: dict[str, Any] = {
            "query": query,
            "budget_tokens": rng.choice([200, 800, 4000]),
            "k_user": rng.choice([0, 2, 4, 10, 45]),
            "k_episodic": rng.choice([0, 3, 4, 20, 50]),
            "k_org": rng.choice([0, 4, 8, 40]),
            "include_proposed": rng.random() < 0.5,
            "mmr_lambda": rng.choice([0.0, 0.5, 0.7, 1.0]),
            "format": "both",
        }
        if rng.random() < 0.6:
            body["thread_id"] = rng.choice(threads)
        if rng.random() < 0.3:
            body["include"] = rng.sample(SECTIONS, rng.randint(1, len(SECTIONS)))
        requests.append(body)
    one_statement = [await context(client, alice, **body) for body in requests]
    with monkeypatch.context() as patched:
        patched.setattr(context_dependencies, "memory_search", section_by_section)
        per_section = [await context(client, alice, **body) for body in requests]
    assert any(block["sections"] for block in one_statement)
    for mine, theirs in zip(one_statement, per_section, strict=True):
        same_block(mine, theirs)


def params(memory_filter: MemoryFilter, **changes: Any) -> SearchParams:
    return search_params(
        memory_filter,
        **{
            "query": "coffee in lisbon",
            "limit": 4,
            "rrf_k": 60,
            "lexical_weight": 0.3,
            "neighbour_weight": 0.1,
            "thread_weight": 0.1,
            "recency_weight": 0.2,
            "confidence_weight": 0.2,
            "half_life_semantic": 365.0,
            "half_life_episodic": 30.0,
            **changes,
        },
    )


def test_sections_that_could_share_a_memory_or_a_ranking_are_refused() -> None:
    alice, org = Owner.user("alice"), Owner.org()
    facts = MemoryFilter.build([alice], kinds=["semantic"])
    episodes = MemoryFilter.build([alice], kinds=["episodic"])
    org_facts = MemoryFilter.build([org], kinds=["semantic"])
    statement = sectioned_search_statement(
        "t", [params(facts), params(episodes, pool=150, limit=50), params(org_facts)]
    )
    assert ":pool_2" in str(statement) and "UNION ALL" in str(statement)
    with pytest.raises(ValueError, match="disjoint"):
        sectioned_search_statement("t", [params(facts), params(MemoryFilter.build([alice]))])
    with pytest.raises(ValueError, match="share everything"):
        sectioned_search_statement("t", [params(facts), params(episodes, query="other")])
