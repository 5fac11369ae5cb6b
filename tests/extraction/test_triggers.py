"""Trigger arithmetic of the sync strategies (seed 003): pure functions, no database."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from service.extraction.triggers import (
    Decision,
    Strategy,
    TriggerRules,
    complete_prefix,
    decide,
    windows,
)

FAREWELLS = ("goodbye", "that's all for now", "see you")


@dataclass(frozen=True)
class Msg:
    seq: int
    role: str
    content: str


def thread_of(*turns: tuple[str, str]) -> list[Msg]:
    return [Msg(seq, role, content) for seq, (role, content) in enumerate(turns)]


def exchanges(count: int, *, question: str = "tell me about the weather in Lisbon") -> list[Msg]:
    turns: list[tuple[str, str]] = []
    for n in range(1, count + 1):
        turns += [("user", f"{question} ({n})"), ("assistant", f"here is answer number {n}")]
    return thread_of(*turns)


def rules(strategy: Strategy, *, interval: int = 3, min_chars: int = 20) -> TriggerRules:
    return TriggerRules(
        strategy=strategy, interval=interval, farewell_phrases=FAREWELLS, min_chars=min_chars
    )


def test_a_trailing_question_nobody_answered_is_not_a_complete_turn() -> None:
    messages = exchanges(2)
    assert complete_prefix(messages) == 4
    asked = [*messages, Msg(4, "user", "and tomorrow?")]
    assert complete_prefix(asked) == 4
    # A tool reply answers it as well as an assistant message would.
    assert complete_prefix([*asked, Msg(5, "tool", "{}")]) == 6
    # A later question completes the earlier one, answered or not.
    two_questions = thread_of(("user", "first question here"), ("user", "second question"))
    assert complete_prefix(two_questions) == 1
    assert complete_prefix(thread_of(("assistant", "welcome back"))) == 1


def test_every_turn_runs_once_a_turn_is_complete() -> None:
    question = thread_of(("user", "I moved to Lisbon last month, any tips?"))
    assert decide(question, rules("every_turn")) == Decision(False, "no_turns", 0, 0)
    answered = [*question, Msg(1, "assistant", "Welcome to Lisbon!")]
    assert decide(answered, rules("every_turn")) == Decision(True, "every_turn", 2, 1)


@pytest.mark.parametrize(("turns", "due"), [(1, False), (2, False), (3, True), (4, True)])
def test_interval_runs_after_n_human_turns_since_the_last_pass(turns: int, due: bool) -> None:
    decision = decide(exchanges(turns), rules("interval", interval=3))
    assert decision.due is due
    assert decision.humans == turns
    assert decision.reason == ("interval" if due else "not_due")


def test_interval_does_not_count_the_unanswered_question() -> None:
    messages = [*exchanges(2), Msg(4, "user", "what about a third question then?")]
    decision = decide(messages, rules("interval", interval=3))
    assert (decision.due, decision.humans, decision.complete) == (False, 2, 4)


@pytest.mark.parametrize("strategy", ["farewell", "both"])
def test_farewell_runs_when_a_new_human_message_says_goodbye(strategy: Strategy) -> None:
    messages = thread_of(
        ("user", "I prefer answers in German from now on."),
        ("assistant", "Verstanden."),
        ("user", "Thanks, that's ALL for now!"),
        ("assistant", "Bis bald."),
    )
    assert decide(messages, rules(strategy, interval=5)) == Decision(True, "farewell", 4, 2)
    # Not before the goodbye is answered, and never for the assistant's own goodbye.
    assert not decide(messages[:3], rules(strategy, interval=5)).due
    assistant_bye = thread_of(("user", "What is the capital of France?"), ("assistant", "Goodbye"))
    assert not decide(assistant_bye, rules(strategy, interval=5)).due


def test_farewell_alone_ignores_the_interval_and_both_takes_either() -> None:
    messages = exchanges(3)
    assert decide(messages, rules("farewell", interval=3)).reason == "not_due"
    assert decide(messages, rules("both", interval=3)) == Decision(True, "interval", 6, 3)


def test_too_little_conversation_waits_for_more() -> None:
    small = thread_of(("user", "hi"), ("assistant", "hello!"))
    assert decide(small, rules("every_turn")) == Decision(False, "too_small", 2, 1)
    assert decide(small, rules("every_turn", min_chars=0)).due


def test_windows_cut_at_turn_boundaries_and_cover_everything() -> None:
    messages = exchanges(5)
    assert windows(messages, 4) == [(0, 4), (4, 8), (8, 10)]
    assert windows(messages, 5) == [(0, 4), (4, 8), (8, 10)]
    assert windows(messages, 100) == [(0, 10)]
    # One turn longer than a window is cut inside the turn rather than never read.
    long_turn = thread_of(("user", "run the tools"), *[("tool", "{}")] * 5)
    assert windows(long_turn, 4) == [(0, 4), (4, 6)]
