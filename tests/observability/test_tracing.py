"""Spans as a collector receives them over OTLP/HTTP: one server span per request, the stage
tree of a search with one score event per hit, the context block's sections, and jobs linked
to the request that enqueued them."""

from __future__ import annotations

import asyncio
from typing import Any

from httpx import AsyncClient

from service.config import Settings
from service.providers.local_embedder import MODEL_NAME
from tests.conftest import bearer
from tests.fixtures.factories import start_thread
from tests.observability.conftest import flush_spans
from tests.observability.otlp_receiver import OtlpReceiver, ReceivedSpan

CORPUS = [
    "Prefers window seats on long flights",
    "Allergic to shellfish and peanuts",
    "Flies to Lisbon every spring for a conference",
    "Keeps a vegetable garden on the balcony",
]
INCOMING_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
INCOMING_SPAN = "00f067aa0ba902b7"


async def seed(client: AsyncClient, headers: dict[str, str]) -> None:
    response = await client.post(
        "/v1/users/me/memories/batch",
        headers=headers,
        json={"items": [{"text": t} for t in CORPUS]},
    )
    assert response.status_code == 201, response.text


def only(spans: list[ReceivedSpan], name: str) -> ReceivedSpan:
    matching = [span for span in spans if span.name == name]
    assert len(matching) == 1, [span.name for span in spans]
    return matching[0]


def path_to_root(spans: list[ReceivedSpan], span: ReceivedSpan) -> list[str]:
    by_id = {s.span_id: s for s in spans}
    names = []
    current: ReceivedSpan | None = span
    while current is not None:
        names.append(current.name)
        current = by_id.get(current.parent_span_id)
    return names


async def test_a_search_is_one_server_span_with_its_stages_and_one_score_event_per_hit(
    traced_client: AsyncClient, settings: Settings, tenant: str, receiver: OtlpReceiver
) -> None:
    headers = bearer(settings, tenant, "alice")
    await seed(traced_client, headers)
    response = await traced_client.post(
        "/v1/users/me/memories/search",
        headers={**headers, "traceparent": f"00-{INCOMING_TRACE}-{INCOMING_SPAN}-01"},
        json={"query": "which seat on a flight", "mmr_lambda": 0.7, "limit": 3},
    )
    assert response.status_code == 200, response.text
    hits: list[dict[str, Any]] = response.json()["hits"]
    assert hits
    flush_spans()

    spans = receiver.trace(INCOMING_TRACE)
    servers = [span for span in spans if span.kind == "SERVER"]
    assert len(servers) == 1
    (server,) = servers
    # The caller's traceparent is continued, not replaced.
    assert server.parent_span_id == INCOMING_SPAN
    assert server.name == "POST /v1/users/{user_id}/memories/search"
    assert server.attributes["http.route"] == "/v1/users/{user_id}/memories/search"
    assert server.attributes["http.request.method"] == "POST"
    assert server.attributes["http.response.status_code"] == 200
    assert server.attributes["mneme.request_id"] == response.headers["x-request-id"]
    assert server.attributes["mneme.tenant_id"] == tenant
    assert server.resource["service.name"] == "mneme"

    search = only(spans, "memories.search")
    assert path_to_root(spans, only(spans, "auth"))[-1] == server.name
    for stage in ("memories.fusion_query", "memories.mmr"):
        assert path_to_root(spans, only(spans, stage))[1:3] == [
            "memories.search",
            "fastapi.endpoint",
        ]
    # The question is embedded while the transaction begins: from the route's dependencies.
    assert path_to_root(spans, only(spans, "memories.embed_query"))[1:] == [
        "fastapi.dependencies",
        server.name,
    ]
    embedding = only(spans, f"embeddings {MODEL_NAME}")
    assert path_to_root(spans, embedding)[1] == "memories.embed_query"
    assert embedding.attributes["gen_ai.operation.name"] == "embeddings"
    assert embedding.attributes["gen_ai.embeddings.dimension.count"] == 384
    fusion = only(spans, "memories.fusion_query")
    assert fusion.attributes["db.system.name"] == "postgresql"
    assert fusion.attributes["db.query.summary"] == "HYBRID_SEARCH_SQL"
    assert fusion.attributes["db.response.returned_rows"] >= len(hits)

    events = [attributes for name, attributes in search.events if name == "mneme.search.hit"]
    assert [event["mneme.memory.id"] for event in events] == [hit["memory"]["id"] for hit in hits]
    assert search.attributes["mneme.search.hits"] == len(hits)
    for position, (event, hit) in enumerate(zip(events, hits, strict=True), start=1):
        scores = hit["scores"]
        assert event["mneme.hit.position"] == position
        assert event["mneme.score.final"] == scores["final_score"]
        assert event["mneme.score.fused"] == scores["fused_score"]
        assert event["mneme.score.recency"] == scores["recency_factor"]
        assert event["mneme.score.confidence"] == scores["confidence_factor"]
        assert event["mneme.score.mmr"] == scores["mmr_score"]
        assert event.get("mneme.score.vector_rank") == scores["vector_rank"]
        assert event.get("mneme.score.vector_cosine") == scores["vector_cosine"]
        assert event.get("mneme.score.lexical_rank") == scores["lexical_rank"]
        assert event.get("mneme.score.lexical") == scores["lexical_score"]


async def test_a_request_without_traceparent_starts_its_own_trace_with_one_server_span(
    traced_client: AsyncClient, settings: Settings, tenant: str, receiver: OtlpReceiver
) -> None:
    response = await traced_client.get(
        "/v1/users/me/memories", headers=bearer(settings, tenant, "bo")
    )
    assert response.status_code == 200
    flush_spans()
    request_spans = [
        span
        for span in receiver.spans
        if span.attributes.get("mneme.request_id") == response.headers["x-request-id"]
    ]
    assert [span.kind for span in request_spans] == ["SERVER"]
    assert request_spans[0].parent_span_id == ""


async def test_the_context_span_has_an_event_per_section_and_per_chosen_item(
    traced_client: AsyncClient, settings: Settings, tenant: str, receiver: OtlpReceiver
) -> None:
    headers = bearer(settings, tenant, "cy")
    await seed(traced_client, headers)
    response = await traced_client.post(
        "/v1/users/me/context",
        headers={**headers, "traceparent": f"00-{'c' * 32}-{INCOMING_SPAN}-01"},
        json={"query": "what should I book for the flight", "format": "json"},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    flush_spans()
    build = only(receiver.trace("c" * 32), "context.build")
    sections = {
        a["mneme.context.section"]: a for n, a in build.events if n == "mneme.context.section"
    }
    items = [a for n, a in build.events if n == "mneme.context.item"]
    assert set(sections) == {section["name"] for section in body["sections"]}
    for section in body["sections"]:
        event = sections[section["name"]]
        assert event["mneme.context.section.items"] == len(section["items"])
        assert event["mneme.context.section.tokens"] == sum(i["tokens"] for i in section["items"])
        assert event["mneme.context.section.omitted"] == section["omitted"]
    assert [
        (a["mneme.context.section"], a.get("mneme.context.item.id"), a["mneme.context.item.tokens"])
        for a in items
    ] == [
        (section["name"], item["id"], item["tokens"])
        for section in body["sections"]
        for item in section["items"]
    ]
    assert build.attributes["mneme.context.tokens"] == body["token_count"]


async def test_an_extraction_job_links_to_the_request_that_enqueued_it(
    traced_client: AsyncClient, settings: Settings, tenant: str, receiver: OtlpReceiver
) -> None:
    headers = bearer(settings, tenant, "dee")
    thread_id = await start_thread(traced_client, headers)
    trace_id = "d" * 32
    response = await traced_client.post(
        f"/v1/users/me/threads/{thread_id}/messages",
        headers={**headers, "traceparent": f"00-{trace_id}-{INCOMING_SPAN}-01"},
        json={
            "messages": [
                {"role": "user", "content": "I moved to Porto last week"},
                {"role": "assistant", "content": "Noted."},
            ]
        },
    )
    assert response.status_code == 201, response.text

    enqueue: ReceivedSpan | None = None
    job: ReceivedSpan | None = None
    for _ in range(300):
        flush_spans()
        sends = [s for s in receiver.trace(trace_id) if s.name == "send memory_extraction"]
        enqueue = sends[0] if sends else None
        jobs = [
            s
            for s in receiver.spans
            if s.name == "process memory_extraction"
            and enqueue is not None
            and (enqueue.trace_id, enqueue.span_id) in s.links
        ]
        job = jobs[0] if jobs else None
        if job is not None:
            break
        await asyncio.sleep(0.05)
    assert enqueue is not None and job is not None
    assert enqueue.kind == "PRODUCER"
    assert job.kind == "CONSUMER"
    # The job's run is a trace of its own, linked (not parented) to the request.
    assert job.trace_id != trace_id
    assert job.parent_span_id == ""
    assert job.attributes["messaging.message.id"] == enqueue.attributes["messaging.message.id"]
    chat = [s for s in receiver.trace(job.trace_id) if s.name.startswith("chat ")]
    assert chat, [s.name for s in receiver.trace(job.trace_id)]
    assert chat[0].kind == "CLIENT"
    assert chat[0].attributes["gen_ai.operation.name"] == "chat"
    assert chat[0].attributes["gen_ai.request.model"] == "fake-chat-model"
    assert chat[0].attributes["gen_ai.usage.input_tokens"] >= 0


async def test_a_replayed_idempotent_write_says_so_on_its_claim_span(
    traced_client: AsyncClient, settings: Settings, tenant: str, receiver: OtlpReceiver
) -> None:
    headers = {**bearer(settings, tenant, "gus"), "Idempotency-Key": "write-1"}
    replays = []
    for trace_id in ("e" * 32, "f" * 32):
        response = await traced_client.post(
            "/v1/users/me/memories",
            headers={**headers, "traceparent": f"00-{trace_id}-{INCOMING_SPAN}-01"},
            json={"text": "Prefers aisle seats"},
        )
        assert response.status_code == 201, response.text
        flush_spans()
        claim = only(receiver.trace(trace_id), "idempotency.claim")
        replays.append(claim.attributes["mneme.idempotency.replay"])
    assert replays == [False, True]


async def test_an_mcp_tool_call_is_one_server_span_with_the_call_nested_under_it(
    traced_client: AsyncClient, settings: Settings, tenant: str, receiver: OtlpReceiver
) -> None:
    trace_id = "a1" * 16
    response = await traced_client.post(
        "/mcp",
        headers={
            **bearer(settings, tenant, "hal"),
            "accept": "application/json, text/event-stream",
            "traceparent": f"00-{trace_id}-{INCOMING_SPAN}-01",
        },
        json={
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "recall", "arguments": {"query": "which seat on a flight"}},
        },
    )
    assert response.status_code == 200, response.text
    assert not response.json()["result"]["isError"]
    flush_spans()

    spans = receiver.trace(trace_id)
    servers = [span for span in spans if span.kind == "SERVER"]
    assert [server.name for server in servers] == ["POST /mcp"], [
        (span.name, span.kind) for span in spans
    ]
    call = only(spans, "tools/call recall")
    assert call.kind == "INTERNAL"
    assert path_to_root(spans, call)[-1] == "POST /mcp"
    assert call.attributes["mcp.method.name"] == "tools/call"
    assert call.attributes["gen_ai.tool.name"] == "recall"
    assert call.attributes["jsonrpc.request.id"] == "7"
    assert path_to_root(spans, only(spans, "memories.search"))[1] == "tools/call recall"


async def test_an_mcp_tool_error_marks_its_call_span_failed(
    traced_client: AsyncClient, settings: Settings, tenant: str, receiver: OtlpReceiver
) -> None:
    trace_id = "b2" * 16
    response = await traced_client.post(
        "/mcp",
        headers={
            **bearer(settings, tenant, "hal"),
            "accept": "application/json, text/event-stream",
            "traceparent": f"00-{trace_id}-{INCOMING_SPAN}-01",
        },
        json={
            "jsonrpc": "2.0",
            "id": 8,
            "method": "tools/call",
            "params": {"name": "forget", "arguments": {"memory_id": "not-an-id"}},
        },
    )
    assert response.status_code == 200, response.text
    assert response.json()["result"]["isError"]
    flush_spans()

    call = only(receiver.trace(trace_id), "tools/call forget")
    assert call.attributes["error.type"] == "tool_error"
    assert call.status_code == 2  # ERROR
