"""The generated Python client, unmodified, through an agent's loop against a live server."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import httpx
from mneme_client import AuthenticatedClient
from mneme_client.api.context import append_turn, build_context
from mneme_client.api.memories import create_memory, search_memories
from mneme_client.api.profile import get_profile, patch_profile
from mneme_client.api.threads import create_thread
from mneme_client.api.users import export_user
from mneme_client.models import (
    ContextRequest,
    MemoryCreate,
    MemoryKind,
    MemoryWritten,
    MessageIn,
    MessageRole,
    PatchAdd,
    Problem,
    ProfilePatchResult,
    ProfileRead,
    SearchRequest,
    SearchResponse,
    ThreadCreate,
    ThreadRead,
    TurnAppend,
    TurnAppended,
    TurnContextOptions,
)

from tests.clients.conftest import LiveServer


def test_an_agent_loop_runs_end_to_end_through_the_generated_client(
    live_server: LiveServer, live_user: tuple[str, str]
) -> None:
    tenant_id, user_id = live_user
    client = AuthenticatedClient(
        base_url=live_server.base_url, token=live_server.token_for(tenant_id, user_id)
    )
    with client:
        written = create_memory.sync(
            user_id,
            client=client,
            body=MemoryCreate(
                text="Prefers window seats on long flights.", kind=MemoryKind.SEMANTIC
            ),
        )
        assert isinstance(written, MemoryWritten) and not written.duplicate

        found = search_memories.sync(
            user_id,
            client=client,
            body=SearchRequest(query="window seat", kinds=[MemoryKind.SEMANTIC]),
        )
        assert isinstance(found, SearchResponse)
        assert written.id in [hit.memory.id for hit in found.hits]

        patched = patch_profile.sync(
            user_id, client=client, body=[PatchAdd(op="add", path="/city", value="Lisbon")]
        )
        assert isinstance(patched, ProfilePatchResult)
        # The other accepted media type, through the client's own HTTP session.
        plain_json = client.get_httpx_client().patch(
            f"/v1/users/{user_id}/profile",
            json=[{"op": "add", "path": "/language", "value": "pt"}],
        )
        assert plain_json.status_code == 200, plain_json.text
        profile = get_profile.sync(user_id, client=client)
        assert isinstance(profile, ProfileRead)
        assert profile.profile["city"] == "Lisbon" and profile.profile["language"] == "pt"

        thread = create_thread.sync(
            user_id, client=client, body=ThreadCreate(title="Trip planning")
        )
        assert isinstance(thread, ThreadRead)
        turn = append_turn.sync(
            user_id,
            thread.id,
            client=client,
            body=TurnAppend(
                messages=[MessageIn(role=MessageRole.USER, content="Book me a seat to Lisbon.")],
                context=TurnContextOptions(budget_tokens=400),
            ),
        )
        assert isinstance(turn, TurnAppended) and len(turn.items) == 1
        assert "window seats" in (turn.context.text or "")

        context = build_context.sync(
            user_id,
            client=client,
            body=ContextRequest(query="seat preference", thread_id=thread.id),
        )
        assert context is not None and not isinstance(context, Problem)
        assert context.token_count > 0

        exported = export_user.sync_detailed(user_id, client=client)
        assert exported.status_code == 200
        records = [json.loads(line) for line in exported.content.decode().splitlines() if line]
        assert str(written.id) in json.dumps(records)


def test_errors_come_back_as_problems_with_their_code_and_location(
    live_server: LiveServer, live_user: tuple[str, str]
) -> None:
    tenant_id, user_id = live_user
    client = AuthenticatedClient(
        base_url=live_server.base_url, token=live_server.token_for(tenant_id, user_id)
    )
    with client:
        refused = create_memory.sync(
            user_id,
            client=client,
            body=MemoryCreate(
                text="Renew the passport.", expires_at=datetime(2000, 1, 1, tzinfo=UTC)
            ),
        )
    assert isinstance(refused, Problem)
    assert (refused.status, refused.code) == (422, "VALIDATION_FAILED")
    # A single-memory create is the body itself: no `items` index in the location.
    assert isinstance(refused.errors, list)
    assert [error.loc for error in refused.errors] == [["body", "expires_at"]]


def test_a_body_sent_without_a_json_content_type_is_a_415_naming_the_media_type(
    live_server: LiveServer, live_user: tuple[str, str]
) -> None:
    tenant_id, user_id = live_user
    response = httpx.post(
        f"{live_server.base_url}/v1/users/{user_id}/memories",
        content=b'{"text": "plain text body"}',
        headers={
            "Authorization": f"Bearer {live_server.token_for(tenant_id, user_id)}",
            "Content-Type": "text/plain",
        },
    )
    assert response.status_code == 415
    assert response.headers["content-type"].startswith("application/problem+json")
    assert "application/json" in response.json()["detail"]
