"""When a thread's new messages are worth an extraction pass (the configured strategy).

Vocabulary. The *cursor* is the position (`seq`) of the last message an earlier pass of the
thread processed; the *pending* messages are those after it. A *human turn* is a `user`
message and what follows it up to the next `user` message. A turn is *complete* once something
follows its human message: every pending turn but a trailing one nobody has answered yet (no
assistant or tool message after it). A turn is read once the assistant has replied, because
the reply often confirms or corrects what the user said; appends arrive one request at a time,
so a question waits for its answer (or for the next question) before it is read.

A pass over the complete pending turns is due when:

* `every_turn` — there is at least one;
* `interval` — there are at least N (`extraction_interval_turns`), i.e. N human turns arrived
  since the last pass;
* `farewell` — one of their human messages contains a farewell phrase (case-insensitive);
* `both` — `interval` or `farewell`;

and, in every case, their user and assistant text has at least `min_chars` characters (below,
the turns wait for more conversation: a greeting holds no durable fact worth a model call).

A due pass reads all complete pending turns, in windows of at most `max_window` messages cut at
turn boundaries, so a long backlog (the LLM was down for a while) is caught up in several calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from service.threads.schemas import HUMAN_ROLE

ANSWER_ROLES = frozenset({"assistant", "tool"})
CONVERSATION_ROLES = frozenset({HUMAN_ROLE, "assistant"})

Strategy = Literal["every_turn", "interval", "farewell", "both"]
Trigger = Literal["every_turn", "interval", "farewell"]


class MessageLike(Protocol):
    @property
    def seq(self) -> int: ...

    @property
    def role(self) -> str: ...

    @property
    def content(self) -> str: ...


@dataclass(frozen=True, slots=True)
class TriggerRules:
    strategy: Strategy
    interval: int
    farewell_phrases: tuple[str, ...]
    min_chars: int


@dataclass(frozen=True, slots=True)
class Decision:
    """Whether a pass is due over the pending messages, and over which of them.

    `complete` is the number of leading pending messages that form complete turns (the pass
    reads `pending[:complete]`); `humans` counts the human turns among them. `reason` says why
    no pass is due (`no_turns`, `not_due`, `too_small`) or which trigger fired.
    """

    due: bool
    reason: str
    complete: int
    humans: int


def complete_prefix(pending: Sequence[MessageLike]) -> int:
    """How many leading pending messages belong to complete turns."""
    humans = [index for index, message in enumerate(pending) if message.role == HUMAN_ROLE]
    if not humans:
        return len(pending)
    last = humans[-1]
    if any(message.role in ANSWER_ROLES for message in pending[last + 1 :]):
        return len(pending)
    return last


def is_farewell(content: str, phrases: Sequence[str]) -> bool:
    lowered = content.casefold()
    return any(phrase.casefold() in lowered for phrase in phrases if phrase.strip())


def conversation_chars(messages: Sequence[MessageLike]) -> int:
    """Characters of user and assistant text (what the size minimum is measured on)."""
    return sum(len(m.content.strip()) for m in messages if m.role in CONVERSATION_ROLES)


def decide(pending: Sequence[MessageLike], rules: TriggerRules) -> Decision:
    """Whether a pass is due over the pending messages (see the module docstring)."""
    complete = complete_prefix(pending)
    turns = pending[:complete]
    human_messages = [m for m in turns if m.role == HUMAN_ROLE]
    humans = len(human_messages)
    if humans == 0:
        return Decision(False, "no_turns", complete, 0)
    trigger = _fired(human_messages, rules)
    if trigger is None:
        return Decision(False, "not_due", complete, humans)
    if conversation_chars(turns) < rules.min_chars:
        return Decision(False, "too_small", complete, humans)
    return Decision(True, trigger, complete, humans)


def _fired(human_messages: Sequence[MessageLike], rules: TriggerRules) -> Trigger | None:
    if rules.strategy == "every_turn":
        return "every_turn"
    farewell = rules.strategy in ("farewell", "both") and any(
        is_farewell(m.content, rules.farewell_phrases) for m in human_messages
    )
    interval = rules.strategy in ("interval", "both") and len(human_messages) >= rules.interval
    if interval:
        return "interval"
    if farewell:
        return "farewell"
    return None


def windows(turns: Sequence[MessageLike], max_window: int) -> list[tuple[int, int]]:
    """`[start, end)` index ranges covering `turns` in order, each at most `max_window` long and
    cut before a human message whenever the range holds more than one turn."""
    if max_window < 1:
        raise ValueError("max_window must be at least 1")
    ranges: list[tuple[int, int]] = []
    start = 0
    while start < len(turns):
        end = min(start + max_window, len(turns))
        if end < len(turns):
            boundary = max(
                (i for i in range(start + 1, end + 1) if turns[i].role == HUMAN_ROLE),
                default=None,
            )
            if boundary is not None:
                end = boundary
        ranges.append((start, end))
        start = end
    return ranges
