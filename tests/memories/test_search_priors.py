"""Priors from what the query names: a speaker of the searched memories (`speaker_score`) and
a day or recent month (`date_score`), each on the fused scale, in the one search statement."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from httpx import AsyncClient
from hypothesis import given
from hypothesis import strategies as st

from service.config import Settings
from service.memories.dates import query_time_window
from tests.conftest import bearer
from tests.memories.sessions import new_source_thread

# The same words said by two participants of one conversation, 36 hours apart (so outside
# each other's day in every time zone), differing in punctuation only (so neither is a
# duplicate of the other).
SPOKEN = [
    ("Ada", "I started learning an instrument last month.", "2023-05-07T08:00:00Z"),
    ("Ben", "I started learning an instrument last month!", "2023-05-08T20:00:00Z"),
    ("Ada", "We should go hiking when the weather is better", "2023-05-07T08:00:01Z"),
    ("Ben", "The weather has been awful all week", "2023-05-08T20:00:01Z"),
]


async def seed_spoken(client: AsyncClient, headers: dict[str, str]) -> dict[str, str]:
    """The memories of `SPOKEN`; returns the id of each speaker's instrument line by speaker."""
    thread = await new_source_thread(client, headers)
    items = [
        {
            "kind": "episodic",
            "text": words,
            "speaker": speaker,
            "source_thread_id": thread,
            "event_at": said_at,
        }
        for speaker, words, said_at in SPOKEN
    ]
    response = await client.post(
        "/v1/users/me/memories/batch", headers=headers, json={"items": items}
    )
    assert response.status_code == 201, response.text
    return {
        item["speaker"]: item["id"]
        for item in response.json()["items"]
        if "instrument" in item["text"]
    }


async def search(client: AsyncClient, headers: dict[str, str], query: str) -> list[dict[str, Any]]:
    response = await client.post(
        "/v1/users/me/memories/search", headers=headers, json={"query": query, "limit": 10}
    )
    assert response.status_code == 200, response.text
    hits: list[dict[str, Any]] = response.json()["hits"]
    return hits


async def test_a_question_naming_a_speaker_ranks_that_speakers_turn_first(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    memories = await seed_spoken(client, headers)
    for speaker in ("Ada", "Ben"):
        hits = await search(client, headers, f"What instrument did {speaker} start learning?")
        assert hits[0]["memory"]["id"] == memories[speaker]
        best_fused = max(hit["scores"]["fused_score"] for hit in hits)
        for hit in hits:
            named = hit["memory"]["speaker"] == speaker
            assert hit["scores"]["speaker_score"] == pytest.approx(best_fused if named else 0.0)


async def test_a_name_no_memory_was_said_by_gives_no_speaker_score(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    await seed_spoken(client, headers)
    hits = await search(client, headers, "What instrument did Carl start learning?")
    assert hits
    assert all(hit["scores"]["speaker_score"] == 0 for hit in hits)


async def test_a_dated_question_prefers_the_memory_of_that_day(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    memories = await seed_spoken(client, headers)
    for query, speaker in (
        ("What did they start learning on 8 May 2023?", "Ben"),
        ("What did they start learning on May 7th, 2023?", "Ada"),
        ("What did they start learning on 2023-05-08?", "Ben"),
    ):
        hits = await search(client, headers, query)
        assert hits[0]["memory"]["id"] == memories[speaker]
        best_fused = max(hit["scores"]["fused_score"] for hit in hits)
        for hit in hits:
            on_that_day = hit["memory"]["speaker"] == speaker
            assert hit["scores"]["date_score"] == pytest.approx(best_fused if on_that_day else 0)


async def test_the_date_prior_goes_to_what_happened_then_not_to_what_was_stored_then(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    now = datetime.now(UTC)
    response = await client.post(
        "/v1/users/me/memories/batch",
        headers=headers,
        json={
            "items": [
                {"text": "Ada is allergic to peanuts."},
                {"text": "Always answer Ada in British English.", "kind": "procedural"},
                {
                    "kind": "episodic",
                    "text": "Ada did a pottery class.",
                    "event_at": now.isoformat(),
                },
                {
                    "kind": "episodic",
                    "text": "Ada did a yoga class.",
                    "event_at": (now - timedelta(days=40)).isoformat(),
                },
            ]
        },
    )
    assert response.status_code == 201, response.text
    hits = await search(client, headers, "What did Ada do today?")
    dated = {hit["memory"]["text"]: hit["scores"]["date_score"] for hit in hits}
    assert set(dated) == {
        "Ada is allergic to peanuts.",
        "Always answer Ada in British English.",
        "Ada did a pottery class.",
        "Ada did a yoga class.",
    }
    # Stored today, without a time of their own: no prior for today.
    assert dated["Ada is allergic to peanuts."] == 0
    assert dated["Always answer Ada in British English."] == 0
    assert dated["Ada did a yoga class."] == 0
    assert dated["Ada did a pottery class."] > 0
    assert hits[0]["memory"]["text"] == "Ada did a pottery class."


async def test_a_speaker_must_be_a_name_of_bounded_length_and_no_secret(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    for speaker in ("   ", "x" * 201, "sk-abcdefghijklmnopqrstuvwxyz123"):
        response = await client.post(
            "/v1/users/me/memories", headers=headers, json={"text": "hi", "speaker": speaker}
        )
        assert response.status_code == 422, response.text
        assert response.json()["errors"][0]["loc"][-1] == "speaker"
    listed = await client.get("/v1/users/me/memories", headers=headers)
    assert listed.json()["items"] == []


async def test_a_wrong_speaker_can_be_corrected_or_removed_and_history_says_so(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    created = await client.post(
        "/v1/users/me/memories",
        headers=headers,
        json={"text": "The lighthouse tour was worth it", "speaker": "Bob"},
    )
    memory = f"/v1/users/me/memories/{created.json()['id']}"
    corrected = await client.patch(memory, headers=headers, json={"speaker": "Grace"})
    assert corrected.status_code == 200, corrected.text
    assert corrected.json()["speaker"] == "Grace"
    search = await client.post(
        "/v1/users/me/memories/search", headers=headers, json={"query": "what did Grace enjoy"}
    )
    assert search.json()["hits"][0]["scores"]["speaker_score"] > 0
    secret = await client.patch(
        memory, headers=headers, json={"speaker": "sk-abcdefghijklmnopqrstuvwxyz123"}
    )
    assert secret.status_code == 422
    assert secret.json()["errors"][0]["loc"][-1] == "speaker"
    removed = await client.patch(memory, headers=headers, json={"speaker": None})
    assert removed.json()["speaker"] is None
    history = (await client.get(f"{memory}/history", headers=headers)).json()["items"]
    assert [event["changes"].get("speaker") for event in history[1:]] == ["Grace", None]


NOW = datetime(2026, 11, 30, 21, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("query", "first_day", "last_day"),
    [
        ("what happened on 7 May 2023", date(2023, 5, 7), date(2023, 5, 7)),
        ("what happened on the 7th of May, 2023", date(2023, 5, 7), date(2023, 5, 7)),
        ("what did she find on 1 February, 2023?", date(2023, 2, 1), date(2023, 2, 1)),
        ("who called on Sept. 3rd 2024", date(2024, 9, 3), date(2024, 9, 3)),
        ("notes from 2023-05-07", date(2023, 5, 7), date(2023, 5, 7)),
        ("what did I eat yesterday", date(2026, 11, 29), date(2026, 11, 29)),
        ("where did we go last June", date(2026, 6, 1), date(2026, 6, 30)),
        ("what did we plan last December", date(2025, 12, 1), date(2025, 12, 31)),
        ("what happened last November", date(2025, 11, 1), date(2025, 11, 30)),
        ("what did we buy in May 2023", date(2023, 5, 1), date(2023, 5, 31)),
        ("plans for December, 2023?", date(2023, 12, 1), date(2023, 12, 31)),
        ("the trip of February of 2024", date(2024, 2, 1), date(2024, 2, 29)),
        # Slashes put the month first, dots the day, unless only the other reading is a day.
        ("what happened on 05/07/2023", date(2023, 5, 7), date(2023, 5, 7)),
        ("what happened on 05.07.2023.", date(2023, 7, 5), date(2023, 7, 5)),
        ("what happened on 31/05/2023", date(2023, 5, 31), date(2023, 5, 31)),
        ("what happened on 05.31.2023", date(2023, 5, 31), date(2023, 5, 31)),
        # Relative to NOW, a Monday.
        ("what did I cook two days ago", date(2026, 11, 28), date(2026, 11, 28)),
        ("what did I cook 3 days ago", date(2026, 11, 27), date(2026, 11, 27)),
        ("what did I cook the day before yesterday", date(2026, 11, 28), date(2026, 11, 28)),
        ("who called last Tuesday", date(2026, 11, 24), date(2026, 11, 24)),
        ("who called last Monday", date(2026, 11, 23), date(2026, 11, 23)),
        ("what did we do last week", date(2026, 11, 23), date(2026, 11, 29)),
        ("what did we do last weekend", date(2026, 11, 28), date(2026, 11, 29)),
        ("what happened two weeks ago", date(2026, 11, 13), date(2026, 11, 19)),
        ("what did we decide last month", date(2026, 10, 1), date(2026, 10, 31)),
        ("what did we decide a month ago", date(2026, 10, 1), date(2026, 10, 31)),
        # A named day wins over a relative one.
        (
            "what did she do last weekend before April 10, 2023",
            date(2023, 4, 10),
            date(2023, 4, 10),
        ),
    ],
)
def test_the_day_or_recent_month_a_query_names_becomes_a_window(
    query: str, first_day: date, last_day: date
) -> None:
    window = query_time_window(query, NOW)
    assert window is not None
    # The window covers the named days in every time zone (UTC+14 to UTC-12).
    midnight = datetime.min.time()
    assert window.start == datetime.combine(first_day, midnight, UTC) - timedelta(hours=14)
    assert window.end == datetime.combine(last_day, midnight, UTC) + timedelta(hours=36)


@pytest.mark.parametrize(
    "query",
    [
        "may I ask what the weather was like",
        "what happened in May",
        "order 7 of 2023",
        "what happened on 31 February 2023",
        "the 2023-13-01 release",
        "what happened on 13/13/2023",
        "version 1.05.07.2023",
        "where did she move from two years ago",
        "what did she buy on her last weekday off",
    ],
)
def test_a_query_without_a_day_or_recent_month_has_no_window(query: str) -> None:
    assert query_time_window(query, NOW) is None


MONTH_NAMES = ["January", "Feb", "March", "Apr.", "May", "June", "Jul", "August", "Sept."]
MONTH_NAMES += ["October", "Nov", "December"]


CALENDAR_DAYS = st.one_of(
    st.sampled_from([date(1, 1, 1), date(1, 1, 2), date(9999, 12, 30), date(9999, 12, 31)]),
    st.dates(min_value=date(1, 1, 1), max_value=date(9999, 12, 31)),
)
CALENDAR_TIMES = st.one_of(
    st.sampled_from([datetime(1, 1, 1, tzinfo=UTC), datetime.max.replace(tzinfo=UTC)]),
    st.datetimes(
        min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31), timezones=st.just(UTC)
    ),
)


@given(
    CALENDAR_DAYS,
    st.sampled_from(
        [
            "{iso}",
            "{day} {month} {year}",
            "{month} {day}, {year}",
            "on {day}th of {month} {year}",
            "on {month_number}/{day}/{year}",
            "on {day}.{month_number}.{year}",
        ]
    ),
    CALENDAR_TIMES,
)
def test_any_day_of_the_calendar_is_read_without_error_and_covered(
    day: date, form: str, now: datetime
) -> None:
    query = form.format(
        iso=day.isoformat(),
        day=day.day,
        month=MONTH_NAMES[day.month - 1],
        month_number=f"{day.month:02d}",
        year=f"{day.year:04d}",
    )
    window = query_time_window(f"what happened {query}", now)
    assert window is not None
    # Clamped at the calendar's edges, the window still holds the whole UTC day named.
    assert window.start <= datetime.combine(day, datetime.min.time(), UTC)
    assert datetime.combine(day, datetime.max.time(), UTC) <= window.end


@given(
    st.sampled_from(
        [
            "what did I eat yesterday",
            "what is on today",
            "the day before yesterday",
            "last June",
            "last December",
            "in December 9999",
            "in January 0001",
            "9999 days ago",
            "12 weeks ago",
            "9999 months ago",
            "last Sunday",
            "last week",
            "last weekend",
            "last month",
        ]
    ),
    CALENDAR_TIMES,
)
def test_relative_days_and_months_are_read_without_error_on_any_day(
    query: str, now: datetime
) -> None:
    window = query_time_window(query, now)
    assert window is None or window.start < window.end
    if not query.startswith("in "):
        # Relative words name the past (or today), and a time far from the calendar's first
        # day always has that past.
        assert window is None or window.start <= now
        if now.year >= 1000:
            assert window is not None
