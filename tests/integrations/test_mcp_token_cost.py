"""What the MCP tools cost a model in tokens (cl100k_base, the service's own counter): the tool
list a host sends with every conversation, and the results a model reads. Each budget is
the measured cost plus a little room; a change that grows them fails here."""

from __future__ import annotations

import json
from typing import Any

from httpx import AsyncClient

from service.config import Settings
from service.kit.token_counting import count_tokens
from tests.conftest import bearer
from tests.integrations.test_mcp_input_edges import MCP_HEADERS, call_tool

TOOL_LIST_BUDGET = 2_300
"""Six tools with their descriptions, input and output schemas (measured 2,210; 8.3k when the
output schemas were the REST bodies')."""
RECALL_3_HITS_BUDGET = 185
"""Three hits with their ids, texts, labels and scores (measured 168; ~620 when a hit carried
every REST field and all its component scores)."""
CONTEXT_BUDGET = 80
"""The block for the same three memories, the text a model reads (measured 70)."""

MEMORIES = [
    "Prefers window seats on long flights.",
    "Is allergic to shellfish.",
    "Flies to Lisbon every spring for a conference.",
]


def tokens(value: Any) -> int:
    return count_tokens(value if isinstance(value, str) else json.dumps(value))


async def test_the_tool_list_stays_within_its_token_budget(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    response = await client.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={**bearer(settings, tenant, "ada"), **MCP_HEADERS},
    )
    assert response.status_code == 200, response.text
    tools = response.json()["result"]["tools"]
    assert len(tools) == 6
    assert tokens(tools) <= TOOL_LIST_BUDGET, tokens(tools)


async def test_a_three_hit_recall_and_a_context_block_stay_within_their_token_budgets(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    batch = {"items": [{"text": text, "category": "travel"} for text in MEMORIES]}
    stored = await client.post("/v1/users/me/memories/batch", json=batch, headers=headers)
    assert stored.status_code == 201, stored.text

    recalled = await call_tool(client, headers, "recall", {"query": "flights", "limit": 3})
    assert not recalled["isError"]
    assert len(recalled["structuredContent"]["hits"]) == 3
    [text] = recalled["content"]
    # The model reads the same document the structured content is, and nothing null.
    assert json.loads(text["text"]) == recalled["structuredContent"]
    assert "null" not in text["text"]
    assert tokens(text["text"]) <= RECALL_3_HITS_BUDGET, tokens(text["text"])

    context = await call_tool(client, headers, "get_context", {"query": "flights"})
    assert not context["isError"]
    [block] = context["content"]
    assert "Lisbon" in block["text"]
    assert tokens(block["text"]) <= CONTEXT_BUDGET, tokens(block["text"])
