"""The budget rules on their own: ceilings, leftovers flowing on, whole items, never over."""

from __future__ import annotations

import random

import pytest

from service.context.budget import Candidate, SectionDraft, fit
from service.kit.token_counting import count_tokens

HEADER = "You have memory."


def section(name: str, lines: list[str], weight: float = 1.0) -> SectionDraft[str]:
    return SectionDraft(
        name,
        name.title(),
        weight,
        [Candidate(line, line, render_key=i) for i, line in enumerate(lines)],
    )


@pytest.mark.parametrize("seed", range(40))
def test_random_budgets_and_corpora_never_exceed_the_budget(seed: int) -> None:
    rng = random.Random(seed)
    words = ["tea", "lisbon", "ünïcode", "42", "hiking", "🙂", "the", "meeting", "<memory>"]
    sections = [
        section(
            f"s{i}",
            [" ".join(rng.choices(words, k=rng.randint(1, 40))) for _ in range(rng.randint(0, 12))],
            weight=rng.uniform(0.5, 3),
        )
        for i in range(rng.randint(1, 6))
    ]
    budget = rng.randint(8, 600)
    text = fit(HEADER, sections, budget, count_tokens)
    assert count_tokens(text) <= budget
    for draft in sections:
        chosen_lines = {c.line for c in draft.chosen}
        for line in chosen_lines:
            assert line in text  # whole items only
        if not draft.chosen:
            assert f"## {draft.title}\n" not in text  # empty sections vanish


def test_leftover_of_an_empty_or_small_section_flows_to_the_next() -> None:
    small = section("small", ["one short fact"])
    big = section("big", [f"a longer remembered episode number {i}" for i in range(30)])
    alone = section("big", [f"a longer remembered episode number {i}" for i in range(30)])
    fit(HEADER, [section("empty", []), small, big], 200, count_tokens)
    fit(HEADER, [alone], 200, count_tokens)
    assert len(small.chosen) == 1
    assert len(big.chosen) >= len(alone.chosen) - 2


def test_items_are_taken_best_first_and_rendered_in_render_order() -> None:
    draft = SectionDraft(
        "thread",
        "Thread",
        1.0,
        [
            Candidate("newest turn", "c", render_key=3),
            Candidate("older turn", "b", render_key=2),
            Candidate("oldest turn " * 40, "a", render_key=1),
        ],
    )
    text = fit(HEADER, [draft], 40, count_tokens)
    assert [c.item for c in draft.chosen] == ["c", "b"]
    assert text.index("older turn") < text.index("newest turn")
    assert draft.omitted == 1


def test_a_budget_smaller_than_the_header_yields_nothing() -> None:
    draft = section("facts", ["likes tea"])
    assert fit(HEADER, [draft], 3, count_tokens) == ""
    assert draft.chosen == []


def test_a_line_that_restates_lines_the_block_shows_goes_after_those_that_do_not() -> None:
    turns = SectionDraft(
        "recent",
        "Recent",
        1.0,
        [Candidate(f"user: turn {n}", f"turn {n}", render_key=n, key=f"m{n}") for n in (3, 2)],
    )
    # Newest first, as a summary section offers its entries: the newest repeats turn 3.
    entries = SectionDraft(
        "thread",
        "Thread",
        1.0,
        [
            Candidate("Q: turn 3 A: done", "entry 3", render_key=3, restates=frozenset({"m3"})),
            Candidate("Q: turn 2 A: done", "entry 2", render_key=2, restates=frozenset({"m2"})),
            Candidate("Q: turn 1 A: done", "entry 1", render_key=1),
        ],
    )
    roomy = fit(HEADER, [entries, turns], 200, count_tokens)
    assert [c.item for c in entries.chosen] == ["entry 1", "entry 3", "entry 2"]
    assert "turn 3 A: done" in roomy  # with room to spare the overlap stays

    for budget in range(20, 80):
        for draft in (entries, turns):
            draft.chosen.clear()
        fit(HEADER, [entries, turns], budget, count_tokens)
        chosen = {c.item for c in entries.chosen}
        shown = {c.key for c in turns.chosen}
        if "entry 3" in chosen and "m3" in shown:
            assert chosen >= {"entry 1"} | ({"entry 2"} if "m2" not in shown else set())
        if turns.chosen and entries.chosen:
            assert "entry 1" in chosen


def test_a_run_stops_at_the_first_item_that_does_not_fit_where_other_sections_skip_it() -> None:
    lines = ["short newest", "a much longer line that says a great deal " * 3, "short oldest"]
    skipped = 0
    for budget in range(10, 120):
        run = SectionDraft(
            "recent",
            "Recent",
            1.0,
            [Candidate(line, n, render_key=-n) for n, line in enumerate(lines)],
            run=True,
        )
        ranked = section("facts", lines)
        fit(HEADER, [run], budget, count_tokens)
        fit(HEADER, [ranked], budget, count_tokens)
        taken = [c.item for c in run.chosen]
        assert taken == list(range(len(taken))), budget  # a prefix: nothing skipped
        if [c.item for c in ranked.chosen] == ["short newest", "short oldest"]:
            skipped += 1  # best first passes over the long line for the short one after it
            assert taken == [0], budget
    assert skipped


@pytest.mark.parametrize("seed", range(20))
def test_a_run_of_turns_takes_whole_turns_newest_first_and_never_skips_one(seed: int) -> None:
    rng = random.Random(seed)
    words = ["tea", "kyoto", "ünïcode", "42", "the", "trip", "🙂", "spring"]
    newest_first: list[Candidate[str]] = []
    for turn in range(rng.randint(1, 10)):
        size = rng.randint(1, 3)
        # Newest message first: the replies, then the question that opens the turn.
        for reply in reversed(range(size)):
            line = " ".join(rng.choices(words, k=rng.randint(1, 30)))
            newest_first.append(
                Candidate(line, f"{turn}.{reply}", render_key=-turn * 10 + reply, unit=turn)
            )
    facts = [" ".join(rng.choices(words, k=rng.randint(1, 30))) for _ in range(6)]
    newest_turn = [c.line for c in newest_first if c.unit == 0]
    # What the newest turn alone costs, counted part by part as the budget counts it.
    parts = [HEADER, "\n\n", "## Recent", "\n\n"]
    smallest = sum(map(count_tokens, parts)) + sum(count_tokens(line) + 1 for line in newest_turn)
    for budget in range(20, 500, 7):
        for others in ([], [section("facts", facts, weight=2.0)]):
            run = SectionDraft("recent", "Recent", 3.0, newest_first, run=True)
            fit(HEADER, [*others, run], budget, count_tokens)
            taken = run.chosen
            assert taken == newest_first[: len(taken)], budget  # newest first, no gap
            assert all(c.unit in {t.unit for t in taken} for c in taken), budget
            whole = [c for c in newest_first if c.unit in {t.unit for t in taken}]
            assert whole == taken, budget  # whole turns only
            if not others:
                assert taken or smallest > budget, budget  # the newest turn, when it fits


def test_a_sections_leading_unit_is_taken_before_any_sections_ceiling() -> None:
    """The newest turn of a conversation, too long for its section's ceiling once the sections
    before it took theirs, is still shown: it is placed first, and they share what is left."""
    before = [section(f"s{i}", [f"remembered line {i}.{n}" for n in range(6)]) for i in range(4)]
    newest = "user: " + "a long question about the trip " * 6
    recent = SectionDraft(
        "recent",
        "Recent",
        1.0,
        [
            Candidate(newest, "newest", render_key=2, unit=0),
            Candidate("user: an older question", "older", render_key=1, unit=1),
        ],
        run=True,
        leading=1,
    )

    text = fit(HEADER, [*before, recent], 120, count_tokens)

    assert [c.item for c in recent.chosen][:1] == ["newest"]
    assert newest in text and count_tokens(text) <= 120
    assert any(s.chosen for s in before)
    unled = [section(f"s{i}", [f"remembered line {i}.{n}" for n in range(6)]) for i in range(4)]
    recent.chosen, recent.leading = [], 0
    fit(HEADER, [*unled, recent], 120, count_tokens)
    assert recent.chosen == []  # without the lead, the shares before it leave it no room


def test_a_sections_best_item_that_fits_is_taken_over_its_lesser_ones_and_later_sections() -> None:
    """The facts' share is smaller than their best line: the line is still taken whenever the
    block can hold it, never the junk line after it or the episodes in its place."""
    best = "Ada prefers green tea to coffee: sencha in the morning, jasmine after lunch."
    for budget in range(20, 120):
        facts = section("facts", [best, "ok"], weight=2.0)
        episodes = section("episodes", ["new one", "bump", "lunch at noon"], weight=1.5)
        alone = section("facts", [best], weight=2.0)
        fits_alone = fit(HEADER, [alone], budget, count_tokens) != ""

        text = fit(HEADER, [facts, episodes], budget, count_tokens)

        assert count_tokens(text) <= budget
        assert (best in text) == fits_alone, budget


def test_spares_take_only_the_places_of_items_passed_over() -> None:
    """A memory section shows at most its first `most` items; the candidates after them are
    shown only in place of those too long for the budget, and only those count as omitted."""
    long = "a remembered episode that goes on and on " * 20
    lines = [long, "short one", long + "again", "short two", "spare one", "spare two", "spare 3"]
    for budget, expected in ((2000, lines[:4]), (90, ["short one", "short two", *lines[4:6]])):
        draft = SectionDraft(
            "episodes",
            "Episodes",
            1.0,
            [Candidate(line, line, render_key=i) for i, line in enumerate(lines)],
            most=4,
        )

        fit(HEADER, [draft], budget, count_tokens)

        assert sorted(c.item for c in draft.chosen) == sorted(expected), budget
    assert draft.omitted == 2  # the two long ones; the spares not taken are no loss
