"""What a block keeps when its budget is tight or its memories long: the best item that fits,
and the next candidates in place of those that do not."""

from __future__ import annotations

import json

from httpx import AsyncClient

from service.config import CONTEXT_BUDGET_MIN_TOKENS, Settings
from service.context.service import HEADER, TITLES
from service.kit.token_counting import count_tokens
from tests.conftest import assert_problem, bearer
from tests.context.test_context_api import context, section
from tests.fixtures.factories import remember_all, start_thread

SERVICES = [
    ("billing", "postgres"),
    ("search", "elasticsearch"),
    ("mailer", "smtp relay"),
    ("thumbnails", "object storage"),
    ("scheduler", "redis"),
]


def log_part(service: str, dependency: str) -> str:
    """A part of a pasted log as turn storage kept it when a part was a memory's longest text:
    close to 4,000 characters, over a thousand tokens."""
    lines: list[str] = []
    n = 0
    while sum(len(line) + 1 for line in lines) < 3800:
        lines.append(
            f"2026-12-07 10:{n % 60:02d}:00 ERROR {service} worker {n} failed: "
            f"cannot reach the {dependency} at {service}-{n}.internal, retrying"
        )
        n += 1
    return "\n".join(lines)


async def test_episodes_too_long_for_the_budget_make_way_for_the_next_candidates(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """Parts of a long log are the best episodes for the question and none fits: the section
    shows the smaller episodes after them rather than nothing, and counts the parts it passed
    over as omitted."""
    headers = bearer(settings, tenant, "ada")
    parts = await remember_all(
        client,
        headers,
        *({"text": log_part(*names), "kind": "episodic"} for names in SERVICES),
    )
    smaller = await remember_all(
        client,
        headers,
        {"text": "Ada moved to Lisbon in October 2026.", "kind": "episodic"},
        {"text": "Ada had a call with the platform team.", "kind": "episodic"},
    )
    query = "why are the workers failing?"
    roomy = await context(client, headers, query=query, budget_tokens=32_000, include=["episodes"])
    shown = [item["id"] for item in section(roomy, "episodes")["items"]]  # type: ignore[index]
    assert set(shown) <= {part["id"] for part in parts} and len(shown) == 4  # they rank first
    assert all(count_tokens(part["text"]) > 1000 for part in parts)

    tight = await context(client, headers, query=query, budget_tokens=500)

    episodes = section(tight, "episodes")
    assert episodes is not None, tight
    assert {item["id"] for item in episodes["items"]} == {memory["id"] for memory in smaller}
    for item in episodes["items"]:
        assert item["kind"] == "episodic" and item["scores"]["final_score"] > 0
    assert tight["omitted"]["episodes"] == 4  # the four best, passed over for the budget
    assert tight["token_count"] <= 500


async def test_a_budget_below_what_the_preamble_and_a_line_need_is_refused_with_the_minimum(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    await remember_all(client, headers, {"text": "Ada prefers green tea."})
    body = {"query": "tea", "budget_tokens": CONTEXT_BUDGET_MIN_TOKENS - 1}

    response = await client.post("/v1/users/me/context", headers=headers, json=body)

    problem = assert_problem(response, 422, "VALIDATION_FAILED")
    [error] = problem["errors"]
    assert error["loc"] == ["body", "budget_tokens"]
    assert str(CONTEXT_BUDGET_MIN_TOKENS) in error["msg"]
    smallest = await context(client, headers, query="tea", budget_tokens=CONTEXT_BUDGET_MIN_TOKENS)
    assert smallest["text"].startswith(HEADER) and "• Ada prefers green tea." in smallest["text"]


async def test_the_best_fact_that_fits_wins_over_lesser_facts_and_later_sections(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """The facts' share of a tight budget is smaller than the relevant fact: the fact is still
    shown whenever the block can hold it, never a junk fact or unrelated episodes in its place."""
    headers = bearer(settings, tenant, "ada")
    tea = (
        "Ada prefers green tea to coffee: sencha in the morning, jasmine after lunch, and "
        "genmaicha with her Sunday breakfast, always without sugar or milk."
    )
    await remember_all(
        client,
        headers,
        {"text": tea},
        {"text": "ok"},
        *({"text": text, "kind": "episodic"} for text in ("new one", "bump", "lunch at noon")),
    )
    # What the fact costs in a block that shows nothing else.
    alone = count_tokens(f"{HEADER}\n\n## {TITLES['facts']}\n• {tea}")
    assert alone > CONTEXT_BUDGET_MIN_TOKENS
    shown = []
    for budget in range(CONTEXT_BUDGET_MIN_TOKENS, alone + 60, 3):
        result = await context(client, headers, query="tea", budget_tokens=budget)

        assert result["token_count"] <= budget
        if budget >= alone + 2:  # its newline and the separator counted apart
            assert f"• {tea}" in result["text"], (budget, result["text"])
            shown.append(budget)
    assert shown


async def test_a_pasted_newest_turn_is_shown_shortened_before_other_sections_take_a_share(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """A thread whose newest turn is long pasted minified JSON (no space to cut at, so what
    it shows of itself costs all the room it is given): at every budget, down to the
    smallest, the block shows it by its beginning and its end around the marker, and the
    profile and the memories share what it leaves."""
    headers = bearer(settings, tenant, "ada", name="Ada")
    await remember_all(client, headers, {"text": "bump", "kind": "episodic"})
    pasted = json.dumps(
        [
            {"worker": n, "status": "failed", "host": f"host{n}.example.internal"}
            for n in range(300)
        ],
        separators=(",", ":"),
    )
    thread_id = await start_thread(client, headers)
    messages = [
        {"role": "user", "content": "Hello there, I need help with a deployment."},
        {"role": "assistant", "content": "Sure, paste the log."},
        {"role": "user", "content": pasted},
    ]
    url = f"/v1/users/me/threads/{thread_id}/messages"
    appended = await client.post(url, headers=headers, json={"messages": messages})
    newest = appended.json()["items"][-1]["id"]

    for budget in range(CONTEXT_BUDGET_MIN_TOKENS, CONTEXT_BUDGET_MIN_TOKENS + 150, 3):
        result = await context(
            client,
            headers,
            query="why are the workers failing?",
            thread_id=thread_id,
            budget_tokens=budget,
        )

        recent = section(result, "recent")
        assert recent is not None, (budget, result["text"], result["omitted"])
        [*_, shown] = recent["items"]
        assert shown["id"] == newest
        assert shown["text"].startswith(pasted[:8]), shown["text"]
        assert "tokens of this message not shown …]" in shown["text"]
        assert shown["text"] in result["text"] and result["token_count"] <= budget
    assert section(result, "profile") is not None
