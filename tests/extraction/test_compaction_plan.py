"""What a compaction writes, from the model's proposal: the consolidations and what is left out."""

from __future__ import annotations

import uuid

from service.extraction.compaction import CompactedFact, SourceFact, plan_compaction


def test_a_consolidations_subject_that_looks_like_a_secret_is_left_out() -> None:
    sources = {
        "f1": SourceFact(uuid.uuid4(), "User has a new card.", 0.9, "confirmed"),
        "f2": SourceFact(uuid.uuid4(), "User's card is a debit card.", 0.9, "confirmed"),
        "f3": SourceFact(uuid.uuid4(), "User lives in Porto.", 0.9, "confirmed"),
        "f4": SourceFact(uuid.uuid4(), "User moved to Porto in May.", 0.9, "confirmed"),
    }
    plan, dropped = plan_compaction(
        [
            # Kept, the subject would have the API refuse the memory's metadata, and the whole
            # compaction with it.
            CompactedFact(
                text="User has a new debit card.",
                category="context",
                subject="card 4111111111111111",
                sources=["f1", "f2"],
            ),
            CompactedFact(
                text="User lives in Porto since May.",
                category="context",
                subject="Home City",
                sources=["f3", "f4"],
            ),
        ],
        sources,
    )
    assert dropped == {}
    assert [(each.text, each.subject) for each in plan] == [
        ("User has a new debit card.", None),
        ("User lives in Porto since May.", "home_city"),
    ]


def test_a_consolidation_the_api_would_refuse_is_left_out_alone() -> None:
    # A NUL no column can store: written, it failed the whole compaction.
    sources = {
        "f1": SourceFact(uuid.uuid4(), "User likes tea.", 0.9, "confirmed"),
        "f2": SourceFact(uuid.uuid4(), "User likes green tea.", 0.9, "confirmed"),
        "f3": SourceFact(uuid.uuid4(), "User lives in Porto.", 0.9, "confirmed"),
        "f4": SourceFact(uuid.uuid4(), "User moved to Porto in May.", 0.9, "confirmed"),
    }
    plan, dropped = plan_compaction(
        [
            CompactedFact(
                text="User likes green\x00 tea.",
                category="preference",
                subject="tea",
                sources=["f1", "f2"],
            ),
            CompactedFact(
                text="User lives in Porto since May.",
                category="context",
                subject="home_city",
                sources=["f3", "f4"],
            ),
        ],
        sources,
    )
    assert dropped == {"nul_character": 1}
    assert [each.text for each in plan] == ["User lives in Porto since May."]
