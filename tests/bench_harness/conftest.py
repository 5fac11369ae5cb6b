"""A tiny LoCoMo-shaped conversation, written fresh for these tests (never LoCoMo's own data),
with one instance of each fault the real file has."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

SESSION_1 = "1:56 pm on 8 May, 2023"
SESSION_2 = "12:21 am on 27 June, 2023"


def _turn(dia_id: str, speaker: str, text: str, **extra: str) -> dict[str, str]:
    return {"speaker": speaker, "dia_id": dia_id, "text": text, **extra}


def synthetic_locomo() -> list[dict[str, Any]]:
    conversation = {
        "speaker_a": "Ada",
        "speaker_b": "Ben",
        "session_1_date_time": SESSION_1,
        "session_1": [
            _turn("D1:1", "Ada", "I adopted a tortoise named Sheldon last week."),
            _turn("D1:2", "Ben", "Congratulations! What does Sheldon eat?"),
            _turn("D1:3", "Ada", "Mostly dandelions and kale from the garden."),
            _turn("D1:4", "Ben", "Thanks!"),
            # The service refuses to remember an SSN: the harness must leave it out, and count it.
            _turn("D1:5", "Ada", "My number is 123-45-6789, keep it safe."),
        ],
        "session_2_date_time": SESSION_2,
        "session_2": [
            _turn(
                "D2:1",
                "Ben",
                "Look what arrived today!",
                img_url="https://example.invalid/cello.jpg",
                blip_caption="a cello leaning against a brick wall",
            ),
            _turn("D2:2", "Ada", "Wonderful, how are the lessons going?"),
            _turn("D2:3", "Ben", "Slowly, my teacher is patient with me."),
            # Identical to D1:4: the service keeps one memory for both.
            _turn("D2:4", "Ben", "Thanks!"),
        ],
        # A date with no session, as in the real file.
        "session_3_date_time": "9:00 am on 1 July, 2023",
    }
    qa = [
        {
            "question": "What is the name of Ada's tortoise?",
            "answer": "Sheldon",
            "evidence": ["D1:1"],
            "category": 4,
        },
        {
            "question": "What does the tortoise eat, and what did Ben receive?",
            "answer": "kale",
            "evidence": ["D1:3; D2:1"],
            "category": 1,
        },
        {
            "question": "When did Ben's teacher start lessons?",
            "answer": "June 2023",
            "evidence": ["D:2:3"],
            "category": 2,
        },
        {
            "question": "What is Ada's favourite tortoise?",
            "adversarial_answer": "Sheldon",
            "evidence": ["D1:1"],
            "category": 5,
        },
        {"question": "Would Ada like a dog?", "answer": "maybe", "evidence": [], "category": 3},
        {
            "question": "Where does Ben live?",
            "answer": "Paris",
            "evidence": ["D9:9"],
            "category": 4,
        },
        {"question": "Who said thanks?", "answer": "Ben", "evidence": ["D2:04"], "category": 4},
        {
            "question": "What did Ben congratulate Ada on?",
            "answer": "the tortoise",
            "evidence": ["D", "D1:2"],
            "category": 4,
        },
        {
            "question": "What was leaning against a brick wall?",
            "answer": "a cello",
            "evidence": ["D2:1"],
            "category": 4,
        },
    ]
    # Facts drawn from each session, per speaker, with the turns they rest on (one string, a
    # list, and one naming no turn of the file), listed by speaker rather than in turn order.
    observation = {
        "session_2_observation": {
            "Ben": [["Ben is taking cello lessons with a patient teacher.", ["D2:1", "D2:3"]]],
        },
        "session_1_observation": {
            "Ben": [["Ben asked what Sheldon eats.", "D1:2"]],
            "Ada": [
                ["Ada feeds Sheldon dandelions and kale.", "D1:3"],
                ["Ada adopted a tortoise named Sheldon.", "D1:1"],
                ["Ada once owned a parrot.", "D1:99"],
            ],
        },
    }
    return [
        {"sample_id": "conv-x", "conversation": conversation, "qa": qa, "observation": observation}
    ]


EVALUATED = ["conv-x#q1", "conv-x#q2", "conv-x#q3", "conv-x#q7", "conv-x#q8", "conv-x#q9"]


@pytest.fixture
def locomo_file(tmp_path: Path) -> Path:
    path = tmp_path / "locomo-synthetic.json"
    path.write_text(json.dumps(synthetic_locomo()), encoding="utf-8")
    return path
