"""Compaction (`POST …/memories/compact`): the model consolidates a user's semantic facts
into fewer, cleaner ones; the originals are superseded, never deleted.

The model sees the user's live facts oldest first under pass-local ids (`m1`, …) and answers
with consolidated facts, each naming the facts it replaces (`sources`). Deterministic rules
decide what is written: a consolidated fact needs at least one source it may claim (each
original is folded into one fact at most), passes the API's text rules, and is not its single
source restated; it is `confirmed` only when all its sources are, takes their lowest
confidence, and happened when the latest of them did (their latest `event_at`). Facts the
model leaves out stay as they are. The write re-reads the sources under the user's write lock
and skips any consolidation whose sources changed during the model call.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, create_model

from service.auth.owner import Owner
from service.config import Settings
from service.extraction.errors import CompactionDisabled, CompactorUnavailable
from service.extraction.prompt import normalise_subject
from service.extraction.resolver import api_refusal, refusal, remembered_name
from service.extraction.schemas import CompactRequest, CompactResult
from service.kit.admission import outside_the_gate
from service.memories.embedding import embed_outside_a_transaction
from service.memories.models import Memory, normalise_text
from service.memories.schemas import MemoryCreate, MemoryRead
from service.memories.writer import DerivedMemory, DerivedMemoryWriter
from service.providers import Embedder
from service.providers.llm import ChatModel, LLMUnavailable

COMPACTION_SCHEMA_NAME = "memory_compaction"
SOURCE_IDS_MAX = 100

COMPACTION_PROMPT = """\
You maintain the long-term memory of an AI assistant about one user. Below are the facts it \
currently holds about the user, oldest first, as JSON lines with ids. Consolidate them into \
fewer, cleaner facts:
- merge facts that say the same thing or belong together into one short, self-contained \
sentence in the third person ("User prefers light mode and large fonts.");
- when facts contradict each other, keep what the newest one says;
- keep every detail that is still true; never add anything the facts do not say.

Answer with {"facts": [...]}, one entry per consolidated fact: "text", "category" (one of: \
{categories}), "subject" (a short snake_case name of what it is about) and "sources": the ids \
of the facts it replaces. Leave out facts that need no change: they stay as they are."""


class CompactedFact(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str
    category: str
    subject: str
    sources: list[str]


class CompactionOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    facts: list[CompactedFact]


@lru_cache(maxsize=8)
def compaction_output_model(categories: tuple[str, ...]) -> type[CompactionOutput]:
    """`CompactionOutput` whose facts' `category` is an enum of `categories`."""
    fact = create_model(
        "CompactedFact",
        __base__=CompactedFact,
        category=(cast(Any, Literal.__getitem__(categories)), ...),
    )
    return create_model(
        "CompactionOutput",
        __base__=CompactionOutput,
        facts=(list[fact], ...),
    )


@dataclass(frozen=True, slots=True)
class SourceFact:
    id: uuid.UUID
    text: str
    confidence: float
    lifecycle: str


@dataclass(frozen=True, slots=True)
class Consolidation:
    text: str
    category: str
    subject: str | None
    sources: tuple[SourceFact, ...]

    @property
    def confirmed(self) -> bool:
        return all(source.lifecycle == "confirmed" for source in self.sources)

    @property
    def confidence(self) -> float:
        return min(source.confidence for source in self.sources)


def plan_compaction(
    facts: Sequence[CompactedFact], sources: Mapping[str, SourceFact]
) -> tuple[list[Consolidation], dict[str, int]]:
    """The consolidations to write, and the proposed facts left out by reason."""
    plan: list[Consolidation] = []
    dropped: dict[str, int] = {}
    claimed: set[uuid.UUID] = set()

    def drop(reason: str) -> None:
        dropped[reason] = dropped.get(reason, 0) + 1

    for fact in facts:
        own: list[SourceFact] = []
        for alias in dict.fromkeys(ref.strip().strip("[]") for ref in fact.sources):
            source = sources.get(alias)
            if source is not None and source.id not in claimed:
                own.append(source)
        # The API's rules for the memory it is written as (a NUL in its text would fail the
        # whole compaction at the write).
        reason = refusal(fact.text) or api_refusal(
            MemoryCreate, {"kind": "semantic", "text": fact.text, "category": fact.category}
        )
        if reason is not None:
            drop(reason)
        elif not own:
            drop("no_sources")
        elif len(own) == 1 and normalise_text(own[0].text) == normalise_text(fact.text):
            drop("unchanged")
        else:
            claimed.update(source.id for source in own)
            plan.append(
                Consolidation(
                    fact.text.strip(),
                    fact.category,
                    remembered_name(normalise_subject(fact.subject)),
                    tuple(own),
                )
            )
    return plan, dropped


WriterUnit = Callable[[], AbstractAsyncContextManager[DerivedMemoryWriter]]
"""Opens a unit of work of the caller's and yields its derived-memory writer: committed when
the block ends, rolled back if it raises."""


class CompactionService:
    """Runs a compaction in two units of work around the model's call: the facts are read in
    one, and the consolidations written in the next, under the user's write lock, each
    checked against its sources read again. The model's call (seconds) and the new facts'
    embedding run between them and hold no database connection: a request's transaction
    held open over them kept its pooled connection idle for as long."""

    def __init__(
        self,
        unit: WriterUnit,
        chat_model: ChatModel | None,
        embedder: Embedder,
        settings: Settings,
    ) -> None:
        self._unit = unit
        self._chat_model = chat_model
        self._embedder = embedder
        self._settings = settings

    async def compact(self, user_id: str, request: CompactRequest) -> CompactResult:
        if self._chat_model is None:
            raise CompactionDisabled("Compaction needs an LLM (MNEME_LLM_*); none is configured.")
        owner = Owner.user(user_id)
        async with self._unit() as memories:
            facts = await memories.live_memories(
                owner,
                "semantic",
                limit=self._settings.compaction_max_facts,
                categories=request.categories,
            )
        if len(facts) < 2:
            return CompactResult(
                status="nothing_to_compact", read=len(facts), written=[], superseded=[], dropped={}
            )
        aliases = {f"m{index}": fact for index, fact in enumerate(facts, start=1)}
        categories = tuple(self._settings.extraction_category_modes)
        try:
            # Between the two units: no work of the process's, and its place in the admission
            # gate is free meanwhile (as for the embedding below).
            async with outside_the_gate():
                output = await self._chat_model.complete_json(
                    system=COMPACTION_PROMPT.replace("{categories}", ", ".join(categories)),
                    user=_render(aliases),
                    output=compaction_output_model(categories),
                    schema_name=COMPACTION_SCHEMA_NAME,
                )
        except LLMUnavailable as exc:
            raise CompactorUnavailable("The compaction model did not answer; retry.") from exc
        plan, dropped = plan_compaction(
            output.facts,
            {
                alias: SourceFact(fact.id, fact.text, fact.confidence, fact.lifecycle)
                for alias, fact in aliases.items()
            },
        )
        if not plan:
            return CompactResult(
                status="unchanged", read=len(facts), written=[], superseded=[], dropped=dropped
            )
        vectors = await embed_outside_a_transaction(self._embedder, [c.text for c in plan])
        written: list[MemoryRead] = []
        superseded: list[uuid.UUID] = []
        async with self._unit() as memories:
            await memories.lock_derived_writes(owner)
            current = await memories.by_ids([s.id for c in plan for s in c.sources])
            for index, consolidation in enumerate(plan):
                if not all(_still_live(current.get(s.id), user_id) for s in consolidation.sources):
                    dropped["changed"] = dropped.get("changed", 0) + 1
                    continue
                originals = [current[s.id] for s in consolidation.sources]
                [memory] = await memories.record_derived(
                    [
                        DerivedMemory(
                            owner,
                            self._item(consolidation, originals),
                            vectors[index] if vectors is not None else None,
                            "compaction",
                        )
                    ]
                )
                written.append(MemoryRead.model_validate(memory.model_dump()))
                for source in consolidation.sources:
                    if source.id != memory.id and await memories.supersede(
                        owner, source.id, by=memory, reason="compacted"
                    ):
                        superseded.append(source.id)
        return CompactResult(
            status="compacted" if written else "unchanged",
            read=len(facts),
            written=written,
            superseded=superseded,
            dropped=dropped,
        )

    def _item(self, consolidation: Consolidation, originals: Sequence[Memory]) -> MemoryCreate:
        """The consolidated fact as it is written: its provenance is its originals' (their
        thread when they share one, their messages), and it happened when the latest of them
        did (the latest `event_at` among those that carry one; none when none does), as an
        extracted fact happened when the newest message it quotes was said. Without it, a
        search's date filters would count it as happening when the compaction ran, and the
        date a question names would not find it."""
        assert self._chat_model is not None
        threads = {m.source_thread_id for m in originals}
        message_ids = list(dict.fromkeys(mid for m in originals for mid in m.source_message_ids))
        return MemoryCreate(
            kind="semantic",
            text=consolidation.text,
            category=consolidation.category,
            confidence=consolidation.confidence,
            lifecycle="confirmed" if consolidation.confirmed else "proposed",
            needs_review=not consolidation.confirmed,
            source_thread_id=threads.pop() if len(threads) == 1 else None,
            source_message_ids=message_ids[:SOURCE_IDS_MAX],
            event_at=max((m.event_at for m in originals if m.event_at is not None), default=None),
            metadata={
                "origin": "compaction",
                "extractor_model": self._chat_model.model_name,
                "subject": consolidation.subject,
                "compacted_from": [str(m.id) for m in originals],
            },
        )


def _still_live(memory: Memory | None, user_id: str) -> bool:
    return (
        memory is not None
        and memory.scope == "user"
        and memory.user_id == user_id
        and memory.lifecycle != "superseded"
    )


def _render(aliases: Mapping[str, Memory]) -> str:
    return "\n".join(
        json.dumps(
            {
                "id": alias,
                "category": fact.category,
                "status": "unconfirmed" if fact.lifecycle == "proposed" else "confirmed",
                "recorded": fact.created_at.date().isoformat(),
                "text": fact.text,
            },
            ensure_ascii=False,
        )
        for alias, fact in aliases.items()
    )
