"""A question that names a time (a day, a week, a month): the words that name it are the date
prior's, not the lexical side's."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from httpx import AsyncClient

from service.config import Settings
from service.memories.dates import query_named_time
from tests.conftest import bearer

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)  # a Monday


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("What did I do on May 16th, 2026?", "May 16th, 2026"),
        ("what happened on the 7th of May, 2023", "7th of May, 2023"),
        ("notes from 2023-05-07", "2023-05-07"),
        ("what happened on 05.07.2023.", "05.07.2023"),
        ("plans for December, 2023?", "December, 2023"),
        ("what did I cook the day before yesterday", "the day before yesterday"),
        ("what did I cook two days ago", "two days ago"),
        ("who called last Tuesday", "last Tuesday"),
        ("what did we do last weekend", "last weekend"),
        ("what did we decide last month", "last month"),
        ("where did we go last June", "last June"),
        ("what did she do last weekend before April 10, 2023", "April 10, 2023"),
    ],
)
def test_the_time_a_question_names_is_the_words_that_name_it(query: str, named: str) -> None:
    found = query_named_time(query, NOW)
    assert found is not None
    assert query[found.start : found.end] == named
    assert named not in found.words_around(query)
    assert found.words_around(query).split() == query.replace(named, " ").split()


def dana_memories(today: date) -> list[dict[str, Any]]:
    """Dana's memories: one event on each of the times the questions below name, events of
    other days whose text says a date, and facts whose words are a date phrase's."""
    last_monday = today - timedelta(days=today.weekday() + 7)

    def at(day: date, hour: int) -> str:
        return datetime(day.year, day.month, day.day, hour, tzinfo=UTC).isoformat()

    return [
        {
            "kind": "episodic",
            "text": "Dana celebrated her wedding anniversary at Belcanto.",
            "event_at": "2025-05-16T20:00:00Z",
        },
        {
            "kind": "episodic",
            "text": "Dana bought a new cello bow in Chiado.",
            "event_at": at(today - timedelta(days=2), 12),
        },
        {
            "kind": "episodic",
            "text": "Dana watched the football derby with Joana.",
            "event_at": at(last_monday + timedelta(days=5), 12),
        },
        {
            "kind": "episodic",
            "text": "Dana repaired the garden fence with her neighbour.",
            "event_at": at(last_monday + timedelta(days=2), 12),
        },
        {
            "kind": "episodic",
            "text": "On 2025-11-19 Dana repotted the basil.",
            "event_at": "2025-11-19T19:00:00Z",
        },
        {
            "kind": "episodic",
            "text": "On 2025-06-26 Dana read a chapter of a novel.",
            "event_at": "2025-06-26T19:00:00Z",
        },
        {
            "kind": "episodic",
            "text": "On 2025-03-16 Dana called her mother.",
            "event_at": "2025-03-16T19:00:00Z",
        },
        {"text": "Dana is on call every third week."},
        {"text": "Dana has two children."},
        {"text": "Dana's team meets on the last Friday of every month."},
        {"text": "Dana spends every weekend away from her laptop."},
        {"text": "The February 2025 budget review took two days."},
    ]


async def searched(
    client: AsyncClient, headers: dict[str, str], query: str, **body: Any
) -> list[dict[str, Any]]:
    response = await client.post(
        "/v1/users/me/memories/search",
        headers=headers,
        json={"query": query, "limit": 10, **body},
    )
    assert response.status_code == 200, response.text
    hits: list[dict[str, Any]] = response.json()["hits"]
    return hits


@pytest.mark.parametrize(
    "query",
    [
        "What did I do on May 16th, 2025?",
        "What did I do two days ago?",
        "What did I do last weekend?",
        "What did I do last week?",
    ],
)
async def test_the_words_naming_a_time_are_not_searched_as_words(
    client: AsyncClient, settings: Settings, tenant: str, query: str
) -> None:
    headers = bearer(settings, tenant, "dana")
    response = await client.post(
        "/v1/users/me/memories/batch",
        headers=headers,
        json={"items": dana_memories(datetime.now(UTC).date())},
    )
    assert response.status_code == 201, response.text
    hits = await searched(client, headers, query)
    # "May", "16th", "2025", "two", "days", "last", "weekend", "week" match no memory as words
    # ("On 2025-11-19 …", "every third week", "two children", "every weekend"): the rest of
    # each question is stop words, so no hit has a lexical match.
    assert all(hit["scores"]["lexical_rank"] is None for hit in hits)
    assert any(hit["scores"]["date_score"] > 0 for hit in hits)


async def test_what_happened_then_ranks_above_what_says_the_time_in_words(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "dana")
    last_monday = datetime.now(UTC).date() - timedelta(days=datetime.now(UTC).weekday() + 7)
    response = await client.post(
        "/v1/users/me/memories/batch",
        headers=headers,
        json={
            "items": [
                {
                    "kind": "episodic",
                    "text": "Dana repotted the basil on the balcony.",
                    "event_at": f"{last_monday + timedelta(days=2)}T12:00:00Z",
                },
                {"text": "Dana repots the basil every week."},
            ]
        },
    )
    assert response.status_code == 201, response.text
    for mode in ("hybrid", "lexical"):
        hits = await searched(client, headers, "What did Dana repot last week?", mode=mode)
        assert hits[0]["memory"]["text"] == "Dana repotted the basil on the balcony."
        # Both match "Dana" and "repot"; "week" is the date prior's alone.
        assert [hit["scores"]["lexical_rank"] for hit in hits] == [1, 2]


async def test_the_other_words_of_a_dated_question_are_still_searched(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "dana")
    response = await client.post(
        "/v1/users/me/memories/batch",
        headers=headers,
        json={"items": dana_memories(datetime.now(UTC).date())},
    )
    assert response.status_code == 201, response.text
    hits = await searched(client, headers, "Where did Dana buy a cello bow two days ago?")
    assert hits[0]["memory"]["text"] == "Dana bought a new cello bow in Chiado."
    assert hits[0]["scores"]["lexical_rank"] == 1


@pytest.mark.parametrize(
    ("query", "said"),
    [
        # 31 February is no day: its words stay the question's.
        ("the budget review of 31 February 2025", "The February 2025 budget review took two days."),
        ("Which week is Dana on call?", "Dana is on call every third week."),
        ("Does Dana have two children?", "Dana has two children."),
    ],
)
async def test_words_that_name_no_time_are_searched_as_words(
    client: AsyncClient, settings: Settings, tenant: str, query: str, said: str
) -> None:
    headers = bearer(settings, tenant, "dana")
    response = await client.post(
        "/v1/users/me/memories/batch",
        headers=headers,
        json={"items": dana_memories(datetime.now(UTC).date())},
    )
    assert response.status_code == 201, response.text
    hits = await searched(client, headers, query, mode="lexical")
    assert hits[0]["memory"]["text"] == said
    assert hits[0]["scores"]["lexical_rank"] == 1
    assert all(hit["scores"]["date_score"] == 0 for hit in hits)
