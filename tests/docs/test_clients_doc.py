"""The examples of docs/clients.md, run as written against a live server: the Python ones
with the names their surroundings give them (a token, a thread, your own model call), and
every line of "Request bodies" sent as it is written."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from httpx import AsyncClient
from mneme import Mneme
from mneme_client import AuthenticatedClient

from benchmarks.server import RunningServer
from service.config import Settings
from tests.conftest import bearer, new_tenant
from tests.docs.snippets import Snippet, at, run_python_fragment, snippets

DOCUMENT = "docs/clients.md"
_REQUEST = re.compile(r"^(GET|POST|PUT|PATCH|DELETE)\s+(\S+)\s+(.*)$")


def python_examples() -> list[Snippet]:
    return snippets(DOCUMENT, "python")


def token_of(settings: Settings, tenant: str, user: str) -> str:
    return bearer(settings, tenant, user)["Authorization"].removeprefix("Bearer ")


def scripted_user(*lines: str) -> Callable[[str], str]:
    """`input()` for a loop example: the user types `lines`, then an empty line (the end)."""
    typed: Iterator[str] = iter([*lines, ""])

    def typing_in(_prompt: str = "") -> str:
        return next(typed)

    return typing_in


def your_model(*, system: str, user: str) -> str:
    """The reader's own LLM call in the loop examples: an answer that names what it got."""
    return f"An answer to {user!r}, with {len(system)} characters of memory."


async def thread_messages(client: AsyncClient, headers: dict[str, str], title: str) -> list[str]:
    threads = (await client.get("/v1/users/me/threads", headers=headers)).json()["items"]
    [thread] = [t for t in threads if t["title"] == title]
    listed = await client.get(f"/v1/users/me/threads/{thread['id']}/messages", headers=headers)
    return [f"{m['role']}: {m['content']}" for m in listed.json()["items"]]


async def test_the_three_calls_remember_build_context_and_record_a_turn(
    live_server: RunningServer, settings: Settings, client: AsyncClient
) -> None:
    three_calls = python_examples()[0].replaced(at(live_server.base_url))
    tenant = new_tenant()
    headers = bearer(settings, tenant, "ada")
    thread = (await client.post("/v1/users/me/threads", json={}, headers=headers)).json()
    names = await run_python_fragment(
        three_calls,
        {
            "TOKEN": token_of(settings, tenant, "ada"),
            "thread_id": thread["id"],
            "text": "Find me a flight to Lisbon on Friday.",
            "last_reply": "Which day suits you?",
        },
    )
    assert "Prefers window seats." in names["block"].text
    assert "Prefers window seats." in names["turn"].context.text
    memories = (await client.get("/v1/users/me/memories", headers=headers)).json()["items"]
    assert [(m["text"], m["metadata"]) for m in memories] == [
        ("Prefers window seats.", {"source": "onboarding"})
    ]
    listed = await client.get(f"/v1/users/me/threads/{thread['id']}/messages", headers=headers)
    assert [(m["role"], m["content"]) for m in listed.json()["items"]] == [
        ("assistant", "Which day suits you?"),
        ("user", "Find me a flight to Lisbon on Friday."),
    ]


async def test_the_layer_loop_records_every_turn_with_the_previous_reply(
    live_server: RunningServer, settings: Settings, client: AsyncClient
) -> None:
    loop = python_examples()[1]
    tenant = new_tenant()
    async with Mneme(live_server.base_url, token=token_of(settings, tenant, "bo")) as mneme:
        await run_python_fragment(
            loop,
            {
                "mneme": mneme,
                "input": scripted_user("Hi!", "Plan my weekend."),
                "call_model": your_model,
            },
        )
    recorded = await thread_messages(client, bearer(settings, tenant, "bo"), "Support chat")
    assert recorded[0] == "user: Hi!"
    assert recorded[1].startswith("assistant: An answer to 'Hi!'")
    assert recorded[2] == "user: Plan my weekend."
    assert len(recorded) == 3


async def test_the_generated_client_loop_records_every_turn(
    live_server: RunningServer, settings: Settings, client: AsyncClient
) -> None:
    loop = python_examples()[2].replaced(at(live_server.base_url))
    tenant = new_tenant()
    await run_python_fragment(
        loop,
        {
            "TOKEN": token_of(settings, tenant, "cy"),
            "input": scripted_user("Hello.", "What did I say?"),
            "call_model": your_model,
        },
    )
    recorded = await thread_messages(client, bearer(settings, tenant, "cy"), "Support chat")
    assert recorded[0] == "user: Hello."
    assert recorded[1].startswith("assistant: An answer to 'Hello.'")
    assert recorded[2] == "user: What did I say?"
    assert len(recorded) == 3


async def test_the_etag_example_changes_what_it_read(
    live_server: RunningServer, settings: Settings, client: AsyncClient
) -> None:
    guarded_edit = python_examples()[3]
    tenant = new_tenant()
    headers = bearer(settings, tenant, "di")
    created = await client.post(
        "/v1/users/me/memories", json={"text": "Prefers window seats."}, headers=headers
    )
    memory_id = created.json()["id"]
    mneme = AuthenticatedClient(
        base_url=live_server.base_url, token=token_of(settings, tenant, "di")
    )
    names = await run_python_fragment(guarded_edit, {"mneme": mneme, "memory_id": memory_id})
    assert names["changed"].status_code == 200
    stored = await client.get(f"/v1/users/me/memories/{memory_id}", headers=headers)
    assert stored.json()["text"] == "Prefers aisle seats."


def documented_requests() -> list[tuple[str, str, Any]]:
    """Each request of "Request bodies": method, path, body (continuation lines joined)."""
    [block] = snippets(DOCUMENT, "text", "requests")
    requests: list[tuple[str, str, str]] = []
    for line in block.code.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        request = _REQUEST.match(line)
        if request:
            requests.append((request[1], request[2], request[3]))
        else:
            method, path, body = requests[-1]
            requests[-1] = (method, path, body + line.strip())
    return [(method, path, body) for method, path, body in requests]


async def test_every_documented_request_body_is_accepted_in_order(
    settings: Settings, client: AsyncClient
) -> None:
    tenant = new_tenant()
    user = bearer(settings, tenant, "ed")
    admin = bearer(settings, tenant, "root", admin=True)
    created: dict[str, str] = {}
    requests = documented_requests()
    assert len(requests) >= 12
    profile_media_types = iter(["application/json-patch+json", "application/json"])
    for method, path, written_body in requests:
        collection = "threads" if "/threads" in path else "memories"
        body = written_body.replace("{id}", created.get("threads", ""))
        path = path.replace("{id}", created.get(collection, "{id}"))
        content_type = (
            next(profile_media_types) if path.endswith("/profile") else "application/json"
        )
        response = await client.request(
            method,
            path,
            content=body,
            headers={
                **(admin if path.startswith("/v1/admin/") else user),
                "Content-Type": content_type,
            },
        )
        assert response.status_code < 300, f"{method} {path} {written_body}: {response.text}"
        if method == "POST" and path.endswith(("/memories", "/threads")):
            created.setdefault(path.rsplit("/", 1)[1], response.json()["id"])

    # What the requests left: the edited memory, the profile after both patches, the thread's
    # two messages, and a search that found the seat preference.
    memory = await client.get(f"/v1/users/me/memories/{created['memories']}", headers=user)
    assert memory.json()["text"] == "Prefers aisle seats."
    profile = (await client.get("/v1/users/me/profile", headers=user)).json()
    assert profile["profile"] == {"city": "Porto"}
    messages = await client.get(f"/v1/users/me/threads/{created['threads']}/messages", headers=user)
    assert [m["content"] for m in messages.json()["items"]] == [
        "I moved to Lisbon.",
        "Book a window seat.",
    ]
