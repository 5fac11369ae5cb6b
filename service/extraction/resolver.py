"""Deterministic resolution: what an extraction proposal changes in what is known.

Pure functions over plain data (no model, no database), so every rule is unit-tested apart
from the LLM. The pipeline gathers the inputs — the proposal, the live facts it may touch and
the cosine of each candidate to each of them — and applies the result.

Rules 1-4 admit candidates from the most to the least confident. The admitted ones are then
reconciled one after another in the order of their evidence (`said_at`, the newest message each
quotes; among candidates of one message, the most confident first), each with the facts live at
that point: the stored ones this pass has not superseded, and those it wrote for earlier
candidates. A pass reading several turns therefore ends where passes one turn apart would: the
later message's value is current, the earlier one written and superseded by it.

1. **Validation** (as the API does): empty text is dropped; text over 4000 characters, or text
   or evidence that looks like a secret (`find_secret`), is refused; so is text holding the
   placeholder of a secret masked in the messages the model read (`proposal_refusal`); and so
   is a fact the API would refuse as a request body (`api_refusal`: a NUL character or a lone
   surrogate in any of its strings, …), which no attempt to write could store.
2. **Scope**: an org-scoped fact needs `org_writes` (the appending principal was an admin — a
   model's say-so never authorizes it) and one of the org categories.
3. **Confidence**: below `min_confidence` (0.7) dropped; below `quarantine_confidence` (0.82)
   written as `proposed` with `needs_review`; otherwise `confirmed`.
4. **Limit**: at most `max_facts` (3 per human turn) facts are admitted per pass; a candidate
   with the text of one admitted already takes no place of its own.
5. **Duplicates**: the same normalised text as a live fact of the same owner, or a cosine of at
   least `near_duplicate_cosine` to one (facts it explicitly replaces excepted), is no new row:
   that fact is re-confirmed (`last_confirmed_at`), and a proposed one is confirmed by a
   confident candidate — except a flagged one (rule 7), which waits for the user: the model
   saying it again is no stronger evidence against the deliberate fact than saying it once.
   Confirmed so, a fact replaces the live facts its `proposed_supersedes` names, as a
   reviewer's confirmation would (reason `confirmed`); one that would replace a deliberate
   fact on weak evidence (rule 7) stays proposed instead, the deliberate fact `flagged`.
   A repeat of what the pass wrote or re-confirmed already is dropped (`duplicate_in_pass`);
   a confident repeat, in a later message, of a fact the pass wrote as proposed (not flagged)
   confirms that fact, as a later pass would, with what it names. Similarity is not enough
   when both have the same subject and the candidate has a content word the fact lacks
   ("… full marathon" after "… half marathon", "35 years old" after "34"): that is a changed
   value and goes on to rule 6 — taking it for a repeat would lose it, while a restatement
   replacing its older wording loses nothing.
6. **Supersession**, by confirmed candidates only. The model's `supersedes` is a hint, not
   the source of truth: the resolver finds the live facts a candidate contradicts itself,
   among the facts its owner owns (the user's own facts; org facts only for an org fact) —
   stored ones, and those the pass wrote for candidates of earlier messages (each superseded
   once, by the first later candidate that contradicts it) — by these rules:
   - *explicit*: ids the model named;
   - *subject*: a fact of the same category with the same subject key (`home_city`), unless
     the subject is multi-valued (`multi_valued_subjects`: hobbies, pets, languages spoken, …
     hold several current values; those facts add up, but one choice among them —
     `response_language`, `favorite_instrument`, see `ResolverRules.multi_valued` — is
     single-valued) — in every category mode;
   - *similar*: in a `replace` category (one current fact per topic), when the candidate or the
     fact has no subject, a fact at least `contradiction_cosine` (0.75) similar to the
     candidate. Two facts whose subjects are both known and differ are different topics and
     never replace each other without the model naming them; neither do subject-less facts
     that are not similar (`User prefers dark mode.` leaves `User prefers metric units.`).
   `merge` and `accumulate` categories have no similarity rule: their facts come in many.
   Within one message a fact is decided once, by its most confident candidate: a less
   confident one that repeats or contradicts a fact that candidate superseded, re-confirmed or
   wrote is dropped (`conflict`, or `duplicate_in_pass` for a repeat).
   A proposed candidate (rule 3) finds what it contradicts by the same rules but supersedes
   nothing: it keeps those facts as its `proposed_supersedes`, what it replaces once a
   reviewer or a confident repeat (rule 5) confirms it — a proposal naming nothing would,
   once confirmed, stand current beside the fact it contradicts. It changes nothing now, so a
   more confident candidate of its message deciding the topic is no conflict for it: what
   that one re-confirmed or wrote is among its targets.
7. **Deliberate facts**: a fact written through the API or changed by the user (any history
   event by an actor other than the write path) is superseded only on strong evidence: the
   same subject key (the user's own label of the topic), or the model naming it *and* a match
   by similarity. On weaker evidence (similarity alone, or the model's word alone) the
   candidate is written as `proposed` with `needs_review`, naming the fact for the reviewer
   (`flagged`), and the deliberate fact stays current; so is a proposed candidate that would
   replace a deliberate fact on weak evidence, which then waits for the user too.
8. **Removal**: `remove` ids of live facts the user owns (org facts only with `org_writes`) are
   superseded without a replacement; a deliberate fact is not removed by the model (flagged).

Supersession never deletes; the pipeline marks the old fact `superseded` with `superseded_by`,
`invalid_at` (the time of the message that announced the change) and a history event.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from service.kit.secrets import MASK, find_secret, is_credential_name
from service.kit.types import InputRefused, check_json, in_unit_interval, visible_text
from service.memories.models import normalise_text
from service.memories.schemas import MEMORY_TEXT_MAX, MemoryCreate
from service.profile.schemas import PatchAdd
from service.profile.service import OVERLAY_KEYS

Scope = Literal["user", "org"]
CombineMode = Literal["replace", "merge", "accumulate"]
SupersedeReason = Literal["explicit", "subject", "similar", "confirmed"]

EVIDENCE_MAX = 2000
EPISODE_CATEGORY = "episode"
# Matched with `fullmatch`: a `$` would also admit a trailing newline.
PROFILE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,127}")
PROFILE_VALUE_MAX = 500
# Keys the identity provider fills (the auth overlay): the model never overrides them.
ACCOUNT_KEYS = frozenset(OVERLAY_KEYS)
_WORD = re.compile(r"[^\W_]+")
_FILLER_WORDS = frozenset(
    {"a", "an", "the", "is", "am", "are", "was", "be", "user", "s", "and", "also", "still", "too"}
)


@dataclass(frozen=True, slots=True)
class KnownFact:
    """A live fact a candidate may duplicate or supersede."""

    id: uuid.UUID
    scope: str
    user_id: str | None
    category: str | None
    subject: str | None
    text: str
    lifecycle: str
    # Written through the API or changed by the user: never replaced on weak evidence.
    deliberate: bool = False
    # Proposed because it would replace a deliberate fact (rule 7): the user confirms it, not
    # the model saying it again.
    flagged: bool = False
    # A proposed fact's targets (`metadata.proposed_supersedes`): what it replaces once it is
    # confirmed.
    proposed_supersedes: tuple[uuid.UUID, ...] = ()


@dataclass(frozen=True, slots=True)
class Candidate:
    """A fact the model proposed; `supersedes` holds memory ids (pass-local ids resolved)."""

    index: int
    text: str
    category: str
    subject: str | None
    scope: Scope
    confidence: float
    evidence: str
    supersedes: tuple[uuid.UUID, ...] = ()
    # Where it was said: the position of the newest message its evidence quotes. A later
    # statement about the same topic is the current one.
    said_at: int = 0


@dataclass(frozen=True, slots=True)
class ResolverRules:
    min_confidence: float
    quarantine_confidence: float
    near_duplicate_cosine: float
    max_facts: int
    category_modes: Mapping[str, CombineMode]
    org_categories: frozenset[str]
    contradiction_cosine: float = 0.75
    multi_valued_subjects: frozenset[str] = frozenset()
    single_choice_words: frozenset[str] = frozenset()

    def least_cosine_acted_on(self, category: str) -> float:
        """The least cosine at which a fact of `category` can matter to a new one of it by
        similarity alone: a repeat (rule 5), or in a `replace` category a fact it supersedes as
        similar (rule 6). Facts of the category less similar matter only by their subject."""
        if self.category_modes.get(category) == "replace":
            return min(self.near_duplicate_cosine, self.contradiction_cosine)
        return self.near_duplicate_cosine

    def multi_valued(self, subject: str | None) -> bool:
        """Whether facts about `subject` add up: one of its words is a multi-valued subject in
        the plural (`languages_spoken`, `pets`), or in the singular (`language`, `food_allergy`)
        unless another of its words names one choice (`response_language`,
        `preferred_language`, `favorite_instrument`: one current value, replaced when it
        changes). A plural says several are meant, whatever qualifies it
        (`preferred_languages`)."""
        if subject is None:
            return False
        words = subject.split("_")
        one_choice = any(word in self.single_choice_words for word in words)
        for word in words:
            if word in self.multi_valued_subjects:
                if not one_choice:
                    return True
            elif any(form in self.multi_valued_subjects for form in _singular_forms(word)[1:]):
                return True
        return False


@dataclass(frozen=True, slots=True)
class Known:
    """What the pass knows: whose memory it is, whether org facts may change, the live facts
    that matter, the cosine of candidate `index` to fact `id` and the cosine between two
    candidates, keyed by their indexes, the smaller first (absent: unknown)."""

    user_id: str
    org_writes: bool
    facts: Mapping[uuid.UUID, KnownFact]
    cosine: Mapping[tuple[int, uuid.UUID], float] = field(default_factory=dict)
    between: Mapping[tuple[int, int], float] = field(default_factory=dict)

    def cosine_between(self, one: int, other: int) -> float | None:
        return self.between.get((min(one, other), max(one, other)))


@dataclass(frozen=True, slots=True)
class Supersession:
    fact_id: uuid.UUID
    reason: SupersedeReason


@dataclass(frozen=True, slots=True)
class EarlierSupersession:
    """A fact the same pass writes for an earlier candidate (`candidate_index`), superseded by
    a later one: it was current until the later message."""

    candidate_index: int
    reason: SupersedeReason


@dataclass(frozen=True, slots=True)
class NewFact:
    candidate: Candidate
    lifecycle: Literal["proposed", "confirmed"]
    supersedes: tuple[Supersession, ...]
    # A proposed fact's targets, kept for whoever reviews it.
    proposed_supersedes: tuple[uuid.UUID, ...] = ()
    # Proposed because it would replace a deliberate fact on weak evidence.
    flagged: bool = False
    # Facts this pass writes for candidates of earlier messages that this one replaces.
    supersedes_earlier: tuple[EarlierSupersession, ...] = ()
    # A proposed fact's targets among the facts this pass writes for earlier candidates (by
    # candidate index): once written, their ids join `proposed_supersedes`.
    proposed_supersedes_earlier: tuple[int, ...] = ()

    @property
    def needs_review(self) -> bool:
        return self.lifecycle == "proposed"


@dataclass(frozen=True, slots=True)
class Reconfirmation:
    fact_id: uuid.UUID
    candidate_index: int
    promote: bool
    confidence: float
    cosine: float | None
    # What the fact, confirmed by this repeat, replaces: the live facts its
    # `proposed_supersedes` names (superseded as a reviewer's confirmation supersedes them).
    supersedes: tuple[uuid.UUID, ...] = ()


@dataclass(frozen=True, slots=True)
class Dropped:
    reason: str
    candidate_index: int | None = None
    fact_id: uuid.UUID | None = None


@dataclass(slots=True)
class Resolution:
    new_facts: list[NewFact] = field(default_factory=list)
    reconfirmations: list[Reconfirmation] = field(default_factory=list)
    removals: list[uuid.UUID] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)
    # Deliberate facts a candidate or removal would have replaced on weak evidence.
    flagged: list[uuid.UUID] = field(default_factory=list)

    def drop_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for drop in self.dropped:
            counts[drop.reason] = counts.get(drop.reason, 0) + 1
        return counts


def owns(fact: KnownFact, scope: str, user_id: str) -> bool:
    """Whether a fact belongs to the owner a `scope` candidate of `user_id` writes to."""
    if scope == "user":
        return fact.scope == "user" and fact.user_id == user_id
    return fact.scope == "org"


def refusal(text: str, evidence: str = "") -> str | None:
    """Why the API would refuse this text (and evidence), or None: the same rules."""
    visible = visible_text(text)
    if not visible:
        return "empty"
    if len(visible) > MEMORY_TEXT_MAX:
        return "too_long"
    if find_secret(text) is not None or (evidence and find_secret(evidence) is not None):
        return "secret"
    return None


def proposal_refusal(text: str, evidence: str = "") -> str | None:
    """Why a text the model proposes (a fact, an episode, a profile value) is not written: the
    API's rules (`refusal`), and the placeholder of a secret it read masked (`secret`): "User's
    card number is [secret removed]." remembers nothing but that a secret was there."""
    reason = refusal(text, evidence)
    if reason is None and MASK in text.casefold():
        return "secret"
    return reason


def api_refusal(model: type[BaseModel], body: dict[str, Any]) -> str | None:
    """Why the API would refuse `body` as a request of `model`, or None: the input guard's rules
    for every JSON body (no NUL character, no lone surrogate in any string, …), then the
    model's own. The reason is the `type` the API's 422 names (`nul_character`,
    `string_too_long`, …). The write path holds what the model proposes to the API's own
    definitions, so that a rule added there holds here too: a value the API refuses may be one
    the database refuses as well (a NUL), and written with the pass's other memories it would
    fail them all, on every attempt."""
    try:
        check_json(body, ["body"])
    except InputRefused as refused:
        return refused.kind
    try:
        model.model_validate(body)
    except ValidationError as exc:
        return str(exc.errors()[0]["type"])
    return None


def candidate_refusal(candidate: Candidate) -> str | None:
    """Why the API's rules refuse the fact a candidate proposes (rule 1), or None: its text and
    evidence (`proposal_refusal`), then every string of it as the memory it is written as
    (`api_refusal`; its provenance aside, which the write path takes from the stored messages,
    and its confidence, which rule 3 checks by the same rule). The pipeline asks this before it
    embeds a candidate or looks up the facts it may touch: a text no column can hold is no
    query parameter either. `resolve` drops the candidate with this reason."""
    return proposal_refusal(candidate.text, candidate.evidence) or api_refusal(
        MemoryCreate,
        {
            "kind": "semantic",
            "text": candidate.text,
            "scope": candidate.scope,
            "category": candidate.category,
            "evidence": candidate.evidence or None,
            "metadata": {"subject": candidate.subject},
        },
    )


def remembered_name(name: str | None) -> str | None:
    """A name a derived memory keeps beside its text (a message author's as its speaker, the
    model's subject key in its metadata): None when the API would refuse it as blank or as a
    secret ("card_4111111111111111"), so the memory (whose text passed) is still written,
    without it; kept, the refusal would fail the whole pass for good."""
    return name if name and visible_text(name) and find_secret(name) is None else None


def resolve(
    candidates: Sequence[Candidate],
    removals: Sequence[uuid.UUID],
    known: Known,
    rules: ResolverRules,
) -> Resolution:
    """Decide what the candidates and removals change (see the module docstring)."""
    result = Resolution()
    reconciliation = _Reconciliation(known, rules, result)
    admitted = _admitted(candidates, known, rules, result)
    for candidate in sorted(admitted, key=lambda c: (c.said_at, -_finite(c.confidence), c.index)):
        reconciliation.add(candidate)
    claimed, reconfirmed = reconciliation.claimed, reconciliation.reconfirmed
    for fact_id in dict.fromkeys(removals):
        fact = known.facts.get(fact_id)
        if fact is None or not (
            owns(fact, "user", known.user_id) or (known.org_writes and owns(fact, "org", ""))
        ):
            result.dropped.append(Dropped("remove_not_owned", fact_id=fact_id))
        elif fact_id in claimed or fact_id in reconfirmed:
            result.dropped.append(Dropped("remove_conflict", fact_id=fact_id))
        elif fact.deliberate:
            result.flagged.append(fact_id)
        else:
            claimed.add(fact_id)
            result.removals.append(fact_id)
    return result


def _admitted(
    candidates: Sequence[Candidate], known: Known, rules: ResolverRules, result: Resolution
) -> list[Candidate]:
    """The candidates the API's rules, the scope and the confidence floor let through, at
    most `max_facts` distinct texts of them, the most confident first (rules 1-4)."""
    admitted: list[Candidate] = []
    texts: set[tuple[str, str]] = set()
    for candidate in sorted(candidates, key=lambda c: (-_finite(c.confidence), c.index)):
        reason = _rejection(candidate, known, rules)
        key = (candidate.scope, normalise_text(candidate.text))
        if reason is None and key not in texts and len(texts) >= rules.max_facts:
            reason = "over_limit"
        if reason is not None:
            result.dropped.append(Dropped(reason, candidate.index))
            continue
        texts.add(key)
        admitted.append(candidate)
    return admitted


class _Reconciliation:
    """The admitted candidates reconciled one after another in the order of their evidence,
    each with the facts live at that point (rules 5-7)."""

    def __init__(self, known: Known, rules: ResolverRules, result: Resolution) -> None:
        self.known, self.rules, self.result = known, rules, result
        # Stored facts superseded (or removed) by this resolution, and those it re-confirmed.
        self.claimed: set[uuid.UUID] = set()
        self.reconfirmed: set[uuid.UUID] = set()
        # Facts written for earlier candidates and not superseded since, by candidate index.
        self.written: dict[int, NewFact] = {}
        # What the candidates of the message being reconciled decided: stored facts they
        # superseded or re-confirmed, and the candidates they wrote.
        self.said_at: int | None = None
        self.decided: set[uuid.UUID] = set()
        self.decided_new: set[int] = set()

    def add(self, candidate: Candidate) -> None:
        known, rules, result = self.known, self.rules, self.result
        if candidate.said_at != self.said_at:
            self.said_at, self.decided, self.decided_new = candidate.said_at, set(), set()
        confirmed = candidate.confidence >= rules.quarantine_confidence
        repeated = self._repeats_earlier(candidate, confirmed)
        if repeated is not None:
            result.dropped.append(Dropped(repeated, candidate.index))
            return
        # Facts superseded for an earlier message are no longer live; those superseded for
        # this one are still seen, as conflicts.
        superseded_before = self.claimed - self.decided
        mine = [
            f
            for f in known.facts.values()
            if f.id not in superseded_before and owns(f, candidate.scope, known.user_id)
        ]
        explicit: list[uuid.UUID] = []
        for fact_id in dict.fromkeys(candidate.supersedes):
            fact = known.facts.get(fact_id)
            if fact is None or not owns(fact, candidate.scope, known.user_id):
                result.dropped.append(Dropped("supersede_not_owned", candidate.index, fact_id))
            elif fact_id not in self.claimed and fact_id not in self.decided:
                explicit.append(fact_id)
        normalised = normalise_text(candidate.text)
        duplicate = _duplicate_of(candidate, normalised, mine, explicit, known, rules)
        if duplicate is not None:
            fact, cosine = duplicate
            if fact.id in self.claimed or fact.id in self.reconfirmed:
                # A more confident candidate of this message replaced this fact, or the pass
                # repeated it already.
                reason = "conflict" if fact.id in self.claimed else "duplicate_in_pass"
                result.dropped.append(Dropped(reason, candidate.index, fact.id))
                return
            promote = confirmed and fact.lifecycle == "proposed" and not fact.flagged
            replaces: tuple[uuid.UUID, ...] = ()
            if promote:
                replaces, held = self._confirmed_targets(
                    candidate, fact.proposed_supersedes, fact.scope
                )
                if held == "conflict":
                    result.dropped.append(Dropped("conflict", candidate.index, fact.id))
                    return
                promote = held is None
            self.reconfirmed.add(fact.id)
            self.decided.add(fact.id)
            self.claimed.update(replaces)
            self.decided.update(replaces)
            result.reconfirmations.append(
                Reconfirmation(
                    fact_id=fact.id,
                    candidate_index=candidate.index,
                    promote=promote,
                    confidence=candidate.confidence,
                    cosine=cosine,
                    supersedes=replaces,
                )
            )
            return
        # A proposed candidate finds what it would replace as a confident one finds what it
        # replaces, and keeps it for whoever confirms it (a reviewer, or a confident repeat):
        # models often name nothing, and a proposal naming nothing would, once confirmed,
        # stand current beside the very fact it contradicts. It changes nothing now, so what
        # a more confident candidate of its message decided is no conflict for it but one of
        # its targets.
        supersedes = [Supersession(fact_id, "explicit") for fact_id in explicit]
        conflicts: list[uuid.UUID | None] = []
        for fact in mine:
            if fact.id in explicit or fact.id in self.claimed:
                continue
            why = _contradiction(
                candidate,
                fact.category,
                fact.subject,
                known.cosine.get((candidate.index, fact.id)),
                rules,
            )
            if why is None:
                continue
            if confirmed and fact.id in self.decided:
                conflicts.append(fact.id)
            else:
                supersedes.append(Supersession(fact.id, why))
        earlier: list[EarlierSupersession] = []
        for index, new_fact in self.written.items():
            other = new_fact.candidate
            if other.scope != candidate.scope:
                continue
            why = _contradiction(
                candidate,
                other.category,
                other.subject,
                known.cosine_between(index, candidate.index),
                rules,
            )
            if why is None:
                continue
            if confirmed and index in self.decided_new:
                conflicts.append(None)
            else:
                earlier.append(EarlierSupersession(index, why))
        if conflicts:
            # A more confident candidate of the same message decided this topic otherwise.
            result.dropped.append(Dropped("conflict", candidate.index, conflicts[0]))
            return
        # A deliberate fact falls only to its own subject key, or to the model naming it when
        # it is also similar: one weak signal alone (similarity, or the model's word) is not
        # enough. A proposal that would replace one on weak evidence waits for the user.
        weak = [
            s.fact_id
            for s in supersedes
            if known.facts[s.fact_id].deliberate
            and not self._strong(candidate, s.fact_id, named=s.reason == "explicit")
        ]
        if weak or not confirmed:
            result.flagged.extend(weak)
            self._write(
                NewFact(
                    candidate,
                    "proposed",
                    (),
                    tuple(s.fact_id for s in supersedes),
                    flagged=bool(weak),
                    proposed_supersedes_earlier=tuple(e.candidate_index for e in earlier),
                )
            )
            return
        self.claimed.update(s.fact_id for s in supersedes)
        self.decided.update(s.fact_id for s in supersedes)
        for replaced in earlier:
            del self.written[replaced.candidate_index]
        self._write(
            NewFact(candidate, "confirmed", tuple(supersedes), supersedes_earlier=tuple(earlier))
        )

    def _repeats_earlier(self, candidate: Candidate, confirmed: bool) -> str | None:
        """Why the candidate is dropped as a repeat of a live fact the pass wrote for an earlier
        candidate (the same normalised text, or a near duplicate that brings no new value), or
        None when it repeats none. A confident repeat from a later message confirms a proposed
        one, as a later pass would, and it then replaces what it would have replaced
        (`_confirmed_targets`)."""
        normalised = normalise_text(candidate.text)
        for index, new_fact in self.written.items():
            other = new_fact.candidate
            if other.scope != candidate.scope:
                continue
            cosine = self.known.cosine_between(index, candidate.index)
            if normalise_text(other.text) != normalised and (
                cosine is None
                or cosine < self.rules.near_duplicate_cosine
                or _restated_with_news(candidate, other.subject, other.text)
            ):
                continue
            if (
                confirmed
                and new_fact.lifecycle == "proposed"
                and not new_fact.flagged
                and index not in self.decided_new
            ):
                # Of the facts it would replace that the pass writes, those no later statement
                # replaced already.
                replaces_earlier = [
                    i for i in new_fact.proposed_supersedes_earlier if i in self.written
                ]
                if any(i in self.decided_new for i in replaces_earlier):
                    return "conflict"
                replaces, held = self._confirmed_targets(
                    candidate, new_fact.proposed_supersedes, other.scope
                )
                if held == "conflict":
                    return "conflict"
                if held is None:
                    self.claimed.update(replaces)
                    self.decided.update(replaces)
                    promoted = replace(
                        new_fact,
                        lifecycle="confirmed",
                        candidate=replace(
                            other, confidence=max(other.confidence, candidate.confidence)
                        ),
                        supersedes=new_fact.supersedes
                        + tuple(Supersession(fact_id, "confirmed") for fact_id in replaces),
                        proposed_supersedes=(),
                        supersedes_earlier=new_fact.supersedes_earlier
                        + tuple(EarlierSupersession(i, "confirmed") for i in replaces_earlier),
                        proposed_supersedes_earlier=(),
                    )
                    self.result.new_facts[self.result.new_facts.index(new_fact)] = promoted
                    self.written[index] = promoted
                    for replaced in replaces_earlier:
                        del self.written[replaced]
            return "duplicate_in_pass"
        return None

    def _confirmed_targets(
        self, candidate: Candidate, named: Sequence[uuid.UUID], scope: str
    ) -> tuple[tuple[uuid.UUID, ...], Literal["conflict", "flagged"] | None]:
        """What a fact proposed for its low confidence (of `scope`, naming `named` in
        `proposed_supersedes`) replaces once `candidate`, a confident repeat, confirms it: the
        live facts it names that its owner owns and no earlier statement replaced, as a
        reviewer's confirmation would replace them. Or why the repeat does not confirm it:
        `conflict` when a more confident candidate of the same message decided one of them
        otherwise; `flagged` when one is deliberate and the repeat is weak evidence against it
        (rule 7: only the same subject key, or the model's naming with a match by similarity,
        replaces a deliberate fact) — the fact then waits for the user."""
        known = self.known
        targets: list[uuid.UUID] = []
        for fact_id in named:
            fact = known.facts.get(fact_id)
            if fact is None or not owns(fact, scope, known.user_id) or fact_id in self.claimed:
                continue
            if fact_id in self.decided:
                return (), "conflict"
            targets.append(fact_id)
        # Each of them was named when the fact was proposed: by the model, or by the
        # contradiction rules (a deliberate one they found on weak evidence flagged it then).
        weak = [
            fact_id
            for fact_id in targets
            if known.facts[fact_id].deliberate and not self._strong(candidate, fact_id, named=True)
        ]
        if weak:
            self.result.flagged.extend(f for f in weak if f not in self.result.flagged)
            return (), "flagged"
        return tuple(targets), None

    def _strong(self, candidate: Candidate, fact_id: uuid.UUID, *, named: bool) -> bool:
        """Whether the candidate is strong enough evidence to replace the deliberate fact
        `fact_id` (rule 7): the same subject key, or the model naming it (`named`) and a match
        by similarity."""
        fact = self.known.facts[fact_id]
        why = _contradiction(
            candidate,
            fact.category,
            fact.subject,
            self.known.cosine.get((candidate.index, fact_id)),
            self.rules,
        )
        return why == "subject" or (named and why is not None)

    def _write(self, new_fact: NewFact) -> None:
        self.result.new_facts.append(new_fact)
        self.written[new_fact.candidate.index] = new_fact
        self.decided_new.add(new_fact.candidate.index)


def _contradiction(
    candidate: Candidate,
    category: str | None,
    subject: str | None,
    cosine: float | None,
    rules: ResolverRules,
) -> SupersedeReason | None:
    """Why `candidate` contradicts a fact of this category and subject, at this cosine to it,
    without the model saying so (rule 6), or None."""
    if category != candidate.category:
        return None
    if candidate.subject is not None and subject is not None:
        if candidate.subject != subject or rules.multi_valued(candidate.subject):
            return None
        return "subject"
    if rules.category_modes.get(candidate.category) != "replace":
        return None
    if rules.multi_valued(candidate.subject) or rules.multi_valued(subject):
        return None
    if cosine is not None and cosine >= rules.contradiction_cosine:
        return "similar"
    return None


def _singular_forms(word: str) -> tuple[str, ...]:
    forms = [word]
    if word.endswith("ies"):
        forms.append(word[:-3] + "y")
    if word.endswith("es"):
        forms.append(word[:-2])
    if word.endswith("s"):
        forms.append(word[:-1])
    if word == "children":
        forms.append("child")
    return tuple(forms)


def _rejection(candidate: Candidate, known: Known, rules: ResolverRules) -> str | None:
    reason = candidate_refusal(candidate)
    if reason is not None:
        return reason
    if candidate.scope == "org":
        if not known.org_writes:
            return "org_not_allowed"
        if candidate.category not in rules.org_categories:
            return "org_category"
    if candidate.category not in rules.category_modes:
        return "unknown_category"
    if not in_unit_interval(candidate.confidence):
        return "invalid_confidence"
    if candidate.confidence < rules.min_confidence:
        return "low_confidence"
    return None


def _duplicate_of(
    candidate: Candidate,
    normalised: str,
    mine: Sequence[KnownFact],
    explicit: Sequence[uuid.UUID],
    known: Known,
    rules: ResolverRules,
) -> tuple[KnownFact, float | None] | None:
    """The live fact the candidate repeats: same text first, then the nearest above the
    near-duplicate cosine (a fact the candidate explicitly replaces is not a repeat)."""
    for fact in mine:
        if normalise_text(fact.text) == normalised:
            return fact, None
    best: tuple[KnownFact, float] | None = None
    for fact in mine:
        if fact.id in explicit:
            continue
        cosine = known.cosine.get((candidate.index, fact.id))
        if (
            cosine is not None
            and cosine >= rules.near_duplicate_cosine
            and (best is None or cosine > best[1])
            and not _restated_with_news(candidate, fact.subject, fact.text)
        ):
            best = (fact, cosine)
    return best


def _restated_with_news(candidate: Candidate, subject: str | None, text: str) -> bool:
    """Whether the candidate is about the same single subject as a fact with this subject and
    text and says something the fact does not (a content word it lacks): a changed value, not
    a repeat."""
    return (
        candidate.subject is not None
        and candidate.subject == subject
        and not content_words(candidate.text) <= content_words(text)
    )


def content_words(text: str) -> set[str]:
    """The words of a fact that carry its value: lower-cased, without the fillers every
    fact sentence shares ("User", "is", "a", …)."""
    return {word for word in _WORD.findall(text.casefold()) if word not in _FILLER_WORDS}


def _finite(value: float) -> float:
    return value if math.isfinite(value) else -1.0


# --- the episode and profile parts of a proposal ----------------------------------------------


def resolve_episode(episode: str | None) -> tuple[str | None, str | None]:
    """(text to store, on one line, None) or (None, why not); (None, None) without one."""
    if episode is None or not episode.strip():
        return None, None
    text = " ".join(episode.split())
    reason = proposal_refusal(episode) or api_refusal(
        MemoryCreate, {"kind": "episodic", "text": text, "category": EPISODE_CATEGORY}
    )
    if reason is not None:
        return None, reason
    return text, None


@dataclass(frozen=True, slots=True)
class ProfileProposalIn:
    key: str
    value: str
    confidence: float
    evidence: str


@dataclass(frozen=True, slots=True)
class ProfileChange:
    key: str
    value: str


def resolve_profile(
    proposals: Sequence[ProfileProposalIn], rules: ResolverRules
) -> tuple[list[ProfileChange], list[Dropped]]:
    """Profile attributes to set on the user's profile: only confident ones (a profile key has
    no review state), valid keys that are neither account keys nor credential names, short
    values, no secrets, values the API's profile patch takes (`api_refusal`); the most
    confident of a repeated key; at most `max_facts`."""
    changes: list[ProfileChange] = []
    dropped: list[Dropped] = []
    keys: set[str] = set()
    ordered = sorted(enumerate(proposals), key=lambda p: (-_finite(p[1].confidence), p[0]))
    for index, proposal in ordered:
        key, value = proposal.key.strip(), proposal.value.strip()
        reason: str | None = None
        if not PROFILE_KEY.fullmatch(key) or key in ACCOUNT_KEYS or is_credential_name(key):
            reason = "profile_key"
        elif not value or len(value) > PROFILE_VALUE_MAX:
            reason = "profile_value"
        elif proposal_refusal(value, proposal.evidence) == "secret":
            reason = "secret"
        elif refused := api_refusal(PatchAdd, {"op": "add", "path": f"/{key}", "value": value}):
            # The patch the profile service is given: the API's rules for a profile value.
            reason = refused
        elif not rules.quarantine_confidence <= _finite(proposal.confidence) <= 1.0:
            reason = "low_confidence"
        elif key in keys:
            reason = "duplicate_in_pass"
        elif len(changes) >= rules.max_facts:
            reason = "over_limit"
        if reason is not None:
            dropped.append(Dropped(f"profile:{reason}", index))
            continue
        keys.add(key)
        changes.append(ProfileChange(key, value))
    return changes, dropped
