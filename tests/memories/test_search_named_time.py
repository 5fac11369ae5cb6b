"""A question that names a time (a day, a week, a month): its words are the date prior's, not the
lexical side's, and the memories of that time are candidates whether or not a pool brought them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from fastapi import FastAPI
from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.auth.owner import Owner
from service.config import Settings
from service.db import tenant_transaction
from service.memories.dates import query_named_time, query_time_window
from service.memories.filters import MemoryFilter
from service.memories.fusion.repository import FusionRepository
from service.memories.owner_indexes import OwnerIndexes
from tests.conftest import bearer
from tests.fixtures.apps import app_client, running_app
from tests.fixtures.factories import remember_all
from tests.memories.large_owners import (
    BUILD_FROM,
    USER,
    count_statistics,
    explained_as_served,
    large_owner,
    own_indexes_found,
)
from tests.plans import plan_nodes
from tests.search_params import search_params

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


@pytest.mark.parametrize(
    ("query", "then"),
    [
        (
            "What did I do on May 16th, 2025?",
            {"Dana celebrated her wedding anniversary at Belcanto."},
        ),
        (
            "What did I do last week?",
            {
                "Dana watched the football derby with Joana.",
                "Dana repaired the garden fence with her neighbour.",
            },
        ),
    ],
)
async def test_a_question_of_what_happened_at_a_time_ranks_what_happened_then_first(
    client: AsyncClient, settings: Settings, tenant: str, query: str, then: set[str]
) -> None:
    """The memories whose text says a date or a schedule ("On 2025-11-19 …", "every third
    week") are nearer such a question's vector than what happened then; the time's prior
    outweighs that (`MNEME_SEARCH_DATE_WEIGHT`)."""
    headers = bearer(settings, tenant, "dana")
    response = await client.post(
        "/v1/users/me/memories/batch",
        headers=headers,
        json={"items": dana_memories(datetime.now(UTC).date())},
    )
    assert response.status_code == 201, response.text
    hits = await searched(client, headers, query)
    assert hits[0]["memory"]["text"] in then


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


@pytest.fixture
async def small_pools_client(settings: Settings) -> AsyncIterator[AsyncClient]:
    """Pools of 10 on both sides (at the limit of 10), and the time a query names weighed above
    anything else a memory can score: a memory of that time ranks first if it is a candidate."""
    async with (
        running_app(
            settings, search_candidate_pool=10, search_vector_pool=10, search_date_weight=10
        ) as application,
        app_client(application) as client,
    ):
        yield client


ACTIVITIES = ["hiking", "cooking", "painting", "swimming", "shopping", "reading"]
FRIENDS = ["Bea", "Carl", "Dora", "Emil", "Fay"]
ERRANDS = [
    "The boiler warranty card was filed.",
    "The parking permit renewal form was filed.",
    "The insurance letter about the roof was filed.",
    "The dentist invoice was filed.",
    "The library card was replaced.",
    "The router's firmware was updated.",
    "The bicycle's chain was oiled.",
    "The smoke alarm's battery was replaced.",
    "The winter tyres were stored.",
    "The passport photo was printed.",
    "The gas meter was read.",
    "The spare key was cut.",
    "The tax certificate was downloaded.",
    "The gutter was cleared.",
    "The fridge filter was changed.",
]


def near_the_question() -> list[dict[str, Any]]:
    """30 episodes of 2024 that sound like an answer to "what did I do …?"."""
    return [
        {
            "kind": "episodic",
            "text": f"I went {activity} with {friend}.",
            "event_at": f"2024-0{1 + index % 9}-1{index % 10}T10:00:00Z",
        }
        for index, (activity, friend) in enumerate(
            (activity, friend) for activity in ACTIVITIES for friend in FRIENDS
        )
    ]


def errands_of_may(kind: str = "episodic", first_day: int = 1) -> list[dict[str, Any]]:
    """An errand on each day of May 2025 from `first_day` on: nothing a question about what
    someone did sounds like, nor says May or 2025."""
    return [
        {"kind": kind, "text": text, "event_at": f"2025-05-{first_day + index:02d}T09:00:00Z"}
        for index, text in enumerate(ERRANDS)
    ]


async def test_the_memories_of_a_named_month_are_candidates_beyond_both_pools(
    small_pools_client: AsyncClient, settings: Settings, tenant: str
) -> None:
    client = small_pools_client
    headers = bearer(settings, tenant, "ada")
    errands = errands_of_may(first_day=3)
    response = await client.post(
        "/v1/users/me/memories/batch",
        headers=headers,
        json={"items": [*near_the_question(), *errands]},
    )
    assert response.status_code == 201, response.text
    # Another user's memories of the month are never a candidate of Ada's (nor a hit).
    response = await client.post(
        "/v1/users/me/memories/batch",
        headers=bearer(settings, tenant, "bea"),
        json={"items": errands_of_may()},
    )
    assert response.status_code == 201, response.text

    hits = await searched(client, headers, "What did I do in May 2025?")
    # The month's latest pool (10) of its 15 memories, though neither side's pool of 10 brought
    # them (the 30 memories near the question fill both), each scored by its own match too.
    latest = {errand["text"] for errand in errands[-10:]}
    assert {hit["memory"]["text"] for hit in hits} == latest
    assert all(hit["memory"]["user_id"] == "ada" for hit in hits)
    assert all(hit["scores"]["date_score"] > 0 for hit in hits)
    assert all(hit["scores"]["vector_cosine"] is not None for hit in hits)
    assert all(hit["scores"]["vector_rank"] is None for hit in hits)


async def test_the_memories_of_a_named_time_are_candidates_under_the_searchs_filter(
    small_pools_client: AsyncClient, settings: Settings, tenant: str
) -> None:
    client = small_pools_client
    headers = bearer(settings, tenant, "ada")
    response = await client.post(
        "/v1/users/me/memories/batch",
        headers=headers,
        json={
            "items": [
                *near_the_question(),
                *errands_of_may()[:3],
                *errands_of_may("semantic")[3:5],
            ]
        },
    )
    assert response.status_code == 201, response.text
    response = await client.post(
        "/v1/org/memories/batch",
        headers=bearer(settings, tenant, "admin", admin=True),
        json={"items": errands_of_may()[5:7]},
    )
    assert response.status_code == 201, response.text

    facts = await searched(client, headers, "What did I do in May 2025?", kinds=["semantic"])
    assert {hit["memory"]["text"] for hit in facts} == set(ERRANDS[3:5])
    org = await searched(client, headers, "What did I do in May 2025?", scopes=["org"])
    assert {hit["memory"]["text"] for hit in org[:2]} == set(ERRANDS[5:7])
    both = await searched(client, headers, "What did I do in May 2025?")
    assert {hit["memory"]["text"] for hit in both[:7]} == set(ERRANDS[:7])


@pytest.mark.usefixtures("no_owner_indexes")
async def test_a_large_owners_memories_of_a_named_time_are_read_from_the_window_alone(
    indexed_app: FastAPI,
    indexed_client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    """An owner searched through its postings and its own vector indexes (its owners written
    into the statement): its memories of the named month are candidates too, read from the
    index of event times within the window, as far as the pool; a question that names no time
    reads none."""
    headers = await large_owner(indexed_app, indexed_client, settings, tenant)
    errands = errands_of_may()
    await remember_all(indexed_client, headers, *errands)
    await count_statistics(indexed_app, tenant, Owner.user(USER), Owner.org())
    await OwnerIndexes(owner_engine, build_from=BUILD_FROM, most=100).refresh()
    written = await own_indexes_found(indexed_app, tenant)
    assert written

    question = "what does the user like to play in May 2025"
    window = query_time_window(question, datetime.now(UTC))
    assert window is not None
    dated = search_params(
        MemoryFilter.build([Owner.user(USER), Owner.org()]),
        question,
        pool=10,
        window_start=window.start,
        window_end=window.end,
        date_weight=10,
        bounded_from=BUILD_FROM,
    )
    async with tenant_transaction(indexed_app.state.mneme.sessionmaker, tenant) as session:
        rows = await FusionRepository(session, tenant).search(dated)
    assert {row.memory.text for row in rows} == set(ERRANDS[-10:])

    def window_scans(explained: Any) -> list[dict[str, Any]]:
        """The plan's scans of the memories in the window (`DATED_SCAN_SQL`)."""
        return [
            node
            for node in plan_nodes(explained[0]["Plan"])
            if "event_at >= " in f"{node.get('Index Cond')} {node.get('Filter')}"
        ]

    # The table's statistics as autovacuum keeps them: planned on statistics from before the
    # owner was written, the scans may take any index of the user's memories.
    async with owner_engine.connect() as connection:
        await connection.execution_options(isolation_level="AUTOCOMMIT")
        await connection.execute(text("ANALYZE memory"))
    scans = window_scans(await explained_as_served(indexed_app, tenant, dated, written))
    # One scan per owner and kind. The user's read its memories of the window on the index of
    # event times, each stopping at the pool (its episodes: 10 of the month's 15); the
    # organization has none in the window.
    assert len(scans) == 6
    users = [node for node in scans if "user_id = " in node.get("Index Cond", "")]
    assert {node["Index Name"] for node in users} == {"ix_memory_event_time"}
    assert sorted(node["Actual Rows"] for node in users) == [0, 0, 10]
    assert sum(node["Actual Rows"] for node in scans) == 10
    undated = search_params(
        MemoryFilter.build([Owner.user(USER), Owner.org()]), question, bounded_from=BUILD_FROM
    )
    scans = window_scans(await explained_as_served(indexed_app, tenant, undated, written))
    assert len(scans) == 6
    assert all(node["Actual Loops"] == 0 for node in scans)


async def test_a_sections_memories_of_a_named_time_are_read_from_the_window_on_any_plan(
    app: FastAPI, client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """A section filtered to kinds and lifecycles (a context's), of an owner not written into
    the statement (its plan made once for every owner): each scan of the window's memories
    reads the index of event times, and only for the kinds the filter asks for."""
    headers = bearer(settings, tenant, "ada")
    await remember_all(client, headers, *near_the_question(), *errands_of_may())
    question = "What did I do in May 2025?"
    window = query_time_window(question, datetime.now(UTC))
    assert window is not None
    episodes = search_params(
        MemoryFilter.build([Owner.user("ada")], kinds=["episodic"], lifecycles=["confirmed"]),
        question,
        window_start=window.start,
        window_end=window.end,
    )
    explained = await explained_as_served(app, tenant, episodes, None)
    scans = [
        node
        for node in plan_nodes(explained[0]["Plan"])
        if "event_at >= " in f"{node.get('Index Cond')} {node.get('Filter')}"
    ]
    ran = [node for node in scans if node["Actual Loops"] > 0]
    assert [node.get("Index Name") for node in ran] == ["ix_memory_event_time"]
    assert ran[0]["Actual Rows"] == len(ERRANDS)
    assert not ran[0].get("Rows Removed by Filter")
