"""The extraction pass, the write path with an LLM: extract → embed → resolve → commit.

A worker runs it for `MEMORY_EXTRACTION_JOB`: read where the thread's last pass ended, decide
with `triggers.decide` whether a pass is due, show the model the messages and the user's
current facts (hybrid search), ask it once per window for a proposal under a strict JSON
schema, embed the candidates, then — in one transaction holding the owner's write lock — check
that no other pass moved the cursor meanwhile, gather the live facts the candidates may touch
(and which of them are deliberate), let the deterministic resolver decide, apply its decisions
through `DerivedMemoryWriter` (history events included) and record the pass. The model is called
outside any transaction. The model reads the messages as every prompt replays them
(`MessageReplay`: detected secrets masked unless configured not to), and so does the search
for the facts shown beside them; the evidence it quotes is found in the messages as it read
them (typography, case and whitespace aside: `QuotedMessages`) and stored in the user's own
characters, and evidence no human message holds is not stored (it would read as the user's
words).
A model failure (down, timeout, malformed or schema-violating reply)
raises before anything is written, so the job is retried with backoff and the cursor stays
where it was: the next pass reads the same messages again.

Written memories carry provenance: thread, message ids, evidence and the extractor model
(`metadata.extractor_model`). A superseded fact becomes invalid at the time of the message that
announced the change, not the pass's clock.

`WritePath` is what the job handlers call: this pass with an LLM, turn storage without one.
`ExtractionPass` runs one window in two phases: `propose` (the model and the embedder, no
transaction open) and `commit` (one transaction under the write lock).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

import numpy as np
from pydantic import ValidationError

from service.auth.owner import Owner
from service.config import Settings
from service.errors import DomainError, ValidationFailed
from service.extraction.passes import (
    CONTEXT_MESSAGES,
    EXTRACTOR_ACTOR,
    MAX_ROUNDS,
    SOURCE_IDS_MAX,
    WRITE_PATH_ACTORS,
    PassRunner,
    Unit,
)
from service.extraction.prompt import (
    EXTRACTION_SCHEMA_NAME,
    ExtractionOutput,
    ShownFact,
    alias_facts,
    extraction_output_model,
    normalise_subject,
    render_user_prompt,
    system_prompt,
)
from service.extraction.record import PassOutcome, PassRecord
from service.extraction.resolver import (
    EPISODE_CATEGORY,
    EVIDENCE_MAX,
    Candidate,
    Dropped,
    Known,
    KnownFact,
    NewFact,
    ProfileChange,
    ProfileProposalIn,
    Resolution,
    ResolverRules,
    SupersedeReason,
    candidate_refusal,
    remembered_name,
    resolve,
    resolve_episode,
    resolve_profile,
)
from service.extraction.triggers import TriggerRules, decide, windows
from service.extraction.turns import TurnStorage
from service.kit.quoting import fold, quoted_span
from service.kit.types import visible_text
from service.memories.dependencies import write_path_memory_search
from service.memories.embedding import EmbeddingBackfill, embed_or_none
from service.memories.models import Memory
from service.memories.proposals import PROPOSED_SUPERSEDES, REVIEW_REASON, named_replacements
from service.memories.repository import CategoryRelevance
from service.memories.schemas import MEMORY_TEXT_MAX, MemoryCreate, MemoryWritten, SearchRequest
from service.memories.search import MemorySearch
from service.memories.writer import DerivedMemory, DerivedMemoryWriter
from service.observability import tracer
from service.profile.dependencies import profile_service
from service.profile.schemas import PatchAdd
from service.providers.llm import ChatModel
from service.state import AppState
from service.threads.models import Message
from service.threads.replay import MessageReplay, ReplayedMessage
from service.threads.schemas import HUMAN_ROLE

logger = logging.getLogger("mneme.extraction")

# `metadata.review_reason` of a fact proposed because it would replace a deliberate one.
REVIEW_REASON_DELIBERATE = "contradicts_deliberate_fact"


@dataclass(slots=True)
class _Applied:
    """What applying one resolution changed."""

    written: list[uuid.UUID] = field(default_factory=list)
    superseded: int = 0
    reconfirmed: int = 0
    removed: int = 0
    refused: int = 0
    """New facts the API's rules refused (`dropped["refused"]` of the pass)."""


def speaker_of(source_ids: Sequence[uuid.UUID], window: Sequence[Message]) -> str | None:
    """The author a fact was said by: the one name its source messages share (a turn's `name`),
    or None when they carry none or several. Search gives the fact the speaker prior when a
    question names its author, as it does for the turns themselves."""
    sources = set(source_ids)
    names = {m.name for m in window if m.id in sources and m.name}
    return remembered_name(names.pop()) if len(names) == 1 else None


@dataclass(frozen=True, slots=True)
class ExtractionWindow:
    """One window of a thread's pending messages, and where the pass over it starts."""

    tenant_id: str
    thread_id: uuid.UUID
    user_id: str
    after: int  # the cursor the pass read; the commit checks that it has not moved
    earlier: Sequence[Message]
    messages: Sequence[Message]
    org_writes: bool
    trigger: str


@dataclass(frozen=True, slots=True)
class Proposal:
    """What the model proposed for a window, checked and embedded: everything the commit
    phase needs, gathered outside any transaction."""

    rules: ResolverRules
    candidates: list[Candidate]
    removals: list[uuid.UUID]
    unknown_ids: int
    vectors: dict[int, list[float] | None]
    episode: str | None
    episode_vector: list[float] | None
    episode_refusal: str | None
    profile_changes: list[ProfileChange]
    profile_dropped: list[Dropped]


class WritePath:
    """Runs the write path's passes for one process (the job handlers call it)."""

    def __init__(self, state: AppState) -> None:
        self._runner = PassRunner(state)
        self._turns = TurnStorage(self._runner)
        settings = state.settings
        # The extraction pass exists only with a model; without one the write path stores turns.
        self._extraction = (
            ExtractionPass(self._runner, state.chat_model, settings, state.embedding_backfill)
            if state.chat_model is not None
            else None
        )
        self._settings = settings
        self.trigger_rules = TriggerRules(
            strategy=settings.extraction_strategy,
            interval=settings.extraction_interval_turns,
            farewell_phrases=tuple(settings.extraction_farewell_phrases),
            min_chars=settings.extraction_min_conversation_chars,
        )

    async def store_turns(self, tenant_id: str, thread_id: uuid.UUID) -> list[PassOutcome]:
        """Turn storage (the write path without an LLM)."""
        return await self._turns.store_turns(tenant_id, thread_id)

    async def extract(
        self, tenant_id: str, thread_id: uuid.UUID, *, org_writes: bool
    ) -> list[PassOutcome]:
        """Run the passes due on the thread (none when the trigger does not fire). Raises
        `LLMUnavailable` when the model fails; nothing of that window is written then."""
        if self._extraction is None:
            return await self.store_turns(tenant_id, thread_id)
        outcomes: list[PassOutcome] = []
        for _ in range(MAX_ROUNDS):
            state = await self._runner.read(tenant_id, thread_id)
            if state is None:
                return outcomes
            decision = decide(state.pending, self.trigger_rules)
            if not decision.due:
                logger.debug("thread %s: no extraction pass (%s)", thread_id, decision.reason)
                return outcomes
            turns = state.pending[: decision.complete]
            earlier: list[Message] = state.context
            after = state.after
            lost_race = False
            for start, end in windows(turns, self._settings.extraction_max_window_messages):
                window = turns[start:end]
                outcome = await self._extraction.run(
                    ExtractionWindow(
                        tenant_id,
                        thread_id,
                        state.user_id,
                        after=after,
                        earlier=earlier[-CONTEXT_MESSAGES:],
                        messages=window,
                        org_writes=org_writes,
                        trigger=decision.reason,
                    )
                )
                outcomes.append(outcome)
                if outcome.status != "written":
                    lost_race = True
                    break
                after, earlier = window[-1].seq, window
            if not lost_race and not state.truncated:
                return outcomes
        return outcomes


def resolver_rules(settings: Settings, human_turns: int) -> ResolverRules:
    """The resolver's rules from the settings, for a window of `human_turns` human turns."""
    return ResolverRules(
        min_confidence=settings.extraction_fact_confidence_threshold,
        quarantine_confidence=settings.extraction_quarantine_confidence,
        near_duplicate_cosine=settings.extraction_near_duplicate_cosine,
        max_facts=settings.extraction_max_facts_per_turn * max(human_turns, 1),
        category_modes=dict(settings.extraction_category_modes),
        org_categories=frozenset(settings.extraction_org_categories),
        contradiction_cosine=settings.extraction_contradiction_cosine,
        multi_valued_subjects=frozenset(
            normalise_subject(s) or s for s in settings.extraction_multi_valued_subjects
        ),
        single_choice_words=frozenset(
            normalise_subject(s) or s for s in settings.extraction_single_choice_words
        ),
    )


class ExtractionPass:
    """One extraction pass over one window, in two phases: `propose` asks the model and
    embeds what it proposed (no transaction open), `commit` resolves the proposal against the
    live facts and writes it under the owner's write lock."""

    def __init__(
        self,
        runner: PassRunner,
        chat_model: ChatModel,
        settings: Settings,
        backfill: EmbeddingBackfill,
    ) -> None:
        self._runner = runner
        self._chat_model = chat_model
        self._settings = settings
        self._backfill = backfill
        self._replay = MessageReplay.configured(settings)

    async def run(self, window: ExtractionWindow) -> PassOutcome:
        """Propose, then commit; a model failure raises from `propose`, before any write."""
        return await self.commit(window, await self.propose(window))

    async def propose(self, window: ExtractionWindow) -> Proposal:
        """Show the model the window and the user's most relevant facts, and turn its answer
        into resolver candidates with their vectors."""
        settings = self._settings
        earlier = [self._replay.message(m) for m in window.earlier]
        new = [self._replay.message(m) for m in window.messages]
        humans = [m for m in new if m.role == HUMAN_ROLE]
        rules = resolver_rules(self._settings, len(humans))
        query = "\n".join(m.content for m in humans).strip()[:MEMORY_TEXT_MAX] or "user"

        async with self._runner.unit(
            window.tenant_id, EXTRACTOR_ACTOR, org_writes=window.org_writes
        ) as unit:
            shown = await self._current_facts(
                unit.services.get(write_path_memory_search), window.user_id, query
            )

        categories = tuple(settings.extraction_category_modes)
        with tracer.start_as_current_span("extraction.model") as span:
            output = await self._chat_model.complete_json(
                system=system_prompt(
                    settings.extraction_category_modes,
                    settings.extraction_org_categories,
                    org_writes=window.org_writes,
                    max_facts=rules.max_facts,
                ),
                user=render_user_prompt(shown, earlier, new),
                output=extraction_output_model(categories),
                schema_name=EXTRACTION_SCHEMA_NAME,
            )
            span.set_attribute("mneme.proposed_facts", len(output.facts))

        candidates, removals, unknown_ids = _candidates(output, shown, new)
        episode, episode_refusal = resolve_episode(output.episode)
        profile_changes, profile_dropped = resolve_profile(
            [ProfileProposalIn(p.key, p.value, p.confidence, p.evidence) for p in output.profile],
            rules,
        )
        # A fact the API's rules refuse is dropped by the resolver: neither embedded nor looked
        # up (`_known`).
        embedded = [c for c in candidates if candidate_refusal(c) is None]
        texts = [c.text for c in embedded] + ([episode] if episode else [])
        with tracer.start_as_current_span("extraction.embed"):
            vectors = await embed_or_none(self._backfill.embedder, texts)
        return Proposal(
            rules=rules,
            candidates=candidates,
            removals=removals,
            unknown_ids=unknown_ids,
            vectors={
                c.index: (vectors[position] if vectors is not None else None)
                for position, c in enumerate(embedded)
            },
            episode=episode,
            episode_vector=vectors[-1] if vectors is not None and episode else None,
            episode_refusal=episode_refusal,
            profile_changes=profile_changes,
            profile_dropped=profile_dropped,
        )

    async def commit(self, window: ExtractionWindow, proposal: Proposal) -> PassOutcome:
        """In one transaction holding the owners' write locks: unless another pass moved the
        cursor meanwhile, resolve the proposal against the live facts, write the decisions
        and record the pass."""
        user_id, thread_id = window.user_id, window.thread_id
        messages, candidates = window.messages, proposal.candidates
        async with self._runner.unit(
            window.tenant_id, EXTRACTOR_ACTOR, org_writes=window.org_writes
        ) as unit:
            await unit.memories.lock_derived_writes(Owner.user(user_id))
            if window.org_writes and any(c.scope == "org" for c in candidates):
                await unit.memories.lock_derived_writes(Owner.org())
            if await unit.cursor_moved(thread_id, window.after):
                return PassOutcome("superseded", window.after + 1, messages[-1].seq)
            known = await self._known(
                unit.memories,
                user_id,
                candidates,
                proposal.vectors,
                proposal.removals,
                window.org_writes,
                proposal.rules,
            )
            resolution = resolve(candidates, proposal.removals, known, proposal.rules)
            with tracer.start_as_current_span("extraction.apply"):
                applied = await self._apply(
                    unit,
                    user_id,
                    thread_id,
                    messages,
                    candidates,
                    resolution,
                    known,
                    proposal.vectors,
                    window.trigger,
                )
                episode_refused = False
                if proposal.episode:
                    episode = await _record_unless_refused(
                        unit,
                        partial(
                            self._episode,
                            user_id,
                            thread_id,
                            messages,
                            proposal.episode,
                            proposal.episode_vector,
                        ),
                        f"the episode of thread {thread_id}",
                    )
                    episode_refused = episode is None
                    if episode is not None and not episode.duplicate:
                        applied.written.append(episode.id)
                profile_keys, profile_left_out = await self._apply_profile(
                    unit, user_id, proposal.profile_changes
                )
            dropped = resolution.drop_counts()
            for drop in proposal.profile_dropped:
                dropped[drop.reason] = dropped.get(drop.reason, 0) + 1
            dropped.update(profile_left_out)
            if proposal.episode_refusal:
                dropped[f"episode:{proposal.episode_refusal}"] = 1
            elif episode_refused:
                dropped["episode:refused"] = 1
            if proposal.unknown_ids:
                dropped["unknown_id"] = proposal.unknown_ids
            if applied.refused:
                dropped["refused"] = applied.refused
            record = PassRecord(
                user_id=user_id,
                mode="llm",
                trigger=window.trigger,
                model=self._chat_model.model_name,
                org_writes=window.org_writes,
                from_seq=window.after + 1,
                through_seq=messages[-1].seq,
                written=applied.written,
                superseded=applied.superseded,
                reconfirmed=applied.reconfirmed,
                removed=applied.removed,
                flagged=len(resolution.flagged),
                profile_keys=profile_keys,
                dropped=dropped,
            )
            await unit.repository.finish_pass(EXTRACTOR_ACTOR, thread_id, record)
        logger.info(
            "extraction pass on thread %s (messages %d-%d, %s): %d written, %d superseded, "
            "%d re-confirmed, %d removed, %d flagged, dropped %s",
            thread_id,
            record.from_seq,
            record.through_seq,
            window.trigger,
            len(record.written),
            record.superseded,
            record.reconfirmed,
            record.removed,
            record.flagged,
            record.dropped,
        )
        return PassOutcome("written", record.from_seq, record.through_seq, record)

    async def _current_facts(
        self, search: MemorySearch, user_id: str, query: str
    ) -> list[ShownFact]:
        """The user's (and the org's) live facts most relevant to the window, by hybrid
        search, under pass-local ids."""
        limit = self._settings.extraction_context_facts
        if limit == 0:
            return []
        found = await search.search(
            Owner.user(user_id),
            SearchRequest(query=query, kinds=["semantic"], scopes=["user", "org"], limit=limit),
        )
        return alias_facts(
            [
                (
                    hit.memory.id,
                    hit.memory.scope,
                    hit.memory.category,
                    _subject_of(hit.memory.metadata),
                    hit.memory.lifecycle,
                    hit.memory.text,
                )
                for hit in found.hits
            ]
        )

    async def _known(
        self,
        memories: DerivedMemoryWriter,
        user_id: str,
        candidates: Sequence[Candidate],
        vectors: Mapping[int, list[float] | None],
        removals: Sequence[uuid.UUID],
        org_writes: bool,
        rules: ResolverRules,
    ) -> Known:
        """The live facts the candidates and removals may touch, read under the write lock:
        per candidate its owner's nearest neighbours, the facts of its category and an exact
        duplicate, with cosines; plus every referenced id. Facts someone wrote or changed
        through the API are marked deliberate."""
        facts: dict[uuid.UUID, KnownFact] = {}
        cosine: dict[tuple[int, uuid.UUID], float] = {}
        for candidate in candidates:
            # The resolver drops these before it compares them with anything.
            if (candidate.scope == "org" and not org_writes) or candidate_refusal(candidate):
                continue
            owner = Owner.user(user_id) if candidate.scope == "user" else Owner.org()
            related = await memories.related(
                owner,
                "semantic",
                text_value=candidate.text,
                vector=vectors.get(candidate.index),
                # Of its category, only the facts the resolver may act on: the similar enough
                # and those of its subject.
                category=CategoryRelevance(
                    candidate.category,
                    candidate.subject,
                    rules.least_cosine_acted_on(candidate.category),
                ),
            )
            for item in related:
                facts[item.memory.id] = _known_fact(item.memory)
                if item.cosine is not None:
                    cosine[(candidate.index, item.memory.id)] = item.cosine
        # And what the proposed ones among them would replace: a confident repeat confirms such
        # a fact, and replaces those that are still live.
        referenced = (
            {fid for c in candidates for fid in c.supersedes}
            | set(removals)
            | {fid for fact in facts.values() for fid in fact.proposed_supersedes}
        )
        now = datetime.now(UTC)
        for memory in (await memories.by_ids(sorted(referenced - facts.keys()))).values():
            live = memory.lifecycle != "superseded" and (
                memory.expires_at is None or memory.expires_at > now
            )
            if live and memory.kind == "semantic":
                facts[memory.id] = _known_fact(memory)
        deliberate = await memories.deliberate(sorted(facts), WRITE_PATH_ACTORS)
        for fact_id in deliberate:
            facts[fact_id] = replace(facts[fact_id], deliberate=True)
        return Known(
            user_id=user_id,
            org_writes=org_writes,
            facts=facts,
            cosine=cosine,
            between=cosines_between(vectors),
        )

    async def _apply(
        self,
        unit: Unit,
        user_id: str,
        thread_id: uuid.UUID,
        window: Sequence[Message],
        candidates: Sequence[Candidate],
        resolution: Resolution,
        known: Known,
        vectors: Mapping[int, list[float] | None],
        trigger: str,
    ) -> _Applied:
        """Write the resolution through the memory service: re-confirmations (the repeating
        messages added to the fact's sources; a proposed fact a repeat confirms followed by
        what it replaces), new facts (with provenance), each followed by
        the facts it supersedes — invalid from the newest message the new fact quotes —, and
        removals (invalid from the window's last human message), each with history."""
        applied = _Applied()
        sent_at = {m.id: m.created_at for m in window}
        # Evidence quotes the messages as the model read them.
        said = QuotedMessages([self._replay.message(m) for m in window])
        # Re-confirmations first: a fact repeated in one message and replaced in a later one
        # is re-confirmed while it is still live, then superseded.
        by_index = {c.index: c for c in candidates}
        for reconfirmation in resolution.reconfirmations:
            fact = known.facts[reconfirmation.fact_id]
            said_again = said.source_ids(by_index[reconfirmation.candidate_index].evidence)
            reconfirmed = await unit.memories.reconfirm(
                _owner_of(fact),
                fact.id,
                promote=reconfirmation.promote,
                confidence=reconfirmation.confidence,
                source_message_ids=said_again,
            )
            if reconfirmed is None:
                continue
            applied.reconfirmed += 1
            # Confirmed by the repeat: what it would replace is replaced as a reviewer's
            # confirmation replaces it.
            applied.superseded += await unit.memories.supersede_confirmed(
                _owner_of(fact), reconfirmed, reconfirmation.supersedes
            )
        # New facts in the resolver's order, so that one written for an earlier message exists
        # before a later one supersedes it.
        written: dict[int, MemoryWritten] = {}
        # What a fact the API refused would have superseded: the fact replacing it takes over.
        unreplaced: dict[int, list[tuple[Owner, uuid.UUID, SupersedeReason]]] = {}
        for new_fact in resolution.new_facts:
            candidate = new_fact.candidate
            owner = Owner.user(user_id) if candidate.scope == "user" else Owner.org()
            metadata: dict[str, Any] = {
                "origin": "extraction",
                "extractor_model": self._chat_model.model_name,
                "subject": candidate.subject,
                "trigger": trigger,
            }
            proposed_supersedes = _proposed_targets(new_fact, written, unreplaced)
            if proposed_supersedes:
                metadata[PROPOSED_SUPERSEDES] = [str(i) for i in proposed_supersedes]
            if new_fact.flagged:
                metadata[REVIEW_REASON] = REVIEW_REASON_DELIBERATE
            targets: list[tuple[Owner, uuid.UUID, SupersedeReason]] = [
                (_owner_of(known.facts[s.fact_id]), s.fact_id, s.reason)
                for s in new_fact.supersedes
            ]
            for earlier in new_fact.supersedes_earlier:
                if earlier.candidate_index in written:
                    targets.append((owner, written[earlier.candidate_index].id, earlier.reason))
                else:
                    targets.extend(unreplaced.pop(earlier.candidate_index, []))
            source_ids = said.source_ids(candidate.evidence)
            # Stored evidence reads as the user's words: a quote the model made up (found in no
            # human message of the window) is not kept, the fact is.
            evidence = said.stored_evidence(candidate.evidence)
            memory = await _record_unless_refused(
                unit,
                partial(
                    _fact,
                    owner,
                    candidate,
                    evidence,
                    new_fact,
                    thread_id,
                    source_ids,
                    window,
                    vectors.get(candidate.index),
                    metadata,
                ),
                f"a fact of thread {thread_id}",
            )
            if memory is None:
                applied.refused += 1
                unreplaced[candidate.index] = targets
                continue
            written[candidate.index] = memory
            if not memory.duplicate:
                applied.written.append(memory.id)
            invalid_at = max(sent_at[i] for i in source_ids)
            for target_owner, target_id, reason in targets:
                if target_id == memory.id:
                    continue
                if await unit.memories.supersede(
                    target_owner, target_id, by=memory, reason=reason, invalid_at=invalid_at
                ):
                    applied.superseded += 1
        humans = [m for m in window if m.role == HUMAN_ROLE] or list(window)
        for fact_id in resolution.removals:
            fact = known.facts[fact_id]
            if await unit.memories.supersede(
                _owner_of(fact),
                fact.id,
                by=None,
                reason="removed",
                invalid_at=humans[-1].created_at,
            ):
                applied.removed += 1
        return applied

    def _episode(
        self,
        user_id: str,
        thread_id: uuid.UUID,
        window: Sequence[Message],
        text: str,
        vector: list[float] | None,
    ) -> DerivedMemory:
        return DerivedMemory(
            Owner.user(user_id),
            MemoryCreate(
                kind="episodic",
                text=text,
                category=EPISODE_CATEGORY,
                event_at=window[-1].created_at,
                source_thread_id=thread_id,
                source_message_ids=[m.id for m in window][:SOURCE_IDS_MAX],
                metadata={"origin": "extraction", "extractor_model": self._chat_model.model_name},
            ),
            vector,
            "extraction",
        )

    async def _apply_profile(
        self, unit: Unit, user_id: str, changes: Sequence[ProfileChange]
    ) -> tuple[list[str], dict[str, int]]:
        """Set each attribute on the user's profile through the profile service (its size
        limit and credential rules apply; audit-logged); one refused key skips only itself.
        The keys set, and the values left out by reason: `profile:refused` by the profile's
        rules, `profile:set_by_user` because the key's value was set through the API (the
        user's own, which extraction does not overwrite). A value the profile already holds
        is neither."""
        applied: list[str] = []
        dropped: dict[str, int] = {}
        for change in changes:
            # `resolve_profile` let through only values this patch takes (`api_refusal`).
            operation = PatchAdd.model_validate(
                {"op": "add", "path": f"/{change.key}", "value": change.value}
            )
            try:
                async with unit.services.session.begin_nested():
                    written = await unit.services.get(profile_service).set_extracted(
                        Owner.user(user_id), operation
                    )
            except DomainError as exc:
                logger.info("profile attribute %r not set: %s", change.key, exc.code)
                dropped["profile:refused"] = dropped.get("profile:refused", 0) + 1
                continue
            if written == "set":
                applied.append(change.key)
            elif written == "kept":
                dropped["profile:set_by_user"] = dropped.get("profile:set_by_user", 0) + 1
        return applied, dropped


def _fact(
    owner: Owner,
    candidate: Candidate,
    evidence: str | None,
    new_fact: NewFact,
    thread_id: uuid.UUID,
    source_ids: list[uuid.UUID],
    window: Sequence[Message],
    vector: list[float] | None,
    metadata: dict[str, Any],
) -> DerivedMemory:
    """A new fact of the resolution as the memory service writes it, with its provenance (its
    `evidence` when a message of the window holds it). Its `event_at` is the time of the newest
    message its sources name (the one it was said in), as an episode's is its window's last:
    the search's date filters and the date a question names find it by when it was said, not
    by when the pass ran."""
    sources = set(source_ids)
    return DerivedMemory(
        owner,
        MemoryCreate(
            kind="semantic",
            text=candidate.text,
            scope=candidate.scope,
            category=candidate.category,
            confidence=candidate.confidence,
            lifecycle=new_fact.lifecycle,
            needs_review=new_fact.needs_review,
            source_thread_id=thread_id,
            source_message_ids=source_ids,
            event_at=max((m.created_at for m in window if m.id in sources), default=None),
            speaker=speaker_of(source_ids, window),
            evidence=evidence,
            metadata=metadata,
        ),
        vector,
        "extraction",
    )


async def _record_unless_refused(
    unit: Unit, derive: Callable[[], DerivedMemory], what: str
) -> MemoryWritten | None:
    """Write the memory `derive` makes, or None when the API's rules refuse it (logged as
    `what`). A refusal comes before anything of it is written, so the pass goes on without it:
    raised, it would fail the pass, and every fact of its window, for good."""
    try:
        [written] = await unit.memories.record_derived([derive()])
    except (ValidationError, ValidationFailed) as refused:
        logger.warning(
            "extraction: %s refused by the API's rules (%s); left out", what, type(refused).__name__
        )
        return None
    return written


class QuotedMessages:
    """The human messages of a window as the model read them, each folded once
    (`service.kit.quoting`), to find the ones a fact's evidence quotes."""

    def __init__(self, window: Sequence[ReplayedMessage]) -> None:
        self._humans = [m for m in window if m.role == HUMAN_ROLE]
        self._folded = [fold(m.content) for m in self._humans]

    def quoting(self, evidence: str) -> list[ReplayedMessage]:
        """The human messages that contain the evidence quote, typography, case and whitespace
        aside (`fold`); none for evidence that is no quote of the user's."""
        quote = fold(evidence)
        if not quote:
            return []
        return [m for m, folded in zip(self._humans, self._folded, strict=True) if quote in folded]

    def sources(self, evidence: str) -> list[ReplayedMessage]:
        """The messages a fact with this evidence is taken from: the human messages quoting it,
        all of the window's human messages when none does."""
        return (self.quoting(evidence) or self._humans)[:SOURCE_IDS_MAX]

    def source_ids(self, evidence: str) -> list[uuid.UUID]:
        return [m.id for m in self.sources(evidence)]

    def stored_evidence(self, evidence: str) -> str | None:
        """The evidence a fact keeps: the words of the newest human message quoting it, as the
        user typed them (`quoted_span`: a model that writes a straight apostrophe for the
        user's curly one quotes the user, and the user's own characters are kept); None when
        no human message quotes it (a quote the model made up, or took from the assistant's
        reply, would read as the user's words)."""
        quoting = self.quoting(evidence)
        span = quoted_span(fold(evidence), quoting[-1].content) if quoting else None
        return (visible_text(span[:EVIDENCE_MAX]) or None) if span else None


def cosines_between(vectors: Mapping[int, list[float] | None]) -> dict[tuple[int, int], float]:
    """The cosine between each two candidates' vectors, keyed by their indexes (the smaller
    first); candidates without a vector are left out."""
    embedded = sorted((index, vector) for index, vector in vectors.items() if vector)
    if len(embedded) < 2:
        return {}
    matrix = np.asarray([vector for _, vector in embedded], dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
    cosines = unit @ unit.T
    return {
        (embedded[i][0], embedded[j][0]): float(cosines[i, j])
        for i in range(len(embedded))
        for j in range(i + 1, len(embedded))
    }


def _candidates(
    output: ExtractionOutput, shown: Sequence[ShownFact], window: Sequence[ReplayedMessage]
) -> tuple[list[Candidate], list[uuid.UUID], int]:
    """The proposal with pass-local ids resolved (ids the model made up are counted, not used),
    each fact placed at the newest message its evidence quotes."""
    by_alias = {fact.alias: fact.memory_id for fact in shown}
    unknown = 0

    def resolved(refs: Sequence[str]) -> list[uuid.UUID]:
        nonlocal unknown
        ids = []
        for ref in refs:
            memory_id = by_alias.get(ref.strip().strip("[]"))
            if memory_id is None:
                unknown += 1
            else:
                ids.append(memory_id)
        return ids

    quoted = QuotedMessages(window)
    candidates: list[Candidate] = []
    for index, fact in enumerate(output.facts):
        # As a memory stores evidence (nothing visible is none at all).
        evidence = visible_text(fact.evidence)[:EVIDENCE_MAX]
        candidates.append(
            Candidate(
                index=index,
                text=fact.text.strip(),
                category=fact.category,
                subject=remembered_name(normalise_subject(fact.subject)),
                scope=fact.scope,
                confidence=fact.confidence,
                evidence=evidence,
                supersedes=tuple(resolved(fact.supersedes)),
                said_at=max((m.seq for m in quoted.sources(evidence)), default=0),
            )
        )
    return candidates, resolved(output.remove), unknown


def _proposed_targets(
    new_fact: NewFact,
    written: Mapping[int, MemoryWritten],
    unreplaced: Mapping[int, Sequence[tuple[Owner, uuid.UUID, SupersedeReason]]],
) -> list[uuid.UUID]:
    """The facts a proposed new fact would replace, as its `metadata.proposed_supersedes`
    names them: the stored ones the resolver found, then those written for earlier
    candidates of the pass (for one the API refused, what that one would have replaced)."""
    targets = list(new_fact.proposed_supersedes)
    for index in new_fact.proposed_supersedes_earlier:
        if index in written:
            targets.append(written[index].id)
        else:
            targets.extend(target_id for _, target_id, _ in unreplaced.get(index, []))
    return list(dict.fromkeys(targets))


def _known_fact(memory: Memory) -> KnownFact:
    return KnownFact(
        id=memory.id,
        scope=memory.scope,
        user_id=memory.user_id,
        category=memory.category,
        subject=_subject_of(memory.metadata_),
        text=memory.text,
        lifecycle=memory.lifecycle,
        flagged=memory.lifecycle == "proposed"
        and (memory.metadata_ or {}).get(REVIEW_REASON) == REVIEW_REASON_DELIBERATE,
        proposed_supersedes=tuple(named_replacements(memory.metadata_, memory.id))
        if memory.lifecycle == "proposed"
        else (),
    )


def _subject_of(metadata: Mapping[str, Any] | None) -> str | None:
    subject = (metadata or {}).get("subject")
    return normalise_subject(subject) if isinstance(subject, str) else None


def _owner_of(fact: KnownFact) -> Owner:
    return Owner.org() if fact.scope == "org" or fact.user_id is None else Owner.user(fact.user_id)
