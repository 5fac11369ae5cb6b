"""Fitting memory into a token budget: sections with ceilings, whole items, nothing over.

Pure functions over rendered lines, so the rules can be tested apart from retrieval:
- every section gets a ceiling proportional to its weight among the sections that still have
  candidates, so what an empty (or modest) section leaves flows on to the ones after it;
- a section's best item that fits what is left of the budget is taken even when its ceiling
  is smaller, before the sections after it take their shares: a share too small for it would
  only go to lesser items, its own or those of the sections after it, and the sections come in
  priority order;
- a second pass offers what is still unspent to items skipped in the first, in section order;
- an item that may say again what other items say (a summary entry of turns also offered
  verbatim) waits for both passes: then it is offered what is left if the block does not show
  all it restates, and last of all if it does, since it would add nothing but its cost;
- items are taken whole or not at all, best first, and an item that does not fit is passed
  over for the smaller ones after it, up to the section's most (`SectionDraft.most`: a
  memory section's candidates after its first k are spares, shown only in place of items
  passed over); a conversation's section is a run instead
  (`SectionDraft.run`): newest first, whole turns, and nothing older once one does not fit, so
  it never shows a message without the ones between it and the newest;
- a section's leading items (`SectionDraft.leading`: the conversation's newest turn, what the
  next model call answers) are taken before any section's ceiling, from the whole budget;
- the final text is counted again and trimmed until it fits, because a BPE tokenizer's count of
  a joined text need not equal the sum of its parts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

ItemT = TypeVar("ItemT")


@dataclass
class Candidate(Generic[ItemT]):
    line: str
    item: ItemT
    # Position in the rendered section (e.g. a message's seq); selection order is list order.
    render_key: float = 0.0
    # What the line shows, for lines of other sections that say it again (a message's id).
    key: str | None = None
    # The keys of the lines this one says again: when the block shows all of them, this line
    # adds nothing but its cost, so whatever the block does not hold yet goes first.
    restates: frozenset[str] = frozenset()
    # Adjacent candidates of one unit (a conversation's turn: a question and its replies) are
    # taken together or not at all; None: the candidate is a unit of its own.
    unit: object = None


@dataclass
class SectionDraft(Generic[ItemT]):
    name: str
    title: str
    weight: float
    candidates: list[Candidate[ItemT]]
    # Optional wrapper lines around the items (e.g. "<memory>" … "</memory>").
    opening: str | None = None
    closing: str | None = None
    chosen: list[Candidate[ItemT]] = field(default_factory=list)
    # Items left out before they became candidates (turns older than the budget could hold).
    left_out: int = 0
    # A run (a conversation, newest first): what it shows ends at its first candidate and
    # leaves none out between, so once a unit does not fit nothing after it is taken.
    run: bool = False
    # How many of its first units are taken before any section's ceiling, and dropped last.
    leading: int = 0
    # The most units it shows (None: as many as fit). The candidates after its first `most`
    # units are spares: they can take only the places of units passed over for the budget.
    most: int | None = None

    def render(self) -> str:
        if not self.chosen:
            return ""
        lines = [f"## {self.title}"]
        if self.opening:
            lines.append(self.opening)
        lines.extend(c.line for c in sorted(self.chosen, key=lambda c: c.render_key))
        if self.closing:
            lines.append(self.closing)
        return "\n".join(lines)

    @property
    def omitted(self) -> int:
        """The candidates it would show without a budget and does not (spares are none of
        them), and those left out before they became candidates."""
        shown = {id(candidate) for candidate in self.chosen}
        wanted = [c for unit in _units(self.candidates)[: self.most] for c in unit]
        return sum(id(candidate) not in shown for candidate in wanted) + self.left_out


def render_block(header: str, sections: list[SectionDraft[ItemT]]) -> str:
    parts = [section.render() for section in sections]
    body = "\n\n".join(part for part in parts if part)
    return f"{header}\n\n{body}" if body else ""


def room_alone(header: str, title: str, budget: int, count: Callable[[str], int]) -> int:
    """What the lines of a section titled `title` (without wrappers) may cost, each with its
    newline, in a block of `budget` tokens that shows nothing else, counted as `fit` counts."""
    separator = count("\n\n")
    return budget - count(header) - separator - _overhead(title, [], separator, count)


def _overhead(title: str, wrappers: list[str], separator: int, count: Callable[[str], int]) -> int:
    """What a section costs besides its lines: its heading, its wrapper lines and the
    separator before it."""
    return count(f"## {title}") + sum(count(w) + 1 for w in wrappers) + separator


def fit(
    header: str,
    sections: list[SectionDraft[ItemT]],
    budget: int,
    count: Callable[[str], int],
) -> str:
    """Choose items into `sections` (in place) and return the rendered text (≤ budget tokens)."""
    separator = count("\n\n")
    remaining = budget - count(header) - separator
    if remaining <= 0:
        return ""

    def overhead(section: SectionDraft[ItemT]) -> int:
        wrappers = [w for w in (section.opening, section.closing) if w]
        return _overhead(section.title, wrappers, separator, count)

    costs: dict[int, int] = {}

    def cost_of(candidate: Candidate[ItemT]) -> int:
        if id(candidate) not in costs:
            costs[id(candidate)] = count(candidate.line) + 1  # its newline
        return costs[id(candidate)]

    def take(
        section: SectionDraft[ItemT],
        allowance: int,
        admit: Callable[[Candidate[ItemT]], bool] | None = None,
        units: int | None = None,
        *,
        most: int | None = None,
    ) -> int:
        """Take `section`'s units (its first `units`) best first within `allowance`, at most
        `most` of them now and its own most in all; return what they cost."""
        spent = 0
        taken = {id(chosen) for chosen in section.chosen}
        shown = len(_units(section.chosen))
        room = None if section.most is None else section.most - shown
        if most is not None:
            room = most if room is None else min(room, most)
        for unit in _units(section.candidates)[:units]:
            if room is not None and room <= 0:
                break
            if id(unit[0]) in taken:
                continue
            if admit is None or all(admit(candidate) for candidate in unit):
                cost = sum(cost_of(candidate) for candidate in unit)
                if not section.chosen:
                    cost += overhead(section)
                if spent + cost <= allowance:
                    section.chosen.extend(unit)
                    spent += cost
                    if room is not None:
                        room -= 1
                    continue
            if section.run:
                break
        return spent

    def restates_nothing(candidate: Candidate[ItemT]) -> bool:
        return not candidate.restates

    def adds_to_the_block(candidate: Candidate[ItemT]) -> bool:
        shown = {c.key for s in sections for c in s.chosen if c.key is not None}
        return bool(candidate.restates - shown)

    live = [s for s in sections if s.candidates]
    for section in live:
        if section.leading:
            remaining -= take(section, remaining, restates_nothing, section.leading)
    weight_left = sum(s.weight for s in live)
    for section in live:
        ceiling = int(remaining * section.weight / weight_left) if weight_left else remaining
        weight_left -= section.weight
        best = 0
        if not section.chosen:
            # Its best unit that fits what is left, whatever its share: see the module's rules.
            best = take(section, remaining, restates_nothing, most=1)
            remaining -= best
        remaining -= take(section, ceiling - best, restates_nothing)
    for admit in (restates_nothing, adds_to_the_block, None):
        for section in live:
            remaining -= take(section, remaining, admit)

    text = render_block(header, sections)
    while text and count(text) > budget:
        _drop_least_valuable(sections)
        text = render_block(header, sections)
    return text


def _units(candidates: list[Candidate[ItemT]]) -> list[list[Candidate[ItemT]]]:
    """`candidates` in list order, adjacent ones of one unit together."""
    units: list[list[Candidate[ItemT]]] = []
    for candidate in candidates:
        if units and candidate.unit is not None and units[-1][-1].unit == candidate.unit:
            units[-1].append(candidate)
        else:
            units.append([candidate])
    return units


def _drop_least_valuable(sections: list[SectionDraft[ItemT]]) -> None:
    """Drop the last-chosen unit of the last section that has any besides its leading ones
    (the lowest priority); the leading units last of all."""
    for leading_too in (False, True):
        for section in reversed(sections):
            if len(_units(section.chosen)) > (0 if leading_too else section.leading):
                unit = section.chosen.pop().unit
                while unit is not None and section.chosen and section.chosen[-1].unit == unit:
                    section.chosen.pop()
                return
