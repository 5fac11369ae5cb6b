"""What the models are sent of a thread is what every replay carries: the extraction and summary
prompts (and the search an extraction pass embeds) hold a message's secrets masked, as the
window does, unless `MNEME_MESSAGE_SECRETS_ON_REPLAY=keep`; and what the write path keeps of
such a message holds neither the secret nor the placeholder standing in for it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from httpx import AsyncClient

from service.config import Settings
from service.embedded_postgres import EmbeddedCluster
from service.kit.secrets import MASK
from service.main import create_app
from tests.conftest import bearer, database_of_its_own
from tests.extraction.conftest import (
    Headers,
    extraction_requests,
    fact,
    llm_settings,
    serve,
    wait_for_passes,
)
from tests.fixtures.factories import memories, start_thread
from tests.fixtures.openai_server import (
    API_KEY,
    EMBEDDINGS_PATH,
    NEW_MESSAGES_HEADING,
    FakeOpenAIServer,
    RecordedRequest,
    Reply,
    completion,
    extraction,
    new_user_messages,
    summary_entries,
)

PASSWORD = "hunter2hunter2"
CARD = "4111 1111 1111 1111"
SECRET_TURN = f"My password is {PASSWORD} and my card is {CARD}. I live in Lisbon."
LOGIN_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "login", "arguments": json.dumps({"password": PASSWORD})},
}


@asynccontextmanager
async def hosted_models(
    cluster: EmbeddedCluster, llm: FakeOpenAIServer, **overrides: Any
) -> AsyncIterator[AsyncClient]:
    """An app whose chat and embedding models are the fake hosted ones (so every text sent to
    a model is recorded), extracting after every turn and summarising every turn, on a
    database of its own (its vectors are the hosted model's)."""
    own = await database_of_its_own(cluster)
    settings = llm_settings(
        cluster,
        llm,
        database_url=own.database_url,
        migration_database_url=own.migration_database_url,
        extraction_strategy="every_turn",
        thread_summary_keep_recent=1,
        thread_messages_buffer_recent_turns=1,
        embedding_provider="openai",
        embedding_openai_base_url=llm.base_url,
        embedding_openai_api_key=API_KEY,
        embedding_openai_send_dimensions=True,
        embedding_openai_max_retries=0,
        **overrides,
    )
    async for client in serve(create_app(settings)):
        yield client


def model_reading_masked_messages(request: RecordedRequest) -> Reply:
    """Summaries as the fake server writes them; for extraction, what a model shown the masked
    message might propose: a fact quoting the text around the placeholder, and a fact, an
    episode and a profile value made of the placeholder itself."""
    if request.schema_name != "memory_extraction":
        return completion(json.dumps({"entries": summary_entries(request)}))
    said = " ".join(new_user_messages(request))
    if "Lisbon" not in said:
        return extraction(
            [fact("User drinks coffee black.", subject="coffee", evidence="coffee black")]
        )
    return extraction(
        [
            fact(
                "User lives in Lisbon.", subject="home_city", evidence=f"{MASK}. I live in Lisbon"
            ),
            fact(f"User's card number is {MASK}.", subject="card", evidence=f"my card is {MASK}"),
        ],
        episode=f"User shared their {MASK} and card.",
        profile=[{"key": "bank_card", "value": MASK, "confidence": 0.99, "evidence": "my card"}],
    )


async def append(
    client: AsyncClient, headers: Headers, thread_id: str, messages: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    response = await client.post(
        f"/v1/users/me/threads/{thread_id}/messages", headers=headers, json={"messages": messages}
    )
    assert response.status_code == 201, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def summaries_through(
    client: AsyncClient, headers: Headers, thread_id: str, end_index: int
) -> list[dict[str, Any]]:
    """The thread's summaries once they cover its messages up to `end_index`."""
    for _ in range(300):
        response = await client.get(f"/v1/users/me/threads/{thread_id}/summaries", headers=headers)
        items: list[dict[str, Any]] = response.json()["items"]
        if max((s["end_index"] for s in items), default=0) >= end_index:
            return items
        await asyncio.sleep(0.05)
    raise AssertionError(f"the summaries never reached message {end_index}: {items}")


def sent(request: RecordedRequest) -> str:
    return json.dumps(request.body, ensure_ascii=False)


async def test_the_models_are_sent_a_messages_secrets_masked_and_nothing_kept_holds_them(
    cluster: EmbeddedCluster, settings: Settings, fresh_llm: FakeOpenAIServer, tenant: str
) -> None:
    fresh_llm.reply = model_reading_masked_messages
    async with hosted_models(cluster, fresh_llm) as client:
        headers = bearer(settings, tenant, "ada")
        thread_id = await start_thread(client, headers)
        first = await append(
            client,
            headers,
            thread_id,
            [
                {"role": "user", "content": SECRET_TURN},
                {"role": "assistant", "content": "", "tool_calls": [LOGIN_CALL]},
                {"role": "user", "content": "Please remember where I live from now on."},
                {"role": "assistant", "content": "I will."},
            ],
        )
        await wait_for_passes(client, headers, 1)
        # A later pass shows the model the earlier messages again, for context.
        second = await append(
            client,
            headers,
            thread_id,
            [
                {"role": "user", "content": "I drink my coffee black every single morning."},
                {"role": "assistant", "content": "Noted."},
            ],
        )
        _, earlier = await wait_for_passes(client, headers, 2)
        summaries = await summaries_through(client, headers, thread_id, 6)
        facts = await memories(client, headers, kind="semantic")
        episodes = await memories(client, headers, kind="episodic")
        profile = (await client.get("/v1/users/me/profile", headers=headers)).json()

    requests = list(fresh_llm.requests)
    for request in requests:
        assert PASSWORD not in sent(request) and CARD not in sent(request), request.path
    first_pass, second_pass = extraction_requests(fresh_llm)
    assert MASK in first_pass.user.split(NEW_MESSAGES_HEADING)[1]
    assert MASK in second_pass.user.split(NEW_MESSAGES_HEADING)[0]
    assert any(r.schema_name == "thread_summary" and MASK in r.user for r in requests)
    # The search for the facts shown beside the messages asked the embedder the masked text.
    assert any(r.path == EMBEDDINGS_PATH and MASK in json.dumps(r.body["input"]) for r in requests)

    assert {m["text"]: m["source_message_ids"] for m in facts} == {
        # Its evidence quotes the message as the model read it: that message alone is its source.
        "User lives in Lisbon.": [first[0]["id"]],
        "User drinks coffee black.": [second[0]["id"]],
    }
    assert earlier["dropped"] == {"secret": 1, "episode:secret": 1, "profile:secret": 1}
    assert episodes == [] and "bank_card" not in profile["profile"]
    for kept in (facts, summaries):
        assert PASSWORD not in str(kept) and CARD not in str(kept)
    assert all(MASK not in m["text"] for m in facts)
    assert MASK in str(summaries)


async def test_replay_configured_to_keep_messages_sends_them_to_the_models_as_sent(
    cluster: EmbeddedCluster, settings: Settings, fresh_llm: FakeOpenAIServer, tenant: str
) -> None:
    async with hosted_models(cluster, fresh_llm, message_secrets_on_replay="keep") as client:
        headers = bearer(settings, tenant, "ada")
        thread_id = await start_thread(client, headers)
        await append(
            client,
            headers,
            thread_id,
            [
                {"role": "user", "content": SECRET_TURN},
                {"role": "assistant", "content": "", "tool_calls": [LOGIN_CALL]},
            ],
        )
        await wait_for_passes(client, headers, 1)
        await summaries_through(client, headers, thread_id, 2)

    [extracting] = extraction_requests(fresh_llm)
    [summarizing] = [r for r in fresh_llm.requests if r.schema_name == "thread_summary"]
    assert SECRET_TURN in extracting.user
    assert SECRET_TURN in summarizing.user and PASSWORD in json.dumps(summarizing.transcript())
