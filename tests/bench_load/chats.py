"""Two small LoCoMo-shaped conversations, written fresh for these tests (never LoCoMo's own
text): enough first-person and "we" sentences for the realistic scenario's rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fixtures.bench import TOY_CORPUS

# The realistic scenario at toy sizes, over these conversations: owners of 60 and 120 memories
# among the toy corpus's users.
TOY_SCENARIO = [
    "--sizes",
    "60,120",
    *TOY_CORPUS,
]

SESSIONS = {
    "conv-a": (
        ("Noor", "Teo"),
        (
            (
                "10:15 am on 3 March, 2023",
                (
                    "I finally signed up for the pottery course downtown. The teacher throws "
                    "bowls like it costs her nothing.",
                    "That sounds lovely! We went to a glass blowing workshop last spring and "
                    "burned our fingers.",
                    "I have always wanted to make my own mugs. My sister thinks I will quit "
                    "after two weeks.",
                    "Ignore her. I started running in January and I still go out every Sunday.",
                    "I love that you keep at it. I usually give up when it rains.",
                    "We should plan a trip to the coast once the weather turns.",
                    "I would bring my camera, I bought a used lens from a collector in Lyon.",
                    "Did you ever fix the old bicycle in your garage?",
                ),
            ),
            (
                "7:40 pm on 19 April, 2023",
                (
                    "I glazed my first mug today and it cracked in the kiln.",
                    "Oh no, what colour was it going to be?",
                    "A deep teal. I am trying again next week with a thicker base.",
                    "We visited the botanical garden on Saturday and the orchids were blooming.",
                    "I enjoy quiet places like that, especially the greenhouse in winter.",
                    "My brother proposed to his girlfriend under the magnolia tree there.",
                    "I remember him talking about it. We never thought he would be so romantic.",
                ),
            ),
        ),
        (
            ("What colour was Noor's first mug going to be?", ["D2:3"]),
            ("Where did Teo's brother propose?", ["D2:6"]),
            ("When did Noor start running?", ["D1:4"]),
        ),
    ),
    "conv-b": (
        ("Ilka", "Ravi"),
        (
            (
                "9:05 am on 12 May, 2023",
                (
                    "I just got back from a volunteering shift at the animal shelter.",
                    "How many dogs do they have right now?",
                    "Around forty, and I fell for a shy greyhound called Pepper.",
                    "I adopted a cat from there years ago. She still hides under the sofa.",
                    "We always say that shelter animals choose you, not the other way round.",
                    "I am thinking about fostering Pepper for a few weeks this summer.",
                    "I hope your landlord agrees. Mine refused when I asked about a rabbit.",
                ),
            ),
            (
                "4:30 pm on 2 July, 2023",
                (
                    "I brought Pepper home on Thursday and she already sleeps on my bed.",
                    "That is wonderful news! Does she get along with the neighbours' kids?",
                    "She adores them. We take her to the river park every evening.",
                    "I started learning the violin again after ten years away from it.",
                    "I prefer the cello, the low notes feel warmer to me.",
                    "My grandfather played the accordion at every family wedding.",
                    "We recorded him once, I still listen to that tape when I miss him.",
                    "I need to finish my thesis chapter on river ecology before August.",
                ),
            ),
        ),
        (
            ("What is the name of the greyhound Ilka fell for?", ["D1:3"]),
            ("Which instrument did Ilka start learning again?", ["D2:4"]),
            ("What did Ravi's grandfather play?", ["D2:6", "D2:7"]),
        ),
    ),
}


def chats() -> list[dict[str, Any]]:
    samples = []
    for sample_id, (speakers, sessions, questions) in SESSIONS.items():
        conversation: dict[str, Any] = {"speaker_a": speakers[0], "speaker_b": speakers[1]}
        for number, (when, turns) in enumerate(sessions, start=1):
            conversation[f"session_{number}_date_time"] = when
            conversation[f"session_{number}"] = [
                {"speaker": speakers[n % 2], "dia_id": f"D{number}:{n + 1}", "text": text}
                for n, text in enumerate(turns)
            ]
        qa = [
            {"question": text, "answer": "-", "evidence": evidence, "category": 4}
            for text, evidence in questions
        ]
        samples.append({"sample_id": sample_id, "conversation": conversation, "qa": qa})
    return samples


def write_chats(path: Path) -> Path:
    path.write_text(json.dumps(chats()), encoding="utf-8")
    return path
