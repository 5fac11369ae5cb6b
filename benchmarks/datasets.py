"""Benchmark datasets as conversations of dated turns and questions with gold turn ids.

LoCoMo (`locomo10.json`) and LongMemEval (its official JSON) both become the same shape: one
`Conversation` per haystack, its turns (each stored as one episodic memory) and the questions
asked of it, each with the ids of the turns that hold the answer. What loading had to repair or
leave out is counted in a `DataReport`, with a reason, so a result says what it covers.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Set
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from service.memories.schemas import MEMORY_TEXT_MAX

DatasetFormat = Literal["locomo", "longmemeval"]
DATASET_FORMATS: tuple[DatasetFormat, ...] = ("locomo", "longmemeval")

StoredMemories = Literal["turns", "observations", "turns-and-observations"]
STORED_MEMORIES: tuple[StoredMemories, ...] = ("turns", "observations", "turns-and-observations")
"""What a retrieval run stores: every dialogue turn as an episodic memory, the dataset's
observations as facts (semantic memories) each standing for the turns it rests on, or both in
the same threads, each fact right after the last turn it rests on."""

LOCOMO_CATEGORIES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
LOCOMO_ADVERSARIAL = 5

SKIP_REASONS = {
    "adversarial": "LoCoMo category 5 (adversarial): the conversation holds no answer",
    "abstention": "LongMemEval abstention question (_abs): the history holds no answer",
    "no_evidence": "no evidence turn given",
    "no_valid_evidence": "none of its evidence ids names an existing turn",
}
EVIDENCE_REPAIRS = {
    "split": "several ids in one string: split apart",
    "normalised": "malformed id normalised to an existing turn",
    "unparseable": "not an id, or ambiguous: dropped",
    "missing_turn": "names a turn that does not exist: dropped",
}
TURN_ISSUES = {
    "empty": "no text: not stored",
    "truncated": f"longer than {MEMORY_TEXT_MAX} characters: truncated",
}

_CANONICAL_ID = re.compile(r"D[1-9]\d*:[1-9]\d*")
# One "D", then exactly two numbers: stray colons and leading zeros ("D:11:26", "D30:05").
_REPAIRABLE_ID = re.compile(r"D:?(\d+):(\d+)")
_EVIDENCE_SEPARATORS = re.compile(r"[;,\s]+")
_SESSION_KEY = re.compile(r"session_(\d+)")

_MONTH_NAMES = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_MONTHS = {
    spelling: number
    for number, name in enumerate(_MONTH_NAMES, start=1)
    for spelling in (name, name[:3])
}
_LOCOMO_DATE = re.compile(
    r"\s*(\d{1,2}):(\d{2})\s*([ap])\.?m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*",
    re.IGNORECASE,
)
_LONGMEMEVAL_DATE = re.compile(
    r"\s*(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\([A-Za-z]+\))?\s*(\d{1,2}):(\d{2})\s*"
)


class DatasetError(ValueError):
    """The file is missing, not JSON, or not shaped like the format it was read as."""


class DatasetMissing(DatasetError):
    """No file at the path given."""


@dataclass(frozen=True)
class Turn:
    dia_id: str
    text: str
    event_at: datetime
    # Who said it, as a chat client knows the author of each message.
    speaker: str | None = None


@dataclass(frozen=True)
class Observation:
    """A fact about a speaker that the dataset's annotators drew from one session (LoCoMo's
    `observation`), with the turns it rests on: stored as a fact in its session's thread, it
    is found when a question's gold turns are among them."""

    text: str
    session: str
    event_at: datetime
    evidence: frozenset[str]


@dataclass(frozen=True)
class Question:
    question_id: str
    text: str
    category: str
    gold: frozenset[str]


@dataclass(frozen=True)
class Conversation:
    conversation_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]
    # In the order they were said (by their first turn); none in LongMemEval.
    observations: tuple[Observation, ...] = ()


@dataclass(frozen=True)
class EvidenceIssue:
    kind: str
    raw: str
    resolved: str | None = None


@dataclass
class DataReport:
    """What the file holds and what loading repaired or left out, by reason (whole file)."""

    questions_in_file: int = 0
    questions_skipped: Counter[str] = field(default_factory=Counter)
    evidence_repairs: Counter[str] = field(default_factory=Counter)
    turns_in_file: int = 0
    turn_issues: Counter[str] = field(default_factory=Counter)
    details: list[dict[str, str]] = field(default_factory=list)

    def skip_question(self, reason: str, conversation_id: str, question_id: str) -> None:
        self.questions_skipped[reason] += 1
        # Hundreds of questions have no answer by design: counted, not listed one by one.
        if reason not in ("adversarial", "abstention"):
            self.details.append(
                {"conversation": conversation_id, "question": question_id, "skipped": reason}
            )

    def repair_evidence(self, issue: EvidenceIssue, conversation_id: str, question_id: str) -> None:
        self.evidence_repairs[issue.kind] += 1
        detail = {
            "conversation": conversation_id,
            "question": question_id,
            "evidence": issue.kind,
            "raw": issue.raw,
        }
        if issue.resolved is not None:
            detail["resolved"] = issue.resolved
        self.details.append(detail)

    def to_json(self) -> dict[str, Any]:
        return {
            "questions_in_file": self.questions_in_file,
            "questions_skipped": dict(sorted(self.questions_skipped.items())),
            "evidence_repairs": dict(sorted(self.evidence_repairs.items())),
            "turns_in_file": self.turns_in_file,
            "turn_issues": dict(sorted(self.turn_issues.items())),
            "details": self.details,
            "reasons": {**SKIP_REASONS, **EVIDENCE_REPAIRS, **TURN_ISSUES},
        }


@dataclass(frozen=True)
class Dataset:
    format: DatasetFormat
    path: Path
    sha256: str
    image_captions: bool
    conversations: tuple[Conversation, ...]
    report: DataReport

    @property
    def question_count(self) -> int:
        return sum(len(c.questions) for c in self.conversations)

    @property
    def turn_count(self) -> int:
        return sum(len(c.turns) for c in self.conversations)

    @property
    def observation_count(self) -> int:
        return sum(len(c.observations) for c in self.conversations)

    def selected(self, *, conversations: int | None, questions: int | None) -> Dataset:
        """The first `conversations`, then the first `questions` of their questions in file
        order; a conversation left without questions is dropped (there is nothing to ask)."""
        pool = self.conversations if conversations is None else self.conversations[:conversations]
        remaining = questions
        kept: list[Conversation] = []
        for conversation in pool:
            chosen = conversation
            if remaining is not None:
                chosen = replace(
                    conversation, questions=conversation.questions[: max(remaining, 0)]
                )
                remaining -= len(chosen.questions)
            if chosen.questions:
                kept.append(chosen)
        return replace(self, conversations=tuple(kept))


def parse_evidence(
    raw_ids: Iterable[str], turn_ids: Set[str]
) -> tuple[frozenset[str], list[EvidenceIssue]]:
    """The turn ids a question's evidence list names, and every repair that took."""
    gold: set[str] = set()
    issues: list[EvidenceIssue] = []
    for raw in raw_ids:
        tokens = [token for token in _EVIDENCE_SEPARATORS.split(raw.strip()) if token]
        if len(tokens) > 1:
            issues.append(EvidenceIssue("split", raw, " ".join(tokens)))
        if not tokens:
            issues.append(EvidenceIssue("unparseable", raw))
        for token in tokens:
            if _CANONICAL_ID.fullmatch(token):
                if token in turn_ids:
                    gold.add(token)
                else:
                    issues.append(EvidenceIssue("missing_turn", token))
                continue
            candidate = _repaired_id(token)
            if candidate is None:
                issues.append(EvidenceIssue("unparseable", token))
                continue
            if candidate in turn_ids:
                gold.add(candidate)
                issues.append(EvidenceIssue("normalised", token, candidate))
            else:
                issues.append(EvidenceIssue("missing_turn", token, candidate))
    return frozenset(gold), issues


def _repaired_id(token: str) -> str | None:
    """ "D:11:26" → "D11:26", "D30:05" → "D30:5"; None when no single turn id is meant."""
    match = _REPAIRABLE_ID.fullmatch(token)
    if match is None:
        return None
    session, turn = int(match.group(1)), int(match.group(2))
    return f"D{session}:{turn}" if session and turn else None


def parse_locomo_datetime(value: str) -> datetime:
    """A LoCoMo session time, "1:56 pm on 8 May, 2023"; LoCoMo gives no zone, UTC is assumed."""
    match = _LOCOMO_DATE.fullmatch(value)
    if match is None:
        raise ValueError(f"not a LoCoMo session date: {value!r}")
    hour, minute, half, day, month_name, year = match.groups()
    month = _MONTHS.get(month_name.lower())
    if month is None or not 1 <= int(hour) <= 12:
        raise ValueError(f"not a LoCoMo session date: {value!r}")
    hour_of_day = int(hour) % 12 + (12 if half.lower() == "p" else 0)
    return datetime(int(year), month, int(day), hour_of_day, int(minute), tzinfo=UTC)


def parse_longmemeval_datetime(value: str) -> datetime:
    """A LongMemEval session time, "2023/05/20 (Sat) 02:21", as UTC (none is given)."""
    match = _LONGMEMEVAL_DATE.fullmatch(value)
    if match is None:
        raise ValueError(f"not a LongMemEval session date: {value!r}")
    year, month, day, hour, minute = (int(part) for part in match.groups())
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def load_dataset(
    path: Path, dataset_format: DatasetFormat, *, image_captions: bool = True
) -> Dataset:
    """Read and check a benchmark file; raises `DatasetError` saying where it went wrong."""
    try:
        content = path.read_bytes()
    except FileNotFoundError as exc:
        raise DatasetMissing(f"cannot read {path}: {exc.strerror or exc}") from exc
    except OSError as exc:
        raise DatasetError(
            f"cannot read {path}: {exc.strerror or exc}. LoCoMo's locomo10.json is in "
            "https://github.com/snap-research/locomo (data/locomo10.json, CC BY-NC 4.0); "
            "LongMemEval's files are at https://huggingface.co/datasets/xiaowu0162/longmemeval. "
            "Pass the file with --dataset."
        ) from exc
    try:
        raw = json.loads(content)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetError(f"{path} is not JSON: {exc}") from exc
    if not isinstance(raw, list):
        raise DatasetError(f"{path}: expected a JSON list of {dataset_format} items")
    report = DataReport()
    conversations: list[Conversation] = []
    for index, item in enumerate(raw):
        try:
            if dataset_format == "locomo":
                conversation = _locomo_conversation(item, report, image_captions=image_captions)
            else:
                conversation = _longmemeval_conversation(item, report)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise DatasetError(
                f"{path}: item {index} is not a {dataset_format} item: {exc!r}"
            ) from exc
        conversations.append(conversation)
    return Dataset(
        format=dataset_format,
        path=path,
        sha256=hashlib.sha256(content).hexdigest(),
        image_captions=image_captions,
        conversations=tuple(conversations),
        report=report,
    )


def _memory_text(speaker: str, words: str, report: DataReport) -> str | None:
    """The memory a turn becomes, "<speaker>: <words>", cut to what the API accepts."""
    if not words.strip():
        report.turn_issues["empty"] += 1
        return None
    text = f"{speaker.strip()}: {words.strip()}"
    if len(text) > MEMORY_TEXT_MAX:
        report.turn_issues["truncated"] += 1
        text = text[:MEMORY_TEXT_MAX].rstrip()
    return text


def _locomo_conversation(
    sample: dict[str, Any], report: DataReport, *, image_captions: bool
) -> Conversation:
    conversation_id = str(sample["sample_id"])
    dialogue: dict[str, Any] = sample["conversation"]
    sessions = sorted(
        (int(match.group(1)), key)
        for key in dialogue
        if (match := _SESSION_KEY.fullmatch(key)) is not None
    )
    turns: list[Turn] = []
    for _number, key in sessions:
        event_at = parse_locomo_datetime(str(dialogue[f"{key}_date_time"]))
        for raw_turn in dialogue[key]:
            report.turns_in_file += 1
            words = str(raw_turn.get("text") or "")
            caption = raw_turn.get("blip_caption")
            if image_captions and caption:
                # What a vision model would tell the agent about a shared photo; many
                # questions ask about what was in one.
                words = f"{words.strip()} [shared an image: {str(caption).strip()}]"
            text = _memory_text(str(raw_turn["speaker"]), words, report)
            if text is not None:
                speaker = str(raw_turn["speaker"]).strip() or None
                turns.append(Turn(str(raw_turn["dia_id"]), text, event_at, speaker))

    turn_ids = {turn.dia_id for turn in turns}
    questions: list[Question] = []
    for index, qa in enumerate(sample["qa"], start=1):
        report.questions_in_file += 1
        question_id = f"{conversation_id}#q{index}"
        category = int(qa["category"])
        if category == LOCOMO_ADVERSARIAL:
            report.skip_question("adversarial", conversation_id, question_id)
            continue
        evidence = [str(raw) for raw in qa.get("evidence") or []]
        gold, issues = parse_evidence(evidence, turn_ids)
        for issue in issues:
            report.repair_evidence(issue, conversation_id, question_id)
        if not gold:
            reason = "no_valid_evidence" if evidence else "no_evidence"
            report.skip_question(reason, conversation_id, question_id)
            continue
        label = f"{category} {LOCOMO_CATEGORIES.get(category, 'unknown')}"
        questions.append(Question(question_id, str(qa["question"]), label, gold))
    observations = _locomo_observations(sample, dialogue, turn_ids)
    return Conversation(conversation_id, tuple(turns), tuple(questions), observations)


def _locomo_observations(
    sample: dict[str, Any], dialogue: dict[str, Any], turn_ids: Set[str]
) -> tuple[Observation, ...]:
    """Each session's observations, ordered as a write path extracting facts during the
    conversation would have written them: by the first turn each rests on. An observation
    whose evidence names no stored turn is left out (it could never be found)."""
    found: list[tuple[int, int, int, Observation]] = []
    for key, by_speaker in (sample.get("observation") or {}).items():
        match = _SESSION_KEY.match(key)
        if match is None or not isinstance(by_speaker, dict):
            continue
        number = int(match.group(1))
        session_time = dialogue.get(f"session_{number}_date_time")
        if session_time is None:
            continue
        said_at = parse_locomo_datetime(str(session_time))
        for entries in by_speaker.values():
            for entry in entries:
                text, raw = str(entry[0]).strip(), entry[1]
                evidence, _ = parse_evidence(
                    [raw] if isinstance(raw, str) else [str(item) for item in raw], turn_ids
                )
                if not text or not evidence:
                    continue
                first = min(evidence, key=turn_position)
                observation = Observation(text, f"D{number}", said_at, evidence)
                found.append((*turn_position(first), len(found), observation))
    return tuple(observation for *_, observation in sorted(found, key=lambda item: item[:3]))


def turn_position(dia_id: str) -> tuple[int, int]:
    """A canonical turn id's session and number (`D3:12` → (3, 12)), the order it was said in."""
    session, _, number = dia_id.removeprefix("D").partition(":")
    return int(session), int(number)


def _longmemeval_conversation(item: dict[str, Any], report: DataReport) -> Conversation:
    """Each LongMemEval question comes with its own haystack: one conversation per question."""
    question_id = str(item["question_id"])
    sessions: list[list[dict[str, Any]]] = item["haystack_sessions"]
    dates: list[str] = item["haystack_dates"]
    if len(sessions) != len(dates):
        raise ValueError(f"{len(sessions)} haystack sessions but {len(dates)} haystack dates")
    turns: list[Turn] = []
    gold: set[str] = set()
    for session_number, (session, date) in enumerate(zip(sessions, dates, strict=True), start=1):
        event_at = parse_longmemeval_datetime(str(date))
        for turn_number, raw_turn in enumerate(session, start=1):
            report.turns_in_file += 1
            dia_id = f"D{session_number}:{turn_number}"
            text = _memory_text(str(raw_turn["role"]), str(raw_turn.get("content") or ""), report)
            if text is None:
                continue
            turns.append(Turn(dia_id, text, event_at))
            if raw_turn.get("has_answer") is True:
                gold.add(dia_id)

    report.questions_in_file += 1
    questions: tuple[Question, ...] = ()
    if question_id.endswith("_abs"):
        report.skip_question("abstention", question_id, question_id)
    elif not gold:
        report.skip_question("no_evidence", question_id, question_id)
    else:
        category = str(item["question_type"])
        questions = (Question(question_id, str(item["question"]), category, frozenset(gold)),)
    return Conversation(question_id, tuple(turns), questions)
