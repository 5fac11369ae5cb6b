"""Extraction through the real API: appends queue a durable pass, the background worker asks
the local OpenAI-compatible server (through the `openai` client) and the resolver writes.

Seed 003's use cases: new facts on an empty profile, a contradiction superseding the old fact
with history, an unrelated fact added without dropping others, org policy only for admins; and
quarantine, near duplicates, a malformed reply or a model outage (nothing written, retried).
"""

from __future__ import annotations

import itertools
import json
from datetime import datetime

from httpx import AsyncClient

from service.config import Settings
from tests.conftest import assert_problem, bearer
from tests.extraction.conftest import (
    alias_of,
    eventually,
    extraction_requests,
    fact,
    jobs,
    say,
    shown_facts,
    wait_for_passes,
)
from tests.fixtures.factories import memories, remember, remember_texts, start_thread
from tests.fixtures.openai_server import (
    MODEL,
    FakeOpenAIServer,
    RecordedRequest,
    Reply,
    completion,
    extraction,
)


async def test_new_facts_on_an_empty_profile_carry_their_provenance(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alex")
    fresh_llm.reply = lambda request: extraction(
        [
            fact(
                "User works on fraud detection.",
                category="knowledge",
                subject="job",
                evidence="I work on fraud detection",
            ),
            fact(
                "User is based in Berlin.",
                subject="home_city",
                confidence=0.9,
                evidence="I'm based in Berlin",
            ),
            fact(
                "User wants regulation articles cited when compliance is explained.",
                category="behavior",
                subject="compliance_citations",
                evidence="Always cite regulation articles",
            ),
        ],
        episode="Alex introduced themselves and asked for cited compliance explanations.",
        profile=[
            {
                "key": "home_city",
                "value": "Berlin",
                "confidence": 0.95,
                "evidence": "I'm based in Berlin",
            }
        ],
    )
    thread_id = await start_thread(llm_client, headers)
    user_message, _ = await say(
        llm_client,
        headers,
        thread_id,
        "I'm Alex. I work on fraud detection and I'm based in Berlin. "
        "Always cite regulation articles when you explain compliance.",
        "Thanks, Alex — I'll cite the regulation articles.",
    )
    [finished] = await wait_for_passes(llm_client, headers, 1)

    [request] = extraction_requests(fresh_llm)
    assert shown_facts(request) == []
    assert 'Always use "user"' in request.system  # no org writes for this principal
    said_at = datetime.fromisoformat(user_message["created_at"])
    facts = await memories(llm_client, headers, kind="semantic")
    assert {m["text"] for m in facts} == {
        "User works on fraud detection.",
        "User is based in Berlin.",
        "User wants regulation articles cited when compliance is explained.",
    }
    for memory in facts:
        assert memory["lifecycle"] == "confirmed" and not memory["needs_review"]
        assert memory["source_thread_id"] == thread_id
        assert memory["source_message_ids"] == [user_message["id"]]
        # Dated by the message it was said in, as the episode is by its window's last.
        assert memory["event_at"] is not None
        assert datetime.fromisoformat(memory["event_at"]) == said_at
        assert memory["evidence"] and memory["evidence"] in user_message["content"]
        assert memory["metadata"]["extractor_model"] == MODEL
        assert memory["metadata"]["origin"] == "extraction"
    [episode] = await memories(llm_client, headers, kind="episodic")
    assert episode["category"] == "episode"
    assert episode["text"].startswith("Alex introduced themselves")
    assert len(episode["source_message_ids"]) == 2
    profile = (await llm_client.get("/v1/users/me/profile", headers=headers)).json()
    assert profile["profile"]["home_city"] == "Berlin"
    assert finished["mode"] == "llm" and finished["trigger"] == "every_turn"
    assert (finished["from_seq"], finished["through_seq"]) == (0, 1)
    assert len(finished["written"]) == 4 and finished["profile_keys"] == ["home_city"]


async def test_a_contradiction_supersedes_the_old_fact_with_history(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alex")
    dark = await remember(
        llm_client,
        headers,
        text="User wants the product UI in dark mode only.",
        category="preference",
    )

    def reply(request: RecordedRequest) -> Reply:
        return extraction(
            [
                fact(
                    "User wants the product UI in light mode everywhere.",
                    category="preference",
                    subject="ui_theme",
                    evidence="I now need light mode everywhere",
                    supersedes=[alias_of(request, "dark mode only")],
                )
            ]
        )

    fresh_llm.reply = reply
    thread_id = await start_thread(llm_client, headers)
    await say(
        llm_client,
        headers,
        thread_id,
        "Change of plans: I now need light mode everywhere. Dark mode strains my eyes. "
        "Forget the dark-only rule.",
        "Understood — light mode from now on.",
    )
    [finished] = await wait_for_passes(llm_client, headers, 1)
    assert finished["superseded"] == 1

    [light] = await memories(llm_client, headers, kind="semantic")
    assert light["text"] == "User wants the product UI in light mode everywhere."
    old = (await llm_client.get(f"/v1/users/me/memories/{dark['id']}", headers=headers)).json()
    assert old["lifecycle"] == "superseded"
    assert old["superseded_by"] == light["id"]
    assert old["invalid_at"] is not None
    history = (
        await llm_client.get(f"/v1/users/me/memories/{dark['id']}/history", headers=headers)
    ).json()["items"]
    assert [e["action"] for e in history] == ["add", "supersede"]
    supersede = history[-1]
    assert supersede["old_text"] == dark["text"] and supersede["new_text"] == light["text"]
    assert supersede["changes"]["reason"] == "explicit"
    assert supersede["actor"] == "mneme:extractor"
    found = await llm_client.post(
        "/v1/users/me/memories/search", headers=headers, json={"query": "UI mode"}
    )
    assert [hit["memory"]["id"] for hit in found.json()["hits"]] == [light["id"]]


async def test_an_unrelated_fact_is_added_without_dropping_others(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alex")
    theme = await remember(
        llm_client,
        headers,
        text="User wants the product UI in light mode everywhere.",
        category="preference",
        metadata={"subject": "ui_theme"},
    )
    style = await remember(
        llm_client,
        headers,
        text="User prefers terse answers.",
        category="preference",
        metadata={"subject": "answer_style"},
    )
    fresh_llm.reply = lambda request: extraction(
        [
            fact(
                "User's team on-call Slack channel is #fraud-ops, for urgent issues.",
                subject="oncall_channel",
                evidence="my team's on-call Slack channel is #fraud-ops",
            ),
            # Same subject as `style`, not named: the replace category supersedes it anyway.
            fact(
                "User prefers detailed answers.",
                category="preference",
                subject="answer_style",
                evidence="longer answers",
            ),
        ]
    )
    thread_id = await start_thread(llm_client, headers)
    await say(
        llm_client,
        headers,
        thread_id,
        "Also: my team's on-call Slack channel is #fraud-ops — ping there for urgent issues. "
        "And I'd like longer answers.",
    )
    await wait_for_passes(llm_client, headers, 1)
    live = {m["text"] for m in await memories(llm_client, headers, kind="semantic")}
    assert live == {
        theme["text"],
        "User's team on-call Slack channel is #fraud-ops, for urgent issues.",
        "User prefers detailed answers.",
    }
    old_style = await llm_client.get(f"/v1/users/me/memories/{style['id']}", headers=headers)
    assert old_style.json()["lifecycle"] == "superseded"


async def test_org_policy_is_written_only_when_the_appending_principal_is_an_admin(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    rule = "Org-wide rule: any pricing answer must end with 'Prices may change without notice.'"
    # The model proposes org memory for everyone; only the principal's roles decide.
    fresh_llm.reply = lambda request: extraction(
        [
            fact(
                "Pricing answers must end with 'Prices may change without notice.'",
                scope="org",
                category="policy",
                subject="pricing_disclaimer",
                evidence="any pricing answer must end with",
            )
        ]
    )
    alice = bearer(settings, tenant, "alice")
    thread_id = await start_thread(llm_client, alice)
    await say(llm_client, alice, thread_id, rule, "Recorded.")
    [refused] = await wait_for_passes(llm_client, alice, 1)
    assert refused["dropped"] == {"org_not_allowed": 1} and refused["written"] == []
    org = await llm_client.get("/v1/org/memories", headers=alice)
    assert org.json()["items"] == []
    assert await memories(llm_client, alice) == []

    admin = bearer(settings, tenant, "root", admin=True)
    thread_id = await start_thread(llm_client, admin)
    await say(llm_client, admin, thread_id, rule, "Recorded as organization-wide policy.")
    [written] = await wait_for_passes(llm_client, admin, 1)
    assert 'Use "org" only' in extraction_requests(fresh_llm)[-1].system
    [policy] = (await llm_client.get("/v1/org/memories", headers=alice)).json()["items"]
    assert written["written"] == [policy["id"]]
    assert (policy["scope"], policy["user_id"], policy["category"]) == ("org", None, "policy")
    assert policy["source_thread_id"] == thread_id


async def test_a_fact_below_the_quarantine_level_waits_for_review_and_a_weak_one_is_dropped(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alex")
    fresh_llm.reply = lambda request: extraction(
        [
            fact("User probably enjoys jazz.", confidence=0.75),
            fact("User might own a boat.", confidence=0.5),
        ]
    )
    thread_id = await start_thread(llm_client, headers)
    await say(llm_client, headers, thread_id, "I had jazz on all evening while sailing.")
    [finished] = await wait_for_passes(llm_client, headers, 1)
    assert finished["dropped"] == {"low_confidence": 1}
    [jazz] = await memories(llm_client, headers, kind="semantic")
    assert (jazz["text"], jazz["lifecycle"], jazz["needs_review"]) == (
        "User probably enjoys jazz.",
        "proposed",
        True,
    )
    assert jazz["confidence"] == 0.75


async def test_a_near_duplicate_is_no_new_memory(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alex")
    known = await remember(
        llm_client, headers, text="User prefers dark mode.", category="preference"
    )
    fresh_llm.reply = lambda request: extraction(
        [fact("The user prefers dark mode", category="preference", subject="ui_theme")]
    )
    thread_id = await start_thread(llm_client, headers)
    await say(llm_client, headers, thread_id, "As you know, dark mode is what I like.")
    [finished] = await wait_for_passes(llm_client, headers, 1)
    assert (finished["written"], finished["reconfirmed"], finished["superseded"]) == ([], 1, 0)
    assert [m["id"] for m in await memories(llm_client, headers)] == [known["id"]]


async def test_a_malformed_reply_writes_nothing_and_the_pass_is_retried(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alex")
    fresh_llm.mode = "malformed"
    thread_id = await start_thread(llm_client, headers)
    await say(llm_client, headers, thread_id, "I live in Lisbon and cycle to work every day.")
    failed = await eventually(llm_client, headers, lambda body: bool(body["failures"]))
    [failure] = failed["failures"]
    assert failure["kind"] == "memory_extraction" and failure["thread_id"] == thread_id
    assert failure["attempt"] == 1 and not failure["final"]
    assert "LLMUnavailable" in failure["error"] and "Lisbon" not in failure["error"]
    assert failed["passes"] == []
    assert await memories(llm_client, headers) == []

    fresh_llm.mode = "summarize"
    fresh_llm.reply = lambda request: extraction([fact("User lives in Lisbon.")])
    [finished] = await wait_for_passes(llm_client, headers, 1)
    assert (finished["from_seq"], finished["through_seq"]) == (0, 1)
    assert [m["text"] for m in await memories(llm_client, headers)] == ["User lives in Lisbon."]
    assert len(extraction_requests(fresh_llm)) >= 2


async def test_while_the_model_is_down_turns_are_kept_and_the_pass_runs_when_it_returns(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alex")
    fresh_llm.mode = "fail"
    thread_id = await start_thread(llm_client, headers)
    await say(llm_client, headers, thread_id, "My daughter's name is Ada.", "Lovely name!")
    listed = await llm_client.get(f"/v1/users/me/threads/{thread_id}/messages", headers=headers)
    assert [m["content"] for m in listed.json()["items"]] == [
        "My daughter's name is Ada.",
        "Lovely name!",
    ]
    down = await eventually(llm_client, headers, lambda body: bool(body["failures"]))
    assert "HTTP 500" in down["failures"][0]["error"]
    [pending] = (await jobs(llm_client, headers))["pending"]
    assert pending["kind"] == "memory_extraction" and pending["thread_id"] == thread_id

    fresh_llm.mode = "summarize"
    fresh_llm.reply = lambda request: extraction([fact("User's daughter is named Ada.")])
    await wait_for_passes(llm_client, headers, 1)
    assert [m["text"] for m in await memories(llm_client, headers)] == [
        "User's daughter is named Ada."
    ]


async def test_an_append_returns_while_the_model_is_still_thinking(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alex")
    fresh_llm.hold_back()
    fresh_llm.reply = lambda request: extraction([fact("User collects vinyl records.")])
    thread_id = await start_thread(llm_client, headers)
    await say(llm_client, headers, thread_id, "I collect vinyl records, mostly jazz.")
    await say(llm_client, headers, thread_id, "Any shop tips in Porto?", "Try Matéria Prima.")
    running = await eventually(
        llm_client, headers, lambda body: "picked" in [j["status"] for j in body["pending"]]
    )
    assert running["passes"] == []
    fresh_llm.release()
    done = await eventually(
        llm_client,
        headers,
        lambda body: (
            not body["pending"] and max((p["through_seq"] for p in body["passes"]), default=-1) == 3
        ),
    )
    # Passes never overlap: each starts where the previous one ended.
    spans = sorted((p["from_seq"], p["through_seq"]) for p in done["passes"])
    assert spans[0][0] == 0
    assert all(later[0] == earlier[1] + 1 for earlier, later in itertools.pairwise(spans))


async def test_the_jobs_endpoint_is_per_user_and_per_tenant(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    alice = bearer(settings, tenant, "alice")
    fresh_llm.reply = lambda request: extraction([fact("User plays the cello.")])
    thread_id = await start_thread(llm_client, alice)
    await say(llm_client, alice, thread_id, "I play the cello in an amateur orchestra.")
    await wait_for_passes(llm_client, alice, 1)

    bob = bearer(settings, tenant, "bob")
    assert (await jobs(llm_client, bob))["passes"] == []
    for method, path in (
        ("GET", "/v1/users/alice/jobs"),
        ("POST", "/v1/users/alice/memories/compact"),
    ):
        assert_problem(await llm_client.request(method, path, headers=bob), 404, "NOT_FOUND")
    other_tenant = bearer(settings, tenant + "-other", "alice")
    assert (await jobs(llm_client, other_tenant))["passes"] == []
    assert_problem(await llm_client.get("/v1/admin/jobs", headers=alice), 403, "FORBIDDEN")

    service = bearer(settings, tenant, "agent-backend", service=True)
    as_service = await jobs(llm_client, service, user="alice")
    assert [p["thread_id"] for p in as_service["passes"]] == [thread_id]
    admin = await llm_client.get(
        "/v1/admin/jobs", headers=bearer(settings, tenant, "root", admin=True)
    )
    assert admin.status_code == 200, admin.text
    assert admin.json()["extraction"] == "llm" and admin.json()["strategy"] == "every_turn"


async def test_compaction_consolidates_facts_and_supersedes_the_originals(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alex")
    likes = await remember(llm_client, headers, text="User likes Python.", category="knowledge")
    daily = await remember(
        llm_client,
        headers,
        text="User writes Python every day.",
        category="knowledge",
        confidence=0.9,
    )
    berlin = await remember(llm_client, headers, text="User lives in Berlin.", category="context")

    def reply(request: RecordedRequest) -> Reply:
        assert request.schema_name == "memory_compaction"
        ids = {line["text"]: line["id"] for line in map(json.loads, request.user.splitlines())}
        return completion(
            json.dumps(
                {
                    "facts": [
                        {
                            "text": "User likes Python and writes it every day.",
                            "category": "knowledge",
                            "subject": "python",
                            "sources": [
                                ids["User likes Python."],
                                ids["User writes Python every day."],
                            ],
                        },
                        {
                            "text": "User enjoys hiking.",
                            "category": "context",
                            "subject": "",
                            "sources": [],
                        },
                    ]
                }
            )
        )

    fresh_llm.reply = reply
    response = await llm_client.post("/v1/users/me/memories/compact", headers=headers)
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["status"] == "compacted" and result["read"] == 3
    assert result["dropped"] == {"no_sources": 1}
    [merged] = result["written"]
    assert merged["confidence"] == 0.9 and merged["lifecycle"] == "confirmed"
    assert merged["metadata"]["compacted_from"] == [likes["id"], daily["id"]]
    assert sorted(result["superseded"]) == sorted([likes["id"], daily["id"]])
    live = {m["id"] for m in await memories(llm_client, headers)}
    assert live == {merged["id"], berlin["id"]}
    for original in (likes, daily):
        old = await llm_client.get(f"/v1/users/me/memories/{original['id']}", headers=headers)
        assert old.json()["superseded_by"] == merged["id"]
        history = await llm_client.get(
            f"/v1/users/me/memories/{original['id']}/history", headers=headers
        )
        assert history.json()["items"][-1]["changes"]["reason"] == "compacted"


async def test_a_consolidated_fact_happened_when_the_latest_of_its_facts_did(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alex")
    dated = {
        "User likes tea.": "2026-03-01T09:00:00Z",
        "User drinks green tea.": "2026-05-01T18:30:00Z",
        "User runs.": "2026-02-01T07:00:00Z",
        "User runs daily.": None,
        "User has a cat.": None,
        "User's cat is named Tom.": None,
    }
    for text, event_at in dated.items():
        await remember(llm_client, headers, text=text, category="context", event_at=event_at)
    consolidations = {
        "User likes tea, green tea most.": ["User likes tea.", "User drinks green tea."],
        "User runs every day.": ["User runs.", "User runs daily."],
        "User has a cat named Tom.": ["User has a cat.", "User's cat is named Tom."],
    }

    def reply(request: RecordedRequest) -> Reply:
        ids = {line["text"]: line["id"] for line in map(json.loads, request.user.splitlines())}
        facts = [
            {
                "text": text,
                "category": "context",
                "subject": "",
                "sources": [ids[source] for source in sources],
            }
            for text, sources in consolidations.items()
        ]
        return completion(json.dumps({"facts": facts}))

    fresh_llm.reply = reply
    response = await llm_client.post("/v1/users/me/memories/compact", headers=headers)
    assert response.status_code == 200, response.text
    written = {m["text"]: m["event_at"] for m in response.json()["written"]}
    assert written == {
        "User likes tea, green tea most.": "2026-05-01T18:30:00Z",
        # Of the facts that carry a time: when the other happened is not known.
        "User runs every day.": "2026-02-01T07:00:00Z",
        "User has a cat named Tom.": None,
    }
    listed = {m["text"]: m["event_at"] for m in await memories(llm_client, headers)}
    assert listed == written


async def test_compaction_of_some_categories_reads_the_facts_of_those_categories(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    # More older facts of another category than a compaction reads: the two goals come after
    # them, and a compaction of goals must still find them.
    headers = bearer(settings, tenant, "alex")
    older = [f"User visited city number {n}." for n in range(settings.compaction_max_facts)]
    await remember_texts(llm_client, headers, older, category="context")
    goals = [
        await remember(llm_client, headers, text=text, category="goal")
        for text in ("User wants to run a marathon.", "User trains for a marathon in spring.")
    ]
    shown: list[str] = []

    def reply(request: RecordedRequest) -> Reply:
        lines = [json.loads(line) for line in request.user.splitlines()]
        shown.extend(line["text"] for line in lines)
        return completion(
            json.dumps(
                {
                    "facts": [
                        {
                            "text": "User trains to run a marathon in spring.",
                            "category": "goal",
                            "subject": "marathon",
                            "sources": [line["id"] for line in lines],
                        }
                    ]
                }
            )
        )

    fresh_llm.reply = reply
    response = await llm_client.post(
        "/v1/users/me/memories/compact", headers=headers, json={"categories": ["goal"]}
    )
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["status"] == "compacted" and result["read"] == 2
    assert sorted(shown) == sorted(goal["text"] for goal in goals)
    assert sorted(result["superseded"]) == sorted(goal["id"] for goal in goals)


async def test_compaction_writes_nothing_when_the_model_fails(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alex")
    for text in ("User likes tea.", "User drinks green tea."):
        await remember(llm_client, headers, text=text, category="preference")
    fresh_llm.mode = "fail"
    response = await llm_client.post("/v1/users/me/memories/compact", headers=headers)
    problem = assert_problem(response, 503, "LLM_UNAVAILABLE")
    assert int(response.headers["Retry-After"]) == problem["retry_after_seconds"] > 0
    assert len(await memories(llm_client, headers)) == 2


async def test_compaction_needs_an_llm(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alex")
    response = await client.post(
        "/v1/users/me/memories/compact", headers=headers, json={"categories": ["preference"]}
    )
    assert_problem(response, 409, "COMPACTION_DISABLED")


async def test_a_fact_takes_the_name_of_the_participant_who_said_it(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "group-chat")
    fresh_llm.reply = lambda request: extraction(
        [
            fact("Priya trains for the Berlin marathon.", evidence="training for Berlin"),
            fact("The group meets on Fridays.", evidence="meet on Fridays"),
        ]
    )
    thread_id = await start_thread(llm_client, headers)
    response = await llm_client.post(
        f"/v1/users/me/threads/{thread_id}/messages",
        headers=headers,
        json={
            "messages": [
                {"role": "user", "name": "Priya", "content": "I'm training for Berlin."},
                {"role": "user", "name": "Tom", "content": "Let's meet on Fridays then."},
                {"role": "assistant", "content": "Sounds good."},
            ]
        },
    )
    assert response.status_code == 201, response.text
    await wait_for_passes(llm_client, headers, 1)
    speakers = {
        m["text"]: m["speaker"] for m in await memories(llm_client, headers, kind="semantic")
    }
    # Each fact is said by one participant: the one whose message holds its evidence.
    assert speakers == {
        "Priya trains for the Berlin marathon.": "Priya",
        "The group meets on Fridays.": "Tom",
    }
