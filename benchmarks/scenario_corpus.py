"""The realistic scenario's corpus: owners whose memories read like the write path's, in natural
chat vocabulary, built by rules from conversations read at run time (LoCoMo's, by default).

Nothing of the source is stored in the repository: the conversations are read when the
benchmark runs, split into sentences, and every memory is made from them by rules:

- **facts** (semantic, an extraction category): a first-person clause of a sentence ("I love
  hiking with my dog") in the write path's third person, "User loves hiking with their dog.";
  one clause, or two of different sentences joined ("User … and …");
- **episodes** (episodic, category `episode`): "User shared: " and one or two sentences in the
  third person, with the time of one of the owner's threads;
- **chat turns** (episodic, category `turn`): a session of a source conversation replayed as
  one of the owner's threads, as a client stores turns — the author's name as `speaker` and
  before the words, the thread as `source_thread_id`, the message's time as `event_at`. Each
  replay renames the two participants (the owner and a friend from a list of first names), and
  a session the owner already has is replayed with one sentence of each turn swapped for a
  sentence of another conversation, so no turn repeats;
- **organization memory** (scope org): a "we" clause as a fact about the team ("The team went
  …"), category `policy`, `knowledge` or `context`.

Every owner draws its own sentences and combinations from its seed, so owners differ and an
owner's texts never repeat (the service's duplicate key). Vectors are never computed per row:
the *pool* holds each unit in the form memories use it (a clause as "User …." or "The team
….", a sentence as "User shared: …", a turn as "Someone: …"), embedded once, and a row's
vector is the normalised sum of its units' vectors (plus the load benchmark's noise): a memory
of one unit gets that unit's true embedding.

Questions come in three kinds: common-word questions with no single answer ("What does the
user like to do?"), questions built from one memory's rarest words in the common frames
("What does the user say about … and …?", "When did the user mention … and …?"), and the
source's own questions about a replayed session, its names renamed, whose evidence turns are
the targets.
"""

from __future__ import annotations

import random
import re
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal, TypeVar

from benchmarks.datasets import Dataset

T = TypeVar("T")

# An owner's user memories, by kind: facts, episodes, the rest chat turns.
FACT_SHARE = 0.45
EPISODE_SHARE = 0.25
# Of facts and episodes, this share joins two sentences; the others take one.
PAIRED_SHARE = 0.4
# Replayed conversations are moved by up to this many days per owner, so owners' dates differ.
OWNER_DAY_SPREAD = 3 * 365
# Turns of one session are this far apart, so their order is their time's.
TURN_SPACING = timedelta(seconds=45)
# A fact's confidence is drawn from the write path's accepted range; below the quarantine line
# it is stored `proposed` (needing review), as the resolver stores it.
FACT_CONFIDENCE = (0.7, 1.0)
QUARANTINE_BELOW = 0.82
# A turn's pool text names no one: every replay renames its speaker, and a neutral name puts
# the pool vector nearer the renamed turns' own embeddings than the source's name does.
POOL_SPEAKER = "Someone"
# Words shorter than this never make a specific question.
SPECIFIC_WORD_MIN = 5


def _listed(spec: str) -> tuple[str, ...]:
    """Words from one space-separated string (kept compact: these are data, not code)."""
    return tuple(spec.split())


# Participants' names for replayed sessions: the owner's own and their friends'.
FIRST_NAMES = _listed(
    "Ada Ben Chiara Dev Elif Farid Greta Hugo Ilse Jomo Kasia Lars Mira Nuno Oona Pavel Quinn "
    "Rosa Sami Tove Umar Vera Wren Xiadani Yara Zeno Alba Bruno Cleo Dario Esme Felipe Gaia "
    "Hamid Iris Joel Kalani Luca Maren Niko Olu Petra Rafa Selin Timo Uma Viggo Wanda Yusuf Zora"
)

# Questions no single memory answers; about one fact; about one episode; the source's own.
QuestionKind = Literal["generic", "fact", "episode", "source"]
GENERIC: QuestionKind = "generic"
FACT_QUESTION: QuestionKind = "fact"
EPISODE_QUESTION: QuestionKind = "episode"
SOURCE_QUESTION: QuestionKind = "source"

# Questions made of the words every memory shares: no single memory answers them.
GENERIC_QUESTIONS = (
    "What does the user like to do?",
    "What does the user like to do on weekends?",
    "What does the user do for work?",
    "What does the user want to do next?",
    "When did the user last travel?",
    "When did the user start this?",
    "What did the user share recently?",
    "What does the user think about their family?",
    "Who are the user's friends?",
    "What is the user working on?",
    "When did the user feel proud?",
    "What does the user enjoy the most?",
)
FACT_FRAMES = (
    "What does the user say about {0} and {1}?",
    "What does the user think about {0} and {1}?",
    "Does the user like {0} or {1}?",
    "What does the user know about {0} and {1}?",
)
EPISODE_FRAMES = (
    "When did the user mention {0} and {1}?",
    "When did the user talk about {0} and {1}?",
    "What did the user share about {0} and {1}?",
)

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")
_FIRST_PERSON_CLAUSE = re.compile(r"(?:^|[,;:]\s*|\b(?:and|but|so|because)\s+)I\s+(.+)$")
_WE_CLAUSE = re.compile(r"(?:^|[,;:]\s*|\b(?:and|but|so|because)\s+)[Ww]e\s+(.+)$")
_CONTRACTED_I = re.compile(r"^I'(m|ve|ll|d)\s+(.+)$")
_CONTRACTED_WE = re.compile(r"^[Ww]e'(re|ve|ll|d)\s+(.+)$")
# First person → third person, for the text after the clause's verb and for whole sentences.
_PRONOUNS = (
    (re.compile(r"\bI'm\b"), "they're"),
    (re.compile(r"\bI've\b"), "they've"),
    (re.compile(r"\bI'll\b"), "they'll"),
    (re.compile(r"\bI'd\b"), "they'd"),
    (re.compile(r"\bI am\b"), "they are"),
    (re.compile(r"\bI was\b"), "they were"),
    (re.compile(r"\bI\b"), "they"),
    (re.compile(r"\b[Mm]yself\b"), "themselves"),
    (re.compile(r"\b[Mm]ine\b"), "theirs"),
    (re.compile(r"\b[Mm]y\b"), "their"),
    (re.compile(r"\b[Mm]e\b"), "them"),
)
# Verbs a third-person subject takes unchanged (past forms, modals) or with its own form.
_THIRD_PERSON = {
    "am": "is",
    "'m": "is",
    "have": "has",
    "'ve": "has",
    "do": "does",
    "don't": "doesn't",
    "'ll": "will",
    "'d": "would",
    "'re": "are",
}
_UNCHANGED = frozenset(
    _listed(
        "was were had did didn't can can't could couldn't will won't would wouldn't should "
        "shouldn't must might may went got saw made took felt thought found bought came gave knew "
        "left met ran said told began brought built caught chose drew drove ate fell forgot heard "
        "kept lost paid sang sent sat spent taught won wrote became grew held is isn't wasn't "
        "needed used"
    )
)
# Adverbs between the subject and its verb: kept, and the verb after them conjugated.
_ADVERBS = frozenset(
    _listed(
        "really just also actually always never still often usually definitely totally recently "
        "finally even already sometimes mostly almost kinda literally honestly probably once"
    )
)
_CATEGORY_WORDS: tuple[tuple[str, frozenset[str]], ...] = (
    (
        "preference",
        frozenset(
            _listed("love loves like likes enjoy enjoys favorite favourite prefer prefers fan")
        ),
    ),
    ("goal", frozenset(_listed("want wants plan plans hope hopes dream goal trying gonna aim"))),
    (
        "knowledge",
        frozenset(
            _listed(
                "work works job study studied school career learn learned know teach degree "
                "volunteer class course"
            )
        ),
    ),
)
_ORG_CATEGORY_WORDS: tuple[tuple[str, frozenset[str]], ...] = (
    ("policy", frozenset(_listed("should always never must need needs rule"))),
    ("knowledge", frozenset(_listed("work learned know project team class course"))),
)
# Words too common to make a question specific.
_STOP_WORDS = frozenset(
    _listed(
        "about after again also always among around because been before being between could "
        "didn't doesn't during every first going great really should since some something still "
        "their theirs them themselves there these they they're they've thing things think those "
        "through today together very want where which while would yeah years your you're user "
        "shared feel feels felt just like likes love loves things what when with that this from "
        "have has were been into other than then them well much many more most made make"
    )
)


@dataclass(frozen=True)
class SourceTurn:
    speaker: str
    words: str
    # Indices of its sentences, in order.
    sentences: tuple[int, ...]
    # The pool text of the whole turn, "Someone: words".
    pool: int


@dataclass(frozen=True)
class SourceQuestion:
    text: str
    # Positions of its evidence turns in the session.
    evidence: tuple[int, ...]


@dataclass(frozen=True)
class SourceSession:
    speakers: tuple[str, ...]
    started_at: datetime
    turns: tuple[SourceTurn, ...]
    questions: tuple[SourceQuestion, ...]


@dataclass(frozen=True)
class Clause:
    """A rewritten clause ("loves hiking with their dog") and the sentence it comes from."""

    text: str
    sentence: int
    category: str
    # The pool text of the clause as a memory of its own.
    pool: int = -1


class SourceText:
    """The source conversations as sentences, clauses, replayable sessions, and the pool of
    texts embedded once."""

    def __init__(self, dataset: Dataset) -> None:
        self.pool: list[str] = []
        self._pooled: dict[str, int] = {}
        self.sentences: list[str] = []
        self.sentence_times: list[datetime] = []
        index: dict[str, int] = {}
        sessions: list[SourceSession] = []
        for conversation in dataset.conversations:
            by_session: dict[str, list[tuple[str, SourceTurn, datetime]]] = {}
            for turn in conversation.turns:
                speaker = turn.speaker or "Someone"
                words = turn.text.split(": ", 1)[-1].strip()
                ids = []
                for sentence in split_sentences(words):
                    if sentence not in index:
                        index[sentence] = len(self.sentences)
                        self.sentences.append(sentence)
                        self.sentence_times.append(turn.event_at)
                    ids.append(index[sentence])
                session_key = turn.dia_id.split(":", 1)[0]
                by_session.setdefault(session_key, []).append(
                    (
                        turn.dia_id,
                        SourceTurn(
                            speaker, words, tuple(ids), self.pooled(f"{POOL_SPEAKER}: {words}")
                        ),
                        turn.event_at,
                    )
                )
            for entries in by_session.values():
                positions = {dia_id: n for n, (dia_id, _, _) in enumerate(entries)}
                questions = tuple(
                    SourceQuestion(q.text, tuple(sorted(positions[g] for g in q.gold)))
                    for q in conversation.questions
                    if q.gold and all(g in positions for g in q.gold)
                )
                speakers = tuple(dict.fromkeys(turn.speaker for _, turn, _ in entries))
                sessions.append(
                    SourceSession(
                        speakers,
                        entries[0][2],
                        tuple(turn for _, turn, _ in entries),
                        questions,
                    )
                )
        self.sessions = [session for session in sessions if session.turns]
        self.clauses = [
            replace(clause, pool=self.pooled(f"User {clause.text}."))
            for n, sentence in enumerate(self.sentences)
            if (clause := first_person_clause(sentence, n)) is not None
        ]
        self.team_clauses = [
            replace(clause, pool=self.pooled(f"The team {clause.text}."))
            for n, sentence in enumerate(self.sentences)
            if (clause := team_clause(sentence, n)) is not None
        ]
        self.statements = [
            n
            for n, sentence in enumerate(self.sentences)
            if len(_WORD.findall(sentence)) >= 4 and not sentence.endswith("?")
        ]
        # A statement's pool text: what an episode of it alone says.
        self.shared = {n: self.pooled(episode_text([self.sentences[n]])) for n in self.statements}
        if not (self.sessions and self.clauses and self.team_clauses and self.statements):
            raise ValueError(
                "the source conversations give too little text to build the scenario (no "
                "first-person or 'we' sentences, or no turns)"
            )

    def pooled(self, text: str) -> int:
        """The pool index of `text`, added to the pool when new."""
        if text not in self._pooled:
            self._pooled[text] = len(self.pool)
            self.pool.append(text)
        return self._pooled[text]


def episode_text(sentences: Sequence[str]) -> str:
    """An episode in the write path's style: what the user shared, in the third person."""
    return "User shared: " + " ".join(third_person(sentence) for sentence in sentences)


def split_sentences(words: str) -> list[str]:
    return [part.strip() for part in _SENTENCE_END.split(words) if part.strip()]


def third_person(text: str) -> str:
    """First-person pronouns of `text` in the third person ("my" → "their")."""
    for pattern, replacement in _PRONOUNS:
        text = pattern.sub(replacement, text)
    return text


def _conjugated(verb: str) -> str:
    """`verb` after a third-person singular subject ("love" → "loves")."""
    lower = verb.lower()
    if lower in _THIRD_PERSON:
        return _THIRD_PERSON[lower]
    past = lower.endswith("ed") and not lower.endswith("eed")
    if lower in _UNCHANGED or past or lower.endswith("n't") or not lower.isalpha():
        return verb
    if lower.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if lower.endswith("y") and len(lower) > 1 and lower[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _predicate(rest: str) -> str | None:
    """A clause's text after its subject, in the third person, without its final mark; None
    when too short to say anything."""
    contracted = re.match(r"^'(m|ve|ll|d|re)\s+(.+)$", rest)
    words = (
        [_THIRD_PERSON["'" + contracted.group(1)], *contracted.group(2).split()]
        if contracted
        else rest.split()
    )
    if len(words) < 3:
        return None
    position = 0
    while position < len(words) - 1 and words[position].lower() in _ADVERBS:
        position += 1
    if not contracted:
        words[position] = _conjugated(words[position])
    text = third_person(" ".join(words)).rstrip(" .!?,;:")
    return text if len(_WORD.findall(text)) >= 3 else None


def _category(text: str, table: tuple[tuple[str, frozenset[str]], ...], default: str) -> str:
    words = {word.lower() for word in _WORD.findall(text)}
    for category, markers in table:
        if words & markers:
            return category
    return default


def first_person_clause(sentence: str, index: int) -> Clause | None:
    """The sentence's first-person clause as a predicate of "User", or None."""
    if sentence.endswith("?"):
        return None
    match = _CONTRACTED_I.match(sentence) or None
    rest = f"'{match.group(1)} {match.group(2)}" if match else None
    if rest is None:
        found = _FIRST_PERSON_CLAUSE.search(sentence)
        if found is None:
            return None
        rest = found.group(1)
    predicate = _predicate(rest)
    if predicate is None:
        return None
    return Clause(predicate, index, _category(predicate, _CATEGORY_WORDS, "context"))


def team_clause(sentence: str, index: int) -> Clause | None:
    """The sentence's "we" clause as a predicate of "The team", or None."""
    if sentence.endswith("?"):
        return None
    match = _CONTRACTED_WE.match(sentence)
    if match is not None:
        rest = f"'{match.group(1)} {match.group(2)}"
    else:
        found = _WE_CLAUSE.search(sentence)
        if found is None:
            return None
        rest = found.group(1)
    predicate = _predicate(rest)
    if predicate is None:
        return None
    predicate = re.sub(r"\bour\b", "its", re.sub(r"\bus\b", "the team", predicate))
    return Clause(predicate, index, _category(predicate, _ORG_CATEGORY_WORDS, "context"))


def dedupe_key(text: str) -> str:
    """The service's duplicate key: whitespace-collapsed, case-folded text."""
    return " ".join(text.lower().split())


@dataclass(frozen=True)
class ScenarioRow:
    """One memory as the bulk path stores it."""

    id: uuid.UUID
    tenant_id: str
    user_id: str | None
    kind: str
    category: str
    text: str
    # The source sentences it is made of, and the pool texts whose vectors make its own.
    sentences: tuple[int, ...]
    pool: tuple[int, ...]
    speaker: str | None
    source_thread_id: uuid.UUID | None
    event_at: datetime | None
    created_at: datetime
    confidence: float = 1.0

    @property
    def lifecycle(self) -> str:
        return "proposed" if self.confidence < QUARANTINE_BELOW else "confirmed"


@dataclass(frozen=True)
class ScenarioQuestion:
    kind: QuestionKind
    text: str
    # Memories that answer it (any of them in the top 10 counts); empty for a generic one.
    targets: tuple[uuid.UUID, ...]


@dataclass(frozen=True)
class ScenarioOwner:
    tenant_id: str
    user_id: str | None
    rows: tuple[ScenarioRow, ...]
    questions: tuple[ScenarioQuestion, ...]


def _uuid(rng: random.Random) -> uuid.UUID:
    return uuid.UUID(int=rng.getrandbits(128), version=4)


class _OwnerBuilder:
    """One owner's rows, drawn from the source by its own seeded generator."""

    def __init__(
        self, source: SourceText, tenant_id: str, user_id: str | None, key: str, seed: int
    ) -> None:
        self.source = source
        self.tenant_id = tenant_id
        self.user_id = user_id
        self.rng = random.Random(f"{seed}-{key}")  # noqa: S311 - a reproducible corpus
        self.shift = timedelta(days=self.rng.randrange(OWNER_DAY_SPREAD))
        self.name = self.rng.choice(FIRST_NAMES)
        self.rows: list[ScenarioRow] = []
        self.seen: set[str] = set()
        self.combinations: set[tuple[str, frozenset[int]]] = set()
        self.threads: list[tuple[uuid.UUID, datetime]] = []
        self.questions: list[ScenarioQuestion] = []

    def _add(
        self,
        kind: str,
        category: str,
        text: str,
        sentences: tuple[int, ...],
        pool: tuple[int, ...],
        *,
        speaker: str | None = None,
        thread: uuid.UUID | None = None,
        event_at: datetime | None = None,
        confidence: float = 1.0,
    ) -> ScenarioRow | None:
        # Neither the same text nor the same sentences in another order or frame of its kind.
        key = dedupe_key(text)
        combination = (category, frozenset(sentences))
        if key in self.seen or combination in self.combinations:
            return None
        self.seen.add(key)
        self.combinations.add(combination)
        moment = event_at or self.source.sentence_times[sentences[0]] + self.shift
        row = ScenarioRow(
            id=_uuid(self.rng),
            tenant_id=self.tenant_id,
            user_id=self.user_id,
            kind=kind,
            category=category,
            text=text,
            sentences=sentences,
            pool=pool,
            speaker=speaker,
            source_thread_id=thread,
            event_at=event_at,
            created_at=moment + timedelta(minutes=self.rng.randrange(5, 600)),
            confidence=confidence,
        )
        self.rows.append(row)
        return row

    def _one_or_two(self, items: Sequence[T]) -> list[T]:
        """One item, or (`PAIRED_SHARE` of the time) two different ones in source order, so a
        pair is never also stored the other way round."""
        if self.rng.random() >= PAIRED_SHARE or len(items) < 2:
            return [self.rng.choice(items)]
        first, second = sorted(self.rng.sample(range(len(items)), 2))
        return [items[first], items[second]]

    def _confidence(self) -> float:
        return round(self.rng.uniform(*FACT_CONFIDENCE), 2)

    def _thread(self) -> tuple[uuid.UUID | None, datetime | None]:
        """One of the owner's threads (where an extracted memory came from), if any."""
        if not self.threads:
            return None, None
        return self.rng.choice(self.threads)

    def facts(self, count: int, attempts_per_row: int = 20) -> None:
        clauses = self.source.clauses
        wanted = len(self.rows) + count
        for _ in range(count * attempts_per_row):
            if len(self.rows) >= wanted:
                return
            chosen = self._one_or_two(clauses)
            first = chosen[0]
            thread, _ = self._thread()
            self._add(
                "semantic",
                first.category,
                f"User {' and '.join(c.text for c in chosen)}.",
                tuple(c.sentence for c in chosen),
                tuple(c.pool for c in chosen),
                speaker=self.name,
                thread=thread,
                confidence=self._confidence(),
            )

    def episodes(self, count: int, attempts_per_row: int = 20) -> None:
        statements = self.source.statements
        sentences_text = self.source.sentences
        shared = self.source.shared
        wanted = len(self.rows) + count
        for _ in range(count * attempts_per_row):
            if len(self.rows) >= wanted:
                return
            chosen = self._one_or_two(statements)
            thread, started = self._thread()
            if started is None:
                started = self.source.sentence_times[chosen[0]] + self.shift
            self._add(
                "episodic",
                "episode",
                episode_text([sentences_text[n] for n in chosen]),
                tuple(chosen),
                tuple(shared[n] for n in chosen),
                thread=thread,
                event_at=started,
            )

    def turns(self, count: int) -> None:
        """Replay sessions as the owner's threads until `count` turns are stored."""
        sessions = self.source.sessions
        order = list(range(len(sessions)))
        self.rng.shuffle(order)
        replays: Counter[int] = Counter()
        wanted = len(self.rows) + count
        while len(self.rows) < wanted:
            for number in order:
                if len(self.rows) >= wanted:
                    break
                self._replay(sessions[number], replays[number], wanted)
                replays[number] += 1

    def _replay(self, session: SourceSession, replay: int, wanted: int) -> None:
        friends = [name for name in FIRST_NAMES if name != self.name]
        renamed = {session.speakers[0]: self.name}
        for speaker in session.speakers[1:]:
            renamed[speaker] = self.rng.choice(friends)
        pattern = re.compile(r"\b(" + "|".join(map(re.escape, renamed)) + r")\b")

        def rename(text: str) -> str:
            return pattern.sub(lambda match: renamed[match.group(1)], text)

        thread = _uuid(self.rng)
        started = session.started_at + self.shift + timedelta(days=365 * replay)
        self.threads.append((thread, started))
        stored: dict[int, ScenarioRow] = {}
        for position, turn in enumerate(session.turns):
            if len(self.rows) >= wanted:
                break
            sentences = list(turn.sentences)
            pool = [turn.pool]
            if replay:
                # A session the owner already has: one sentence of each turn from elsewhere.
                other = self.rng.choice(self.source.statements)
                if other in sentences:
                    continue
                # The whole turn's vector with the new sentence's added: near the turn's.
                pool.append(self.source.shared[other])
                if len(sentences) > 1:
                    sentences[self.rng.randrange(len(sentences))] = other
                else:
                    sentences.append(other)
            words = (
                turn.words if not replay else " ".join(self.source.sentences[n] for n in sentences)
            )
            speaker = renamed.get(turn.speaker, turn.speaker)
            row = self._add(
                "episodic",
                "turn",
                f"{speaker}: {rename(words)}",
                tuple(sentences),
                tuple(pool),
                speaker=speaker,
                thread=thread,
                event_at=started + TURN_SPACING * position,
            )
            if row is not None:
                stored[position] = row
        if replay:
            # The source's questions hold for the session as it was said.
            return
        for question in session.questions:
            targets = tuple(stored[p].id for p in question.evidence if p in stored)
            if len(targets) == len(question.evidence):
                self.questions.append(
                    ScenarioQuestion(SOURCE_QUESTION, rename(question.text), targets)
                )

    def organization(self, count: int, attempts_per_row: int = 20) -> None:
        clauses = self.source.team_clauses
        wanted = len(self.rows) + count
        for _ in range(count * attempts_per_row):
            if len(self.rows) >= wanted:
                return
            chosen = self._one_or_two(clauses)
            self._add(
                "semantic",
                chosen[0].category,
                f"The team {' and '.join(c.text for c in chosen)}.",
                tuple(c.sentence for c in chosen),
                tuple(c.pool for c in chosen),
                confidence=self._confidence(),
            )

    def owner(self) -> ScenarioOwner:
        return ScenarioOwner(self.tenant_id, self.user_id, tuple(self.rows), tuple(self.questions))


def build_user(
    source: SourceText, tenant_id: str, user_id: str, memories: int, seed: int
) -> ScenarioOwner:
    """A user owning `memories` memories: chat turns first (their threads are where the facts
    and episodes were extracted from), then facts, then episodes."""
    builder = _OwnerBuilder(source, tenant_id, user_id, f"user-{tenant_id}-{user_id}", seed)
    facts = round(memories * FACT_SHARE)
    episodes = round(memories * EPISODE_SHARE)
    builder.turns(memories - facts - episodes)
    builder.facts(facts)
    builder.episodes(memories - len(builder.rows))
    if len(builder.rows) != memories:
        raise ValueError(
            f"the source text cannot give one user {memories} distinct memories "
            f"({len(builder.rows)} made)"
        )
    return builder.owner()


def build_organization(
    source: SourceText, tenant_id: str, memories: int, seed: int
) -> ScenarioOwner:
    """A tenant's organization memory: `memories` facts about the team."""
    builder = _OwnerBuilder(source, tenant_id, None, f"org-{tenant_id}", seed)
    builder.organization(memories)
    if len(builder.rows) != memories:
        raise ValueError(
            f"the source text cannot give one organization {memories} distinct memories "
            f"({len(builder.rows)} made)"
        )
    return builder.owner()


def _specific_words(row: ScenarioRow, frequency: Mapping[str, int], count: int) -> list[str]:
    """The `count` words of what `row` says (not "User <verb>" nor "User shared:") rarest
    among the owner's memories, as written."""
    said = row.text.split(": ", 1)[1] if row.category == "episode" else row.text.split(" ", 2)[-1]
    words: dict[str, str] = {}
    for word in _WORD.findall(said):
        if len(word) >= SPECIFIC_WORD_MIN and word.lower() not in _STOP_WORDS:
            words.setdefault(word.lower(), word)
    rarest = sorted(words, key=lambda word: (frequency[word], word))[:count]
    return [words[word] for word in rarest]


def token_frequency(rows: Sequence[ScenarioRow]) -> Counter[str]:
    return Counter(word.lower() for row in rows for word in _WORD.findall(row.text))


def sample_questions(
    owner: ScenarioOwner, count: int, seed: int, salt: str = ""
) -> list[ScenarioQuestion]:
    """`count` distinct questions to the owner: a fifth generic, the rest split between the
    source's questions about replayed sessions and questions about one fact or episode."""
    rng = random.Random(f"questions-{seed}-{owner.tenant_id}-{owner.user_id}-{salt}")  # noqa: S311
    frequency = token_frequency(owner.rows)
    facts = [row for row in owner.rows if row.kind == "semantic"]
    episodes = [row for row in owner.rows if row.category == "episode"]
    source = list(owner.questions)
    rng.shuffle(source)
    chosen: dict[str, ScenarioQuestion] = {}
    generic = list(GENERIC_QUESTIONS)
    rng.shuffle(generic)
    for text in generic[: max(1, count // 5)]:
        chosen.setdefault(text, ScenarioQuestion(GENERIC, text, ()))
    for _ in range(count * 20):
        if len(chosen) >= count:
            break
        pick = rng.random()
        if pick < 0.4 and source:
            question = source.pop()
        else:
            rows, frames, kind = (
                (facts, FACT_FRAMES, FACT_QUESTION)
                if pick < 0.7 or not episodes
                else (episodes, EPISODE_FRAMES, EPISODE_QUESTION)
            )
            if not rows:
                continue
            row = rng.choice(rows)
            frame = rng.choice(frames)
            words = _specific_words(row, frequency, 2)
            if len(words) < 2:
                continue
            question = ScenarioQuestion(kind, frame.format(*words), (row.id,))
        chosen.setdefault(question.text, question)
    return list(chosen.values())[:count]


def distinct_token_ratio(texts: Sequence[str]) -> float:
    """Distinct words over all words (case-folded): how varied a set of texts is."""
    words = [word.lower() for text in texts for word in _WORD.findall(text)]
    return len(set(words)) / len(words) if words else 0.0


@dataclass(frozen=True)
class ScenarioShape:
    """Who is in the database at each size, besides the measured owner.

    The measured owner of size S (`owner-<S>`, tenant `bench-real-<S>`) gets `org_share` x S
    organization memories in its tenant, `background_factor` x S memories held by other users
    — the first `neighbours` of them in the owner's tenant, the rest in other tenants of
    `users_per_tenant` users with `org_per_tenant` organization memories each.

    With `small_tenants`, the first size also brings that many small tenants (a deployment's
    many customers that have just begun: `small_tenant_users` users of
    `small_tenant_user_memories` memories and `small_tenant_org_memories` of the
    organization's each), so each measured tenant is a small share of the table, as it is in a
    service of many tenants; the planner's estimates of an owner follow that share."""

    seed: int
    background_factor: float = 2.0
    background_user_memories: int = 250
    neighbours: int = 4
    users_per_tenant: int = 10
    org_share: float = 0.05
    org_min: int = 20
    org_per_tenant: int = 20
    small_tenants: int = 0
    small_tenant_users: int = 4
    small_tenant_user_memories: int = 40
    small_tenant_org_memories: int = 5

    def tenant_id(self, label: str) -> str:
        return f"bench-real-{label}"

    def owner_id(self, label: str) -> str:
        return f"owner-{label}"

    def org_memories(self, size: int) -> int:
        return max(self.org_min, round(size * self.org_share))

    def background_users(self, size: int) -> int:
        return round(size * self.background_factor / self.background_user_memories)

    def background(self, label: str, size: int) -> Iterator[tuple[str, str, bool]]:
        """(tenant, user, first user of a new tenant) for each other user at this size."""
        for n in range(self.background_users(size)):
            if n < self.neighbours:
                yield self.tenant_id(label), f"neighbour-{label}-{n:03d}", False
                continue
            tenant = (n - self.neighbours) // self.users_per_tenant
            first = (n - self.neighbours) % self.users_per_tenant == 0
            yield f"{self.tenant_id(label)}-{tenant:04d}", f"user-{label}-{n:05d}", first

    def small(self) -> Iterator[tuple[str, list[str]]]:
        """Each small tenant and its users (`small_tenants`)."""
        for tenant in range(self.small_tenants):
            tenant_id = f"bench-small-{tenant:05d}"
            users = [f"user-{tenant:05d}-{n}" for n in range(self.small_tenant_users)]
            yield tenant_id, users


def describe_source(source: SourceText) -> dict[str, int]:
    return {
        "sentences": len(source.sentences),
        "pool_texts": len(source.pool),
        "sessions": len(source.sessions),
        "first_person_clauses": len(source.clauses),
        "team_clauses": len(source.team_clauses),
        "source_questions": sum(len(s.questions) for s in source.sessions),
    }
