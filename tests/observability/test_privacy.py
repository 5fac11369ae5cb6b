"""Nothing a user wrote reaches a log line or an exported span at the default log level: a full
scenario stores distinctive words everywhere a user can write, then every captured log line and
every exported span (names, attributes, events, links) is searched for them."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict

from httpx import AsyncClient

from service.config import Settings
from tests.conftest import bearer
from tests.fixtures.factories import start_thread
from tests.fixtures.openai_server import FakeOpenAIServer
from tests.observability.conftest import CapturedLines, flush_spans
from tests.observability.otlp_receiver import OtlpReceiver

MEMORY_TEXT = "Quetzalfjord marmalade recipe uses 7 cardamom pods"
EDITED_TEXT = "Quetzalfjord marmalade now uses 9 cardamom pods"
MESSAGE_TEXT = "My neighbour Brontravex keeps ferrets named Oolong"
PROFILE_VALUE = "Vixmorrow Plumtree"
QUERY_TEXT = "cardamom Quetzalfjord"
CATEGORY = "zzqx-pantry"
REJECTED_TEXT = "Wrenquillion"


async def test_stored_words_credentials_and_queries_never_reach_logs_or_spans(
    traced_client: AsyncClient,
    settings: Settings,
    tenant: str,
    receiver: OtlpReceiver,
    log_lines: CapturedLines,
    telemetry_llm: FakeOpenAIServer,
) -> None:
    client = traced_client
    headers = bearer(settings, tenant, "eve")
    admin = bearer(settings, tenant, "root", admin=True)
    secrets = [MEMORY_TEXT, EDITED_TEXT, MESSAGE_TEXT, PROFILE_VALUE, QUERY_TEXT, CATEGORY]
    secrets += [
        REJECTED_TEXT,
        headers["Authorization"].split()[1],
        admin["Authorization"].split()[1],
    ]

    created = await client.post(
        "/v1/users/me/memories", headers=headers, json={"text": MEMORY_TEXT, "category": CATEGORY}
    )
    assert created.status_code == 201, created.text
    edited = await client.patch(
        f"/v1/users/me/memories/{created.json()['id']}", headers=headers, json={"text": EDITED_TEXT}
    )
    assert edited.status_code == 200, edited.text
    listed = await client.get(f"/v1/users/me/memories?category={CATEGORY}", headers=headers)
    assert listed.status_code == 200
    profile = await client.patch(
        "/v1/users/me/profile",
        headers={**headers, "Content-Type": "application/json-patch+json"},
        json=[{"op": "add", "path": "/nickname", "value": PROFILE_VALUE}],
    )
    assert profile.status_code == 200, profile.text
    searched = await client.post(
        "/v1/users/me/memories/search", headers=headers, json={"query": QUERY_TEXT}
    )
    assert searched.status_code == 200
    context = await client.post(
        "/v1/users/me/context", headers=headers, json={"query": QUERY_TEXT, "format": "both"}
    )
    assert PROFILE_VALUE in context.text and EDITED_TEXT in context.text
    refused = await client.post(
        "/v1/users/me/memories", headers=headers, json={"text": 5, "kind": REJECTED_TEXT}
    )
    assert refused.status_code == 422

    key = await client.post("/v1/admin/api-keys", headers=admin, json={"name": "backend"})
    assert key.status_code == 201, key.text
    api_key = str(key.json()["key"])
    secrets.append(api_key)
    with_key = await client.get(
        "/v1/users/eve/memories", headers={"Authorization": f"Bearer {api_key}"}
    )
    assert with_key.status_code == 200

    # The write path: a turn goes through the job queue to the model, which fails once (the
    # failure is logged) and then answers.
    telemetry_llm.fail_next = 1
    thread_id = await start_thread(client, headers)
    appended = await client.post(
        f"/v1/users/me/threads/{thread_id}/messages",
        headers=headers,
        json={
            "messages": [
                {"role": "user", "content": MESSAGE_TEXT},
                {"role": "assistant", "content": "Noted."},
            ]
        },
    )
    assert appended.status_code == 201
    for _ in range(200):
        if any("attempt 1 failed" in line for line in log_lines.lines):
            break
        await asyncio.sleep(0.05)
    telemetry_llm.fail_next = 0
    # The words did reach the model and the failure was logged: the search below is meaningful.
    assert any(MESSAGE_TEXT in r.user for r in telemetry_llm.requests)
    assert any("attempt 1 failed" in line for line in log_lines.lines)

    flush_spans()
    spans = json.dumps([asdict(span) for span in receiver.spans])
    logs = "\n".join(log_lines.lines)
    assert tenant in spans and tenant in logs
    for secret in secrets:
        assert secret not in spans, secret
        assert secret not in logs, secret
