"""What the extraction model is told and the strict schema it answers in.

The model only *proposes*, and deterministic code decides (two stages, so no model reply can
write on its own): new facts with category, subject, confidence, an evidence quote and the ids
of current facts they replace; ids of facts to remove; an optional one-line episode; optional
profile attributes. `resolver.py` decides what
is written. Current facts are shown with short ids (`m1`, `m2`, …) that map back to memory ids
only inside one pass, so the model can neither name nor guess any other memory.

The output models forbid unknown fields and declare no defaults, as strict Structured Outputs
require; the category field is an enum of the configured category set.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, create_model

from service.threads.replay import ReplayedMessage

EXTRACTION_SCHEMA_NAME = "memory_extraction"
# A message longer than this is cut in the prompt: facts sit in a message's first paragraphs,
# and one pasted document must not crowd the rest of the window out.
MESSAGE_PROMPT_CHARS = 2000

CATEGORY_MEANINGS: dict[str, str] = {
    "preference": "a standing like, dislike or choice (tools, formats, UI, food, units)",
    "behavior": "how the user wants the assistant to act or answer",
    "correction": "the user corrects something the assistant or memory had wrong",
    "goal": "what the user is working towards",
    "knowledge": "what the user knows, does or is (job, skills, background)",
    "context": "circumstances: places, people, teams, channels, projects, dates",
    "policy": "an organization-wide rule every user's assistant must follow",
}
MODE_MEANINGS: dict[str, str] = {
    "replace": "one current fact per subject: a new one replaces the older ones",
    "merge": "facts about one subject are merged: restate what is still true with the new "
    "information in one fact, and list the facts it merges in `supersedes`",
    "accumulate": "facts add up; nothing is replaced unless you say so",
}

SYSTEM_PROMPT = """\
You are the memory manager of an AI assistant. You read the newest part of a conversation \
between a user and the assistant and propose what to remember about the user for future \
conversations. Deterministic code checks and applies your proposal, so be precise.

Answer with one JSON object:
- "facts": durable facts about the user stated or clearly implied in the NEW messages, at most \
{max_facts}. Each has:
  - "text": one short, self-contained sentence about the user in the third person \
("User prefers light mode."), in the conversation's language.
  - "category": one of the categories below.
  - "subject": a short snake_case name of what the fact is about ("ui_theme", "home_city"). \
Reuse the subject of a current fact when the new fact is about the same thing.
  - "scope": "user" for facts about this user. {org_rule}
  - "confidence": 0.9 or more for explicit statements, 0.7-0.8 for strong implications, lower \
when unsure.
  - "evidence": a short verbatim quote from the user's message that supports the fact.
  - "supersedes": ids of current facts this fact replaces or corrects (e.g. an old preference \
the user changed); [] if none.
- "remove": ids of current facts the user says are no longer true or asks to forget, without \
a replacement; [] if none.
- "episode": one short sentence summarising what happened in the new messages (what the user \
wanted and the outcome), or null if nothing happened worth recalling.
- "profile": durable key-value attributes of the user (key: snake_case, value: short text), \
e.g. {{"key": "home_city", "value": "Berlin", "confidence": 0.95, "evidence": "I live in \
Berlin"}}; [] if none.

Rules:
- Only what the user said or clearly implied about themselves; never the assistant's \
suggestions, never guesses, never one-off requests ("summarise this") or small talk.
- Do not repeat a current fact unless it changed; when it changed, write the new fact and put \
the old fact's id in "supersedes".
- Never store secrets: passwords, API keys, card numbers, government ids.
- Refer to current facts only by the ids shown.

Categories (name: meaning; how a new fact combines with older ones):
{categories}"""

ORG_ALLOWED = (
    'Use "org" only for an organization-wide rule or shared knowledge every user of the '
    "organization should see (categories: {org_categories})."
)
ORG_REFUSED = 'Always use "user": this conversation may not change organization memory.'


class FactProposal(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str
    category: str
    subject: str
    scope: Literal["user", "org"]
    confidence: float
    evidence: str
    supersedes: list[str]


class ProfileProposal(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str
    value: str
    confidence: float
    evidence: str


class ExtractionOutput(BaseModel):
    """The model's whole answer (the category enum comes from `extraction_output_model`)."""

    model_config = ConfigDict(extra="forbid")

    facts: list[FactProposal]
    remove: list[str]
    episode: str | None
    profile: list[ProfileProposal]


@lru_cache(maxsize=8)
def extraction_output_model(categories: tuple[str, ...]) -> type[ExtractionOutput]:
    """`ExtractionOutput` whose facts' `category` is an enum of `categories`."""
    category_type = cast(Any, Literal.__getitem__(categories))
    fact = create_model(
        "FactProposal",
        __base__=FactProposal,
        category=(category_type, ...),
    )
    return create_model(
        "ExtractionOutput",
        __base__=ExtractionOutput,
        facts=(list[fact], ...),
    )


@dataclass(frozen=True, slots=True)
class ShownFact:
    """A current fact as the model sees it, under its pass-local id."""

    alias: str
    memory_id: uuid.UUID
    scope: str
    category: str | None
    subject: str | None
    lifecycle: str
    text: str


def alias_facts(
    facts: Sequence[tuple[uuid.UUID, str, str | None, str | None, str, str]],
) -> list[ShownFact]:
    """Give each (id, scope, category, subject, lifecycle, text) a pass-local id `m1`, `m2`, …"""
    return [
        ShownFact(f"m{index}", memory_id, scope, category, subject, lifecycle, text)
        for index, (memory_id, scope, category, subject, lifecycle, text) in enumerate(
            facts, start=1
        )
    ]


def system_prompt(
    category_modes: Mapping[str, str],
    org_categories: Sequence[str],
    *,
    org_writes: bool,
    max_facts: int,
) -> str:
    lines = [
        f"- {name}: {CATEGORY_MEANINGS.get(name, name.replace('_', ' '))}; {MODE_MEANINGS[mode]}"
        for name, mode in category_modes.items()
    ]
    org_rule = (
        ORG_ALLOWED.format(org_categories=", ".join(org_categories)) if org_writes else ORG_REFUSED
    )
    return SYSTEM_PROMPT.format(max_facts=max_facts, org_rule=org_rule, categories="\n".join(lines))


def render_user_prompt(
    shown: Sequence[ShownFact],
    earlier: Sequence[ReplayedMessage],
    new: Sequence[ReplayedMessage],
) -> str:
    """Current facts, then the messages (earlier ones for context, then the new ones), as JSON
    lines under headings. It takes the messages as replayed only (`MessageReplay`): what goes
    to the model is what a prompt may carry."""
    parts = ["## Current facts"]
    parts += [
        _line(
            {
                "id": fact.alias,
                "scope": fact.scope,
                "category": fact.category,
                "subject": fact.subject,
                "status": "unconfirmed" if fact.lifecycle == "proposed" else "confirmed",
                "text": fact.text,
            }
        )
        for fact in shown
    ] or ["(none)"]
    if earlier:
        parts += ["", "## Earlier messages (context only: already processed)"]
        parts += [_message_line(message) for message in earlier]
    parts += ["", "## New messages (extract from these)"]
    parts += [_message_line(message) for message in new]
    return "\n".join(parts)


def _message_line(message: ReplayedMessage) -> str:
    content = message.content.strip()
    if len(content) > MESSAGE_PROMPT_CHARS:
        content = content[:MESSAGE_PROMPT_CHARS] + "…"
    return _line({"role": message.role, "content": content})


def _line(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False)


_SUBJECT_JUNK = re.compile(r"[^a-z0-9]+")
# Where camelCase and PascalCase start a word: a capital after a small letter or digit
# ("homeCity"), and the last capital of a run that a small letter follows ("HTTPServer").
_SUBJECT_CAMEL_WORD = re.compile(r"([a-z0-9])([A-Z])")
_SUBJECT_CAPITALS_WORD = re.compile(r"([A-Z])([A-Z][a-z])")


def normalise_subject(subject: str) -> str | None:
    """A subject as stored: lower-case snake_case, at most 64 characters; None when empty.

    The words of a subject meet however the model spells them: camelCase, kebab-case, spaces
    and snake_case of the same words give the same key ("homeCity", "home-city", "Home City"
    and "home_city" are all `home_city`), so two facts about one topic supersede each other.
    `memories.repository.subject_key_sql` is the same function in SQL."""
    words = _SUBJECT_CAPITALS_WORD.sub(r"\1_\2", _SUBJECT_CAMEL_WORD.sub(r"\1_\2", subject))
    cleaned = _SUBJECT_JUNK.sub("_", words.casefold()).strip("_")[:64].strip("_")
    return cleaned or None
