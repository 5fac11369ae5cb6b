"""Reading LoCoMo and LongMemEval: evidence repairs, session dates, what is skipped and why."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from benchmarks.datasets import (
    DatasetError,
    EvidenceIssue,
    load_dataset,
    parse_evidence,
    parse_locomo_datetime,
    parse_longmemeval_datetime,
)
from service.memories.schemas import MEMORY_TEXT_MAX
from tests.bench_harness.conftest import EVALUATED

TURNS = frozenset({"D1:1", "D1:2", "D8:6", "D9:17", "D11:26", "D30:5"})


def test_well_formed_evidence_needs_no_repair() -> None:
    assert parse_evidence(["D1:1", "D8:6", "D1:1"], TURNS) == (frozenset({"D1:1", "D8:6"}), [])


def test_several_ids_in_one_string_are_split_apart() -> None:
    gold, issues = parse_evidence(["D8:6; D9:17"], TURNS)
    assert gold == {"D8:6", "D9:17"}
    assert issues == [EvidenceIssue("split", "D8:6; D9:17", "D8:6 D9:17")]
    gold, issues = parse_evidence(["D1:1 D1:2,D8:6"], TURNS)
    assert gold == {"D1:1", "D1:2", "D8:6"}
    assert [issue.kind for issue in issues] == ["split"]


def test_a_stray_colon_or_leading_zero_is_normalised_to_the_existing_turn() -> None:
    gold, issues = parse_evidence(["D:11:26", "D30:05"], TURNS)
    assert gold == {"D11:26", "D30:5"}
    assert issues == [
        EvidenceIssue("normalised", "D:11:26", "D11:26"),
        EvidenceIssue("normalised", "D30:05", "D30:5"),
    ]


def test_a_normalised_id_without_its_turn_is_dropped_as_missing() -> None:
    gold, issues = parse_evidence(["D:4:36"], TURNS)
    assert gold == frozenset()
    assert issues == [EvidenceIssue("missing_turn", "D:4:36", "D4:36")]


@pytest.mark.parametrize("raw", ["D", "", "D1:2:3", "D0:1", "11:26", "D1-2"])
def test_what_is_not_one_turn_id_is_dropped_as_unparseable(raw: str) -> None:
    gold, issues = parse_evidence([raw, "D1:1"], TURNS)
    assert gold == {"D1:1"}
    assert [issue.kind for issue in issues] == ["unparseable"]


def test_evidence_for_a_turn_that_does_not_exist_is_dropped() -> None:
    gold, issues = parse_evidence(["D10:19", "D1:2"], TURNS)
    assert gold == {"D1:2"}
    assert issues == [EvidenceIssue("missing_turn", "D10:19")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("12:21 am on 27 June, 2023", datetime(2023, 6, 27, 0, 21, tzinfo=UTC)),
        ("12:05 pm on 1 January, 2024", datetime(2024, 1, 1, 12, 5, tzinfo=UTC)),
        ("9:28 AM on 11 Sep 2023", datetime(2023, 9, 11, 9, 28, tzinfo=UTC)),
    ],
)
def test_locomo_session_dates_parse_to_utc(text: str, expected: datetime) -> None:
    assert parse_locomo_datetime(text) == expected


@pytest.mark.parametrize(
    "text",
    ["13:56 pm on 8 May, 2023", "1:56 pm on 31 February, 2023", "1:56 pm on 8 Mayo, 2023", "May"],
)
def test_impossible_locomo_dates_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"date|day is out of range"):
        parse_locomo_datetime(text)


def test_longmemeval_session_dates_parse_to_utc() -> None:
    assert parse_longmemeval_datetime("2023/05/20 (Sat) 02:21") == datetime(
        2023, 5, 20, 2, 21, tzinfo=UTC
    )
    with pytest.raises(ValueError, match="LongMemEval"):
        parse_longmemeval_datetime("20 May 2023")


def test_locomo_loading_keeps_answerable_questions_and_counts_every_fault(
    locomo_file: Path,
) -> None:
    dataset = load_dataset(locomo_file, "locomo")
    [conversation] = dataset.conversations
    assert [q.question_id for q in conversation.questions] == EVALUATED
    report = dataset.report
    assert report.questions_in_file == 9
    assert report.questions_skipped == {"adversarial": 1, "no_evidence": 1, "no_valid_evidence": 1}
    assert report.evidence_repairs == {
        "split": 1,
        "normalised": 2,
        "missing_turn": 1,
        "unparseable": 1,
    }
    gold = {q.question_id: q.gold for q in conversation.questions}
    assert gold["conv-x#q2"] == {"D1:3", "D2:1"}
    assert gold["conv-x#q3"] == {"D2:3"}
    assert gold["conv-x#q7"] == {"D2:4"}
    assert conversation.questions[0].category == "4 single-hop"
    assert dataset.sha256 and len(dataset.sha256) == 64


def test_locomo_turns_become_speaker_prefixed_memories_dated_by_their_session(
    locomo_file: Path,
) -> None:
    turns = {t.dia_id: t for t in load_dataset(locomo_file, "locomo").conversations[0].turns}
    assert len(turns) == 9
    assert turns["D1:1"].text == "Ada: I adopted a tortoise named Sheldon last week."
    assert turns["D1:1"].event_at == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert turns["D2:2"].event_at == datetime(2023, 6, 27, 0, 21, tzinfo=UTC)
    assert turns["D2:1"].text == (
        "Ben: Look what arrived today! [shared an image: a cello leaning against a brick wall]"
    )


def test_locomo_observations_become_facts_in_the_order_they_were_said(
    locomo_file: Path,
) -> None:
    """Each observation keeps the turns it rests on, ordered by the first of them (the order a
    write path drawing facts during the conversation writes them), dated by its session; one
    whose evidence names no turn of the conversation is left out."""
    dataset = load_dataset(locomo_file, "locomo")
    observations = dataset.conversations[0].observations
    assert [(o.text, o.session, sorted(o.evidence)) for o in observations] == [
        ("Ada adopted a tortoise named Sheldon.", "D1", ["D1:1"]),
        ("Ben asked what Sheldon eats.", "D1", ["D1:2"]),
        ("Ada feeds Sheldon dandelions and kale.", "D1", ["D1:3"]),
        ("Ben is taking cello lessons with a patient teacher.", "D2", ["D2:1", "D2:3"]),
    ]
    assert observations[0].event_at == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert observations[3].event_at == datetime(2023, 6, 27, 0, 21, tzinfo=UTC)
    assert dataset.observation_count == 4


def test_image_captions_can_be_left_out(locomo_file: Path) -> None:
    dataset = load_dataset(locomo_file, "locomo", image_captions=False)
    turns = {t.dia_id: t.text for t in dataset.conversations[0].turns}
    assert turns["D2:1"] == "Ben: Look what arrived today!"
    assert dataset.image_captions is False


def test_sessions_are_read_in_numeric_order(tmp_path: Path) -> None:
    sessions: dict[str, Any] = {"speaker_a": "A", "speaker_b": "B"}
    for number in (10, 2, 1):
        sessions[f"session_{number}_date_time"] = f"1:00 pm on {number} May, 2023"
        sessions[f"session_{number}"] = [{"speaker": "A", "dia_id": f"D{number}:1", "text": "hi"}]
    path = tmp_path / "order.json"
    path.write_text(json.dumps([{"sample_id": "c", "conversation": sessions, "qa": []}]))
    turns = load_dataset(path, "locomo").conversations[0].turns
    assert [t.dia_id for t in turns] == ["D1:1", "D2:1", "D10:1"]


def longmemeval_item(question_id: str, **overrides: Any) -> dict[str, Any]:
    item = {
        "question_id": question_id,
        "question_type": "single-session-user",
        "question": "What breed is my dog?",
        "answer": "a corgi",
        "question_date": "2023/06/01 (Thu) 10:00",
        "haystack_session_ids": ["s-a", "s-b"],
        "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/21 (Sun) 18:00"],
        "haystack_sessions": [
            [
                {"role": "user", "content": "I need a recipe for pancakes."},
                {"role": "assistant", "content": "x" * (MEMORY_TEXT_MAX + 50)},
            ],
            [
                {"role": "user", "content": "My corgi chewed my shoes.", "has_answer": True},
                {"role": "assistant", "content": "   "},
            ],
        ],
        "answer_session_ids": ["s-b"],
    }
    item.update(overrides)
    return item


def test_longmemeval_questions_get_their_own_haystack_with_turn_level_gold(
    tmp_path: Path,
) -> None:
    path = tmp_path / "longmemeval.json"
    path.write_text(
        json.dumps(
            [
                longmemeval_item("q1"),
                longmemeval_item("q2_abs"),
                longmemeval_item(
                    "q3",
                    haystack_sessions=[[{"role": "user", "content": "hi"}]],
                    haystack_dates=["2023/05/20 (Sat) 02:21"],
                ),
            ]
        )
    )
    dataset = load_dataset(path, "longmemeval")
    first = dataset.conversations[0]
    [question] = first.questions
    assert question.gold == {"D2:1"}
    assert question.category == "single-session-user"
    turns = {t.dia_id: t for t in first.turns}
    assert turns["D2:1"].text == "user: My corgi chewed my shoes."
    assert turns["D2:1"].event_at == datetime(2023, 5, 21, 18, 0, tzinfo=UTC)
    assert len(turns["D1:2"].text) == MEMORY_TEXT_MAX
    assert "D2:2" not in turns
    assert dataset.report.turn_issues == {"truncated": 2, "empty": 2}
    assert dataset.report.questions_skipped == {"abstention": 1, "no_evidence": 1}
    assert dataset.question_count == 1
    # Haystacks without a question are not worth loading.
    assert [
        c.conversation_id
        for c in dataset.selected(conversations=None, questions=None).conversations
    ] == ["q1"]


def test_limits_take_conversations_then_questions_in_file_order(locomo_file: Path) -> None:
    dataset = load_dataset(locomo_file, "locomo")
    assert dataset.selected(conversations=1, questions=None).question_count == 6
    limited = dataset.selected(conversations=None, questions=2)
    assert [q.question_id for q in limited.conversations[0].questions] == EVALUATED[:2]
    assert limited.turn_count == dataset.turn_count


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read"),
        ("{not json", "not JSON"),
        ('{"a": 1}', "JSON list"),
        ('[{"sample_id": "c"}]', "item 0 is not a locomo item"),
    ],
)
def test_unreadable_or_misshapen_files_are_refused_with_a_reason(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "data.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(DatasetError, match=message):
        load_dataset(path, "locomo")
