"""The write path's background passes: extract → embed → resolve → commit.

Appends enqueue a job per thread in their own transaction (`hooks.py`); a worker runs it here:

* With an LLM (`MEMORY_EXTRACTION_JOB`): read where the thread's last pass ended, decide with
  `triggers.decide` whether a pass is due, show the model the messages and the user's current
  facts (hybrid search), ask it once per window for a proposal under a strict JSON schema, embed
  the candidates, then — in one transaction holding the owner's write lock — check that no other
  pass moved the cursor meanwhile, gather the live facts the candidates may touch, let the
  deterministic resolver decide, apply its decisions through `MemoryService` (history events
  included) and record the pass. The model is called outside any transaction. A model failure
  (down, timeout, malformed or schema-violating reply) raises before anything is written, so the
  job is retried with backoff and the cursor stays where it was: the next pass — the retry, or
  the next append's — reads the same messages again.
* Without an LLM (`TURN_MEMORIES_JOB`): each new human message is stored as an episodic memory
  of category `turn`, so search and context work with no API key.

Every pass acts as a system principal whose admin flag is the one the appending request's
principal had (carried in the job payload), so org memory is written only for admins however
the model answers. Written memories carry provenance: thread, message ids, evidence and the
extractor model (`metadata.extractor_model`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from service.accounts.repository import AccountRepository
from service.accounts.service import AccountService
from service.audit.service import AuditTrail
from service.auth.principal import Principal
from service.config import Settings
from service.db import tenant_transaction
from service.errors import DomainError
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
from service.extraction.repository import PASS_ACTION, ExtractionRepository
from service.extraction.resolver import (
    EVIDENCE_MAX,
    Candidate,
    Known,
    KnownFact,
    ProfileChange,
    ProfileProposalIn,
    Resolution,
    ResolverRules,
    normalise_text,
    refusal,
    resolve,
    resolve_episode,
    resolve_profile,
)
from service.extraction.triggers import HUMAN_ROLE, TriggerRules, decide, windows
from service.jobs import JobHandler
from service.kit.post_commit import BackgroundRunner, PostCommitTasks
from service.memories.embedding import EmbeddingBackfill, embed_or_none
from service.memories.models import Memory
from service.memories.repository import MemoryRepository, Owner
from service.memories.schemas import MEMORY_TEXT_MAX, MemoryCreate, SearchRequest
from service.memories.service import DerivedMemory, MemoryService
from service.observability import tracer
from service.profile.repository import ProfileRepository
from service.profile.schemas import PatchAdd
from service.profile.service import ProfileService
from service.providers.llm import ChatModel
from service.threads.models import Message

logger = logging.getLogger("mneme.extraction")

EXTRACTOR_ACTOR = "mneme:extractor"
TURNS_ACTOR = "mneme:turns"
TURN_CATEGORY = "turn"
EPISODE_CATEGORY = "episode"
# Messages before a window shown to the model for context (already processed).
CONTEXT_MESSAGES = 4
# Messages read per round; a longer backlog is read again after it is processed.
READ_LIMIT = 1000
# Rounds per job: a pass that lost a race re-reads; bounded so a job always ends.
MAX_ROUNDS = 10
SOURCE_IDS_MAX = 100

PassStatus = Literal["written", "superseded"]


@dataclass(frozen=True, slots=True)
class PassOutcome:
    """What one pass over one window did (`superseded`: another pass got there first)."""

    status: PassStatus
    from_seq: int
    through_seq: int
    written: list[uuid.UUID] = field(default_factory=list)
    superseded: int = 0
    reconfirmed: int = 0
    removed: int = 0
    profile_keys: list[str] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class _Applied:
    """What applying one resolution changed."""

    written: list[uuid.UUID] = field(default_factory=list)
    superseded: int = 0
    reconfirmed: int = 0
    removed: int = 0


@dataclass(frozen=True, slots=True)
class _Pending:
    user_id: str
    after: int  # the cursor: seq of the last processed message, -1 before the first pass
    context: list[Message]
    pending: list[Message]
    truncated: bool


@dataclass
class _Unit:
    """One transaction of a pass, with the services it writes through."""

    session: AsyncSession
    repository: ExtractionRepository
    memories: MemoryService
    profiles: ProfileService


def writer_principal(tenant_id: str, actor: str, *, org_writes: bool) -> Principal:
    """The principal a pass writes as: the service itself, admin exactly when the appending
    request's principal was (the flag its job payload carries)."""
    return Principal(
        tenant_id=tenant_id,
        subject=actor,
        kind="service",
        credential="api_key",
        is_admin=org_writes,
    )


class WritePath:
    """Runs the write path's passes for one process (the job handlers call it)."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        chat_model: ChatModel | None,
        settings: Settings,
        backfill: EmbeddingBackfill,
        background: BackgroundRunner,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._chat_model = chat_model
        self._settings = settings
        self._backfill = backfill
        self._background = background
        self.trigger_rules = TriggerRules(
            strategy=settings.extraction_strategy,
            interval=settings.extraction_interval_turns,
            farewell_phrases=tuple(settings.extraction_farewell_phrases),
            min_chars=settings.extraction_min_conversation_chars,
        )

    def resolver_rules(self, human_turns: int) -> ResolverRules:
        settings = self._settings
        return ResolverRules(
            min_confidence=settings.extraction_fact_confidence_threshold,
            quarantine_confidence=settings.extraction_quarantine_confidence,
            near_duplicate_cosine=settings.extraction_near_duplicate_cosine,
            max_facts=settings.extraction_max_facts_per_turn * max(human_turns, 1),
            category_modes=dict(settings.extraction_category_modes),
            org_categories=frozenset(settings.extraction_org_categories),
        )

    # --- units of work ----------------------------------------------------------------------

    @asynccontextmanager
    async def _unit(self, tenant_id: str, actor: str, *, org_writes: bool) -> AsyncIterator[_Unit]:
        """A transaction with the memory and profile services acting as the pass; work those
        services defer until after the commit (embedding retries) starts once it committed."""
        post_commit = PostCommitTasks()
        principal = writer_principal(tenant_id, actor, org_writes=org_writes)
        async with tenant_transaction(self._sessionmaker, tenant_id) as session:
            accounts = AccountService(AccountRepository(session, tenant_id))
            yield _Unit(
                session=session,
                repository=ExtractionRepository(session, tenant_id),
                memories=MemoryService(
                    MemoryRepository(session, tenant_id),
                    accounts,
                    self._backfill,
                    post_commit,
                    self._settings,
                    principal,
                ),
                profiles=ProfileService(
                    ProfileRepository(session, tenant_id),
                    accounts,
                    AuditTrail(session, principal),
                    self._settings,
                    principal,
                ),
            )
        for task in post_commit.take():
            self._background.start(task)

    async def _read(self, tenant_id: str, thread_id: uuid.UUID) -> _Pending | None:
        async with tenant_transaction(self._sessionmaker, tenant_id) as session:
            repository = ExtractionRepository(session, tenant_id)
            user_id = await repository.thread_owner(thread_id)
            if user_id is None:
                return None
            cursor = await repository.cursor(thread_id)
            after = -1 if cursor is None else cursor.through_seq
            first = max(after + 1 - CONTEXT_MESSAGES, 0)
            limit = READ_LIMIT + (after + 1 - first)
            messages = await repository.messages_between(thread_id, first, limit=limit)
        return _Pending(
            user_id=user_id,
            after=after,
            context=[m for m in messages if m.seq <= after],
            pending=[m for m in messages if m.seq > after],
            truncated=len(messages) == limit,
        )

    async def _cursor_moved(self, unit: _Unit, thread_id: uuid.UUID, after: int) -> bool:
        """Whether what the pass read is stale: another pass moved the cursor, or the thread
        is gone (deleted or purged while the model was answering). Called under the owner's
        write lock, which a purge holds too, so a purge that committed first is seen here and
        nothing of the purged user is written again."""
        if await unit.repository.thread_owner(thread_id) is None:
            return True
        cursor = await unit.repository.cursor(thread_id)
        return (-1 if cursor is None else cursor.through_seq) != after

    # --- extraction with the LLM ------------------------------------------------------------

    async def extract(
        self, tenant_id: str, thread_id: uuid.UUID, *, org_writes: bool
    ) -> list[PassOutcome]:
        """Run the passes due on the thread (none when the trigger does not fire). Raises
        `LLMUnavailable` when the model fails; nothing of that window is written then."""
        if self._chat_model is None:
            return await self.store_turns(tenant_id, thread_id)
        outcomes: list[PassOutcome] = []
        for _ in range(MAX_ROUNDS):
            state = await self._read(tenant_id, thread_id)
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
                outcome = await self._extract_window(
                    tenant_id,
                    thread_id,
                    state.user_id,
                    after=after,
                    earlier=earlier[-CONTEXT_MESSAGES:],
                    window=window,
                    org_writes=org_writes,
                    trigger=decision.reason,
                )
                outcomes.append(outcome)
                if outcome.status != "written":
                    lost_race = True
                    break
                after, earlier = window[-1].seq, window
            if not lost_race and not state.truncated:
                return outcomes
        return outcomes

    async def _extract_window(
        self,
        tenant_id: str,
        thread_id: uuid.UUID,
        user_id: str,
        *,
        after: int,
        earlier: Sequence[Message],
        window: Sequence[Message],
        org_writes: bool,
        trigger: str,
    ) -> PassOutcome:
        assert self._chat_model is not None
        settings = self._settings
        humans = [m for m in window if m.role == HUMAN_ROLE]
        rules = self.resolver_rules(len(humans))
        query = "\n".join(m.content for m in humans).strip()[:MEMORY_TEXT_MAX] or "user"

        async with self._unit(tenant_id, EXTRACTOR_ACTOR, org_writes=org_writes) as unit:
            shown = await self._current_facts(unit.memories, user_id, query)

        categories = tuple(settings.extraction_category_modes)
        with tracer.start_as_current_span("extraction.model") as span:
            output = await self._chat_model.complete_json(
                system=system_prompt(
                    settings.extraction_category_modes,
                    settings.extraction_org_categories,
                    org_writes=org_writes,
                    max_facts=rules.max_facts,
                ),
                user=render_user_prompt(shown, earlier, window),
                output=extraction_output_model(categories),
                schema_name=EXTRACTION_SCHEMA_NAME,
            )
            span.set_attribute("mneme.proposed_facts", len(output.facts))

        candidates, removals, unknown_ids = _candidates(output, shown)
        episode, episode_refusal = resolve_episode(output.episode)
        profile_changes, profile_dropped = resolve_profile(
            [ProfileProposalIn(p.key, p.value, p.confidence, p.evidence) for p in output.profile],
            rules,
        )
        texts = [c.text for c in candidates] + ([episode] if episode else [])
        with tracer.start_as_current_span("extraction.embed"):
            vectors = await embed_or_none(self._backfill.embedder, texts)
        candidate_vectors: dict[int, list[float] | None] = {
            c.index: (vectors[position] if vectors is not None else None)
            for position, c in enumerate(candidates)
        }
        episode_vector = vectors[-1] if vectors is not None and episode else None

        async with self._unit(tenant_id, EXTRACTOR_ACTOR, org_writes=org_writes) as unit:
            await unit.memories.lock_derived_writes(Owner.user(user_id))
            if org_writes and any(c.scope == "org" for c in candidates):
                await unit.memories.lock_derived_writes(Owner.org())
            if await self._cursor_moved(unit, thread_id, after):
                return PassOutcome("superseded", after + 1, window[-1].seq)
            known = await self._known(
                unit.memories, user_id, candidates, candidate_vectors, removals, org_writes, rules
            )
            resolution = resolve(candidates, removals, known, rules)
            with tracer.start_as_current_span("extraction.apply"):
                applied = await self._apply(
                    unit, user_id, thread_id, window, resolution, known, candidate_vectors, trigger
                )
                if episode:
                    episode_written = await unit.memories.record_derived(
                        [self._episode(user_id, thread_id, window, episode, episode_vector)]
                    )
                    applied.written.extend(m.id for m in episode_written if not m.duplicate)
                profile_keys = await self._apply_profile(unit, user_id, profile_changes)
            dropped = resolution.drop_counts()
            for drop in profile_dropped:
                dropped[drop.reason] = dropped.get(drop.reason, 0) + 1
            if len(profile_keys) < len(profile_changes):
                dropped["profile:refused"] = len(profile_changes) - len(profile_keys)
            if episode_refusal:
                dropped[f"episode:{episode_refusal}"] = 1
            if unknown_ids:
                dropped["unknown_id"] = unknown_ids
            result = PassOutcome(
                status="written",
                from_seq=after + 1,
                through_seq=window[-1].seq,
                written=applied.written,
                superseded=applied.superseded,
                reconfirmed=applied.reconfirmed,
                removed=applied.removed,
                profile_keys=profile_keys,
                dropped=dropped,
            )
            await unit.repository.record(
                PASS_ACTION,
                EXTRACTOR_ACTOR,
                thread_id,
                _pass_detail(
                    result,
                    user_id=user_id,
                    mode="llm",
                    trigger=trigger,
                    model=self._chat_model.model_name,
                    org_writes=org_writes,
                ),
            )
        logger.info(
            "extraction pass on thread %s (messages %d-%d, %s): %d written, %d superseded, "
            "%d re-confirmed, %d removed, dropped %s",
            thread_id,
            result.from_seq,
            result.through_seq,
            trigger,
            len(result.written),
            result.superseded,
            result.reconfirmed,
            result.removed,
            result.dropped,
        )
        return result

    async def _current_facts(
        self, memories: MemoryService, user_id: str, query: str
    ) -> list[ShownFact]:
        """The user's (and the org's) live facts most relevant to the window, by hybrid
        search, under pass-local ids."""
        limit = self._settings.extraction_context_facts
        if limit == 0:
            return []
        found = await memories.search(
            user_id,
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
        memories: MemoryService,
        user_id: str,
        candidates: Sequence[Candidate],
        vectors: Mapping[int, list[float] | None],
        removals: Sequence[uuid.UUID],
        org_writes: bool,
        rules: ResolverRules,
    ) -> Known:
        """The live facts the candidates and removals may touch, read under the write lock:
        per candidate its owner's nearest neighbours, facts of its category (when the category
        replaces or merges) and an exact duplicate, with cosines; plus every referenced id."""
        facts: dict[uuid.UUID, KnownFact] = {}
        cosine: dict[tuple[int, uuid.UUID], float] = {}
        for candidate in candidates:
            if candidate.scope == "org" and not org_writes:
                continue
            owner = Owner.user(user_id) if candidate.scope == "user" else Owner.org()
            mode = rules.category_modes.get(candidate.category, "accumulate")
            related = await memories.related(
                owner,
                "semantic",
                text_value=candidate.text,
                vector=vectors.get(candidate.index),
                categories=[candidate.category] if mode != "accumulate" else [],
            )
            for item in related:
                facts[item.memory.id] = _known_fact(item.memory)
                if item.cosine is not None:
                    cosine[(candidate.index, item.memory.id)] = item.cosine
        referenced = {fid for c in candidates for fid in c.supersedes} | set(removals)
        now = datetime.now(UTC)
        for memory in (await memories.by_ids(sorted(referenced - facts.keys()))).values():
            live = memory.lifecycle != "superseded" and (
                memory.expires_at is None or memory.expires_at > now
            )
            if live and memory.kind == "semantic":
                facts[memory.id] = _known_fact(memory)
        return Known(user_id=user_id, org_writes=org_writes, facts=facts, cosine=cosine)

    async def _apply(
        self,
        unit: _Unit,
        user_id: str,
        thread_id: uuid.UUID,
        window: Sequence[Message],
        resolution: Resolution,
        known: Known,
        vectors: Mapping[int, list[float] | None],
        trigger: str,
    ) -> _Applied:
        """Write the resolution through the memory service: new facts (with provenance), then
        the facts they supersede, re-confirmations and removals (each with history)."""
        assert self._chat_model is not None
        applied = _Applied()
        for new_fact in resolution.new_facts:
            candidate = new_fact.candidate
            owner = Owner.user(user_id) if candidate.scope == "user" else Owner.org()
            metadata: dict[str, Any] = {
                "origin": "extraction",
                "extractor_model": self._chat_model.model_name,
                "subject": candidate.subject,
                "trigger": trigger,
            }
            if new_fact.proposed_supersedes:
                metadata["proposed_supersedes"] = [str(i) for i in new_fact.proposed_supersedes]
            item = MemoryCreate(
                kind="semantic",
                text=candidate.text,
                scope=candidate.scope,
                category=candidate.category,
                confidence=candidate.confidence,
                lifecycle=new_fact.lifecycle,
                needs_review=new_fact.needs_review,
                source_thread_id=thread_id,
                source_message_ids=evidence_message_ids(candidate.evidence, window),
                evidence=candidate.evidence or None,
                metadata=metadata,
            )
            [memory] = await unit.memories.record_derived(
                [DerivedMemory(owner, item, vectors.get(candidate.index), "extraction")]
            )
            if not memory.duplicate:
                applied.written.append(memory.id)
            for supersession in new_fact.supersedes:
                if supersession.fact_id == memory.id:
                    continue
                fact = known.facts[supersession.fact_id]
                if await unit.memories.supersede(
                    _owner_of(fact), fact.id, by=memory, reason=supersession.reason
                ):
                    applied.superseded += 1
        for reconfirmation in resolution.reconfirmations:
            fact = known.facts[reconfirmation.fact_id]
            if await unit.memories.reconfirm(
                _owner_of(fact),
                fact.id,
                promote=reconfirmation.promote,
                confidence=reconfirmation.confidence,
            ):
                applied.reconfirmed += 1
        for fact_id in resolution.removals:
            fact = known.facts[fact_id]
            if await unit.memories.supersede(_owner_of(fact), fact.id, by=None, reason="removed"):
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
        assert self._chat_model is not None
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
        self, unit: _Unit, user_id: str, changes: Sequence[ProfileChange]
    ) -> list[str]:
        """Set each attribute on the user's profile through the profile service (its size
        limit and credential rules apply; audit-logged); one refused key skips only itself."""
        applied: list[str] = []
        for change in changes:
            try:
                operation = PatchAdd.model_validate(
                    {"op": "add", "path": f"/{change.key}", "value": change.value}
                )
            except ValidationError:
                continue
            try:
                async with unit.session.begin_nested():
                    result = await unit.profiles.patch(user_id, [operation], None)
            except DomainError as exc:
                logger.info("profile attribute %r not set: %s", change.key, exc.code)
                continue
            if result.body.changed:
                applied.append(change.key)
        return applied

    # --- turn storage without an LLM --------------------------------------------------------

    async def store_turns(self, tenant_id: str, thread_id: uuid.UUID) -> list[PassOutcome]:
        """Store each new human message of the thread as an episodic `turn` memory."""
        outcomes: list[PassOutcome] = []
        for _ in range(MAX_ROUNDS):
            state = await self._read(tenant_id, thread_id)
            if state is None or not state.pending:
                return outcomes
            turns = [m for m in state.pending if m.role == HUMAN_ROLE and m.content.strip()]
            # A turn that looks like a secret is not stored (the same rule as API writes).
            storable = [m for m in turns if refusal(m.content.strip()[:MEMORY_TEXT_MAX]) is None]
            texts = [m.content.strip()[:MEMORY_TEXT_MAX] for m in storable]
            vectors = await embed_or_none(self._backfill.embedder, texts)
            async with self._unit(tenant_id, TURNS_ACTOR, org_writes=False) as unit:
                await unit.memories.lock_derived_writes(Owner.user(state.user_id))
                if await self._cursor_moved(unit, thread_id, state.after):
                    outcomes.append(
                        PassOutcome("superseded", state.after + 1, state.pending[-1].seq)
                    )
                    continue
                written = await unit.memories.record_derived(
                    [
                        self._turn(state.user_id, thread_id, message, text, vector)
                        for message, text, vector in zip(
                            storable,
                            texts,
                            vectors if vectors is not None else [None] * len(texts),
                            strict=True,
                        )
                    ]
                )
                outcome = PassOutcome(
                    "written",
                    state.after + 1,
                    state.pending[-1].seq,
                    written=[m.id for m in written if not m.duplicate],
                    reconfirmed=sum(m.duplicate for m in written),
                    dropped={"secret": len(turns) - len(storable)}
                    if len(storable) < len(turns)
                    else {},
                )
                await unit.repository.record(
                    PASS_ACTION,
                    TURNS_ACTOR,
                    thread_id,
                    _pass_detail(
                        outcome,
                        user_id=state.user_id,
                        mode="turns",
                        trigger="turn",
                        model=None,
                        org_writes=False,
                    ),
                )
            outcomes.append(outcome)
            if not state.truncated:
                return outcomes
        return outcomes

    @staticmethod
    def _turn(
        user_id: str,
        thread_id: uuid.UUID,
        message: Message,
        text: str,
        vector: list[float] | None,
    ) -> DerivedMemory:
        return DerivedMemory(
            Owner.user(user_id),
            MemoryCreate(
                kind="episodic",
                text=text,
                category=TURN_CATEGORY,
                event_at=message.created_at,
                source_thread_id=thread_id,
                source_message_ids=[message.id],
                metadata={"origin": "turn", "seq": message.seq},
            ),
            vector,
            "turn",
        )


def evidence_message_ids(evidence: str, window: Sequence[Message]) -> list[uuid.UUID]:
    """The human messages of the window that contain the evidence quote (whitespace and case
    aside); all of the window's human messages when none does."""
    humans = [m for m in window if m.role == HUMAN_ROLE]
    quote = normalise_text(evidence)
    quoted = [m.id for m in humans if quote and quote in normalise_text(m.content)]
    return (quoted or [m.id for m in humans])[:SOURCE_IDS_MAX]


def _candidates(
    output: ExtractionOutput, shown: Sequence[ShownFact]
) -> tuple[list[Candidate], list[uuid.UUID], int]:
    """The proposal with pass-local ids resolved; ids the model made up are counted, not used."""
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

    candidates = [
        Candidate(
            index=index,
            text=fact.text.strip(),
            category=fact.category,
            subject=normalise_subject(fact.subject),
            scope=fact.scope,
            confidence=fact.confidence,
            evidence=fact.evidence.strip()[:EVIDENCE_MAX],
            supersedes=tuple(resolved(fact.supersedes)),
        )
        for index, fact in enumerate(output.facts)
    ]
    return candidates, resolved(output.remove), unknown


def _known_fact(memory: Memory) -> KnownFact:
    return KnownFact(
        id=memory.id,
        scope=memory.scope,
        user_id=memory.user_id,
        category=memory.category,
        subject=_subject_of(memory.metadata_),
        text=memory.text,
        lifecycle=memory.lifecycle,
    )


def _subject_of(metadata: Mapping[str, Any] | None) -> str | None:
    subject = (metadata or {}).get("subject")
    return normalise_subject(subject) if isinstance(subject, str) else None


def _owner_of(fact: KnownFact) -> Owner:
    return Owner.org() if fact.scope == "org" or fact.user_id is None else Owner.user(fact.user_id)


def _pass_detail(
    outcome: PassOutcome,
    *,
    user_id: str,
    mode: str,
    trigger: str,
    model: str | None,
    org_writes: bool,
) -> dict[str, Any]:
    """The audit entry of a finished pass: the cursor, and counts and ids, never text."""
    return {
        "user_id": user_id,
        "mode": mode,
        "trigger": trigger,
        "model": model,
        "org_writes": org_writes,
        "from_seq": outcome.from_seq,
        "through_seq": outcome.through_seq,
        "written": [str(i) for i in outcome.written],
        "superseded": outcome.superseded,
        "reconfirmed": outcome.reconfirmed,
        "removed": outcome.removed,
        "profile_keys": outcome.profile_keys,
        "dropped": outcome.dropped,
    }


def memory_extraction_job(write_path: WritePath) -> JobHandler:
    """The handler of `MEMORY_EXTRACTION_JOB`; a model failure raises, so the job is retried
    with backoff (and the next append's pass reads the same turns anyway)."""

    async def handle(payload: Mapping[str, str]) -> None:
        await write_path.extract(
            payload["tenant_id"],
            uuid.UUID(payload["thread_id"]),
            org_writes=payload.get("org_writes") == "true",
        )

    return handle


def turn_memories_job(write_path: WritePath) -> JobHandler:
    """The handler of `TURN_MEMORIES_JOB`."""

    async def handle(payload: Mapping[str, str]) -> None:
        await write_path.store_turns(payload["tenant_id"], uuid.UUID(payload["thread_id"]))

    return handle
