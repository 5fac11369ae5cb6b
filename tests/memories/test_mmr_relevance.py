"""MMR's relevance is the fused ranking's final score: `mmr_lambda` 1 is the plain search's order,
and what the fusion ranks first for a day or a speaker the question names stays first in a
search with MMR and in a context block (which always uses MMR)."""

from __future__ import annotations

from typing import Any

from httpx import AsyncClient

from service.config import Settings
from tests.conftest import bearer
from tests.memories.sessions import new_source_thread

LEASE = "Cara signed the lease for the flat on Rua Augusta."
# One memory of the day asked about; the others are days on other dates, whose words are closer
# to "What did Cara do" than the lease's.
DAYS = [
    (LEASE, "2023-05-07T10:00:00Z"),
    ("What a day: Cara went to the cinema and then to a concert.", "2023-02-01T10:00:00Z"),
    ("Cara spent the whole day at the beach with friends.", "2023-08-11T10:00:00Z"),
    ("Cara had a busy day at work and went to the gym.", "2023-09-20T10:00:00Z"),
    ("Cara visited her parents for the day.", "2023-10-03T10:00:00Z"),
]
DATED_QUESTION = "What did Cara do on 7 May 2023?"

BENS = "I started learning an instrument last month!"
# The same conversation: two participants saying the same words (differing in punctuation only,
# so neither is a duplicate of the other), a day and a half apart.
SPOKEN = [
    ("Ada", "I started learning an instrument last month.", "2024-03-01T08:00:00Z"),
    ("Ben", BENS, "2024-03-02T20:00:00Z"),
    ("Ada", "We should go hiking when the weather is better", "2024-03-01T08:00:01Z"),
    ("Ben", "The weather has been awful all week", "2024-03-02T20:00:01Z"),
]
SPEAKER_QUESTION = "What instrument did Ben start learning?"


async def remember(
    client: AsyncClient, headers: dict[str, str], items: list[dict[str, Any]]
) -> None:
    response = await client.post(
        "/v1/users/me/memories/batch", headers=headers, json={"items": items}
    )
    assert response.status_code == 201, response.text


async def seed(client: AsyncClient, headers: dict[str, str]) -> None:
    await remember(
        client,
        headers,
        [{"kind": "episodic", "text": text, "event_at": at} for text, at in DAYS],
    )
    thread = await new_source_thread(client, headers)
    await remember(
        client,
        headers,
        [
            {
                "kind": "episodic",
                "text": text,
                "speaker": speaker,
                "source_thread_id": thread,
                "event_at": said_at,
            }
            for speaker, text, said_at in SPOKEN
        ],
    )
    await remember(
        client,
        headers,
        [
            {"text": "Cara is allergic to peanuts."},
            {"text": "Cara prefers window seats on long flights."},
            {"text": "Ben plays the piano every evening."},
        ],
    )


async def hit_texts(client: AsyncClient, headers: dict[str, str], **body: Any) -> list[str]:
    response = await client.post("/v1/users/me/memories/search", headers=headers, json=body)
    assert response.status_code == 200, response.text
    return [hit["memory"]["text"] for hit in response.json()["hits"]]


async def block_texts(client: AsyncClient, headers: dict[str, str], **body: Any) -> list[str]:
    response = await client.post("/v1/users/me/context", headers=headers, json=body)
    assert response.status_code == 200, response.text
    return [item["text"] for s in response.json()["sections"] for item in s["items"]]


async def test_mmr_at_lambda_one_is_the_plain_order(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "cara")
    await seed(client, headers)
    for query in (
        DATED_QUESTION,
        SPEAKER_QUESTION,
        "piano",
        "instrument",
        "what does Cara like",
        "a day out",
    ):
        for limit in (1, 3, 5, 11):
            plain = await hit_texts(client, headers, query=query, limit=limit)
            relevance_only = await hit_texts(
                client, headers, query=query, limit=limit, mmr_lambda=1
            )
            assert relevance_only == plain, (query, limit)


async def test_the_day_a_question_names_stays_first_with_mmr_and_in_the_block(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "cara")
    await seed(client, headers)
    assert (await hit_texts(client, headers, query=DATED_QUESTION, limit=3))[0] == LEASE
    for mmr_lambda in (1.0, 0.7, 0.5):
        for limit in (1, 3, 20):
            hits = await hit_texts(
                client, headers, query=DATED_QUESTION, limit=limit, mmr_lambda=mmr_lambda
            )
            assert hits[0] == LEASE, (mmr_lambda, limit)
    block = await block_texts(
        client, headers, query=DATED_QUESTION, k_episodic=3, include=["episodes"]
    )
    assert LEASE in block


async def test_the_speaker_a_question_names_stays_first_with_mmr_and_in_the_block(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "cara")
    await seed(client, headers)
    assert (await hit_texts(client, headers, query=SPEAKER_QUESTION, limit=3))[0] == BENS
    for mmr_lambda in (1.0, 0.7):
        hits = await hit_texts(
            client, headers, query=SPEAKER_QUESTION, limit=3, mmr_lambda=mmr_lambda
        )
        assert hits[0] == BENS, mmr_lambda
    block = await block_texts(
        client, headers, query=SPEAKER_QUESTION, k_episodic=2, include=["episodes"]
    )
    assert BENS in block
