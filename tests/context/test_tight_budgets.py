"""What a block keeps when its budget is tight or its memories long."""

from __future__ import annotations

import json

from httpx import AsyncClient

from service.config import CONTEXT_BUDGET_MIN_TOKENS, Settings
from service.context.service import HEADER
from tests.conftest import assert_problem, bearer
from tests.context.test_context_api import context, section
from tests.fixtures.factories import remember_all, start_thread


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
