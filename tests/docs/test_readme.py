"""The README's first session and its Python example, run as written against a live server."""

from __future__ import annotations

import json
from pathlib import Path

from httpx import AsyncClient

from benchmarks.server import RunningServer
from service.config import Settings
from tests.conftest import bearer, new_tenant
from tests.docs.snippets import (
    assert_prints,
    at,
    reader_environment,
    run_python_process,
    run_shell,
    snippets,
)

# The tenant the README's session is written for; each run gets a fresh one in its place, so
# the session meets an empty tenant as a newcomer's does.
DOCUMENTED_TENANT = "acme"


def test_the_readme_walks_through_store_search_context_turn_and_delete() -> None:
    """The walkthrough covers what the README promises a newcomer, in that order."""
    session = "".join(block.code for block in snippets("README.md", "sh", "walkthrough"))
    steps = [
        "mneme token",
        "/memories/batch",
        "/memories/search",
        "/context",
        "/turns",
        "-X DELETE",
    ]
    positions = [session.find(step) for step in steps]
    assert all(position >= 0 for position in positions), dict(zip(steps, positions, strict=True))
    assert positions == sorted(positions)


async def test_the_readme_session_runs_as_written(
    live_server: RunningServer,
    settings: Settings,
    client: AsyncClient,
    tmp_path: Path,
) -> None:
    tenant = new_tenant()
    replacements = {**at(live_server.base_url), DOCUMENTED_TENANT: tenant}
    blocks = [block.replaced(replacements) for block in snippets("README.md", "sh", "walkthrough")]
    outputs = run_shell(blocks, reader_environment(settings), tmp_path)
    for block, output in zip(blocks, outputs, strict=True):
        assert_prints(block, output)
    # `…` may stand for a whole hit: the search's first hit is the one the README shows first.
    [search] = [out for block, out in zip(blocks, outputs, strict=True) if "/search" in block.code]
    assert json.loads(search)["hits"][0]["memory"]["text"] == "Ada prefers green tea to coffee."

    # What the session left behind, as the API sees it: the batch's two memories (the first
    # one was deleted) and the thread with its recorded turn.
    ada = bearer(settings, tenant, "ada")
    memories = (await client.get("/v1/users/me/memories", headers=ada)).json()["items"]
    assert sorted(m["text"] for m in memories) == [
        "Ada is allergic to peanuts.",
        "Ada moved to Lisbon in October 2026.",
    ]
    [thread] = (await client.get("/v1/users/me/threads", headers=ada)).json()["items"]
    messages = await client.get(f"/v1/users/me/threads/{thread['id']}/messages", headers=ada)
    assert [m["content"] for m in messages.json()["items"]] == ["Any snack ideas for my break?"]


async def test_the_readme_python_example_runs(
    live_server: RunningServer, settings: Settings, client: AsyncClient, tmp_path: Path
) -> None:
    [example] = snippets("README.md", "python")
    tenant = new_tenant()
    environment = reader_environment(settings)
    environment["TOKEN"] = bearer(settings, tenant, "ines")["Authorization"].removeprefix("Bearer ")
    printed = run_python_process(example.replaced(at(live_server.base_url)), environment, tmp_path)
    # The block it prints is built for the turn: the stored preference and the message itself.
    assert "Prefers window seats." in printed
    assert "Book me a flight to Lisbon." in printed
    stored = await client.get("/v1/users/me/memories", headers=bearer(settings, tenant, "ines"))
    [memory] = stored.json()["items"]
    assert memory["text"] == "Prefers window seats."
    assert memory["metadata"] == {"source": "onboarding"}
