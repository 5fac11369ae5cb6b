"""Memory use cases: remember, list, change, forget, search, and procedural slots."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
from opentelemetry import trace

from service.accounts.service import AccountService
from service.auth.principal import Principal
from service.config import Settings
from service.errors import ValidationFailed
from service.kit.pagination import Page, decode_newest_first_cursor, newest_first_cursor
from service.kit.post_commit import PostCommitTasks
from service.memories.embedding import EmbeddingBackfill, embed_or_none
from service.memories.errors import (
    DuplicateMemory,
    MemoryNotFound,
    OrgMemoryWriteForbidden,
    SecretRefused,
)
from service.memories.models import Memory, MemoryEvent
from service.memories.repository import MemoryRepository, Owner, SearchParams, SearchRow
from service.memories.schemas import (
    ComponentScores,
    MemoryCreate,
    MemoryEventRead,
    MemoryFilter,
    MemoryHistory,
    MemoryRead,
    MemoryUpdate,
    MemoryWritten,
    Procedures,
    ProcedureSlotRead,
    ProceduresUpdate,
    SearchHit,
    SearchRequest,
    SearchResponse,
)
from service.memories.validation import find_secret
from service.observability import fusion_statement, record_search_hits, search_stage, traced, tracer
from service.providers import EmbedderUnavailable

PROCEDURE_SLOTS = ("style", "workflow", "safety", "task_policies")
# MMR re-ranks a deeper candidate list than it returns.
MMR_CANDIDATE_FACTOR = 3


@dataclass(frozen=True)
class OwnedCreate:
    owner: Owner
    item: MemoryCreate


@dataclass(frozen=True)
class DerivedMemory:
    """A memory the write path derived (extraction, turn storage, compaction), with its vector
    when one was computed already and the origin its history event records."""

    owner: Owner
    item: MemoryCreate
    vector: list[float] | None
    origin: str


@dataclass(frozen=True)
class RelatedMemory:
    """A live memory a new one is reconciled with, and its cosine to the new one's vector."""

    memory: Memory
    cosine: float | None


class MemoryService:
    def __init__(
        self,
        repository: MemoryRepository,
        accounts: AccountService,
        backfill: EmbeddingBackfill,
        post_commit: PostCommitTasks,
        settings: Settings,
        principal: Principal,
    ) -> None:
        self._repository = repository
        self._accounts = accounts
        self._backfill = backfill
        self._embedder = backfill.embedder
        self._post_commit = post_commit
        self._settings = settings
        self._principal = principal

    # --- writing ----------------------------------------------------------------------------

    def owner_for(self, user_id: str | None) -> Owner:
        return Owner.org() if user_id is None else Owner.user(user_id)

    def _require_org_writer(self) -> None:
        if not self._principal.is_admin:
            raise OrgMemoryWriteForbidden(
                "Only admins (by their token's roles) may write organization memory."
            )

    async def create(self, user_id: str | None, items: list[MemoryCreate]) -> list[MemoryWritten]:
        """Store memories all-or-nothing; exact duplicates return the existing memory.

        `user_id` None means the org route: every item is org-scoped there.
        """
        owned = [
            OwnedCreate(
                Owner.org() if user_id is None or item.scope == "org" else Owner.user(user_id),
                item,
            )
            for item in items
        ]
        self._validate_new(owned)
        if any(entry.owner.scope == "org" for entry in owned):
            self._require_org_writer()
        if user_id is not None:
            await self._accounts.ensure_user(user_id)
        else:
            await self._accounts.ensure_tenant()

        with tracer.start_as_current_span("memories.embed") as span:
            vectors = await embed_or_none(self._embedder, [entry.item.text for entry in owned])
            span.set_attribute("mneme.embedded", vectors is not None)

        written: list[MemoryWritten] = []
        events: list[MemoryEvent] = []
        unembedded: list[uuid.UUID] = []
        for index, entry in enumerate(owned):
            vector = vectors[index] if vectors is not None else None
            memory = await self._repository.insert_unless_duplicate(
                self._insert_values(entry, vector)
            )
            if memory is None:
                existing = await self._repository.find_live_duplicate(
                    entry.owner, entry.item.kind, entry.item.text
                )
                if existing is None:  # the duplicate was superseded concurrently: try again
                    raise DuplicateMemory("A concurrent change collided with this write; retry.")
                written.append(self._written(existing, duplicate=True))
                continue
            events.append(self._event(memory, "add", old_text=None, new_text=memory.text))
            if vector is None:
                unembedded.append(memory.id)
            written.append(self._written(memory, duplicate=False))
        await self._repository.add_events(events)
        self._schedule_backfill(unembedded)
        return written

    def _validate_new(self, owned: list[OwnedCreate]) -> None:
        for index, entry in enumerate(owned):
            for field, value in (("text", entry.item.text), ("evidence", entry.item.evidence)):
                self._refuse_secrets(value, ["body", "items", index, field])
            if entry.item.expires_at is not None and entry.item.expires_at <= datetime.now(UTC):
                raise ValidationFailed(
                    "expires_at must be in the future.",
                    errors=[
                        {
                            "loc": ["body", "items", index, "expires_at"],
                            "msg": "in the past",
                            "type": "value_error",
                        }
                    ],
                )

    @staticmethod
    def _refuse_secrets(value: str | None, location: list[str | int]) -> None:
        if not value:
            return
        rule = find_secret(value)
        if rule is not None:
            raise SecretRefused(
                f"Refusing to remember what looks like a {rule.description} ({location[-1]}).",
                rule=rule.name,
                errors=[{"loc": location, "msg": f"matches rule {rule.name}", "type": rule.name}],
            )

    def _insert_values(self, entry: OwnedCreate, vector: list[float] | None) -> dict[str, Any]:
        item = entry.item
        return {
            "scope": entry.owner.scope,
            "user_id": entry.owner.user_id,
            "kind": item.kind,
            "category": item.category,
            "text": item.text,
            "confidence": item.confidence,
            "lifecycle": item.lifecycle,
            "needs_review": item.needs_review,
            "event_at": item.event_at,
            "source_thread_id": item.source_thread_id,
            "source_message_ids": item.source_message_ids,
            "evidence": item.evidence,
            "metadata_": item.metadata,
            "expires_at": item.expires_at,
            "embedding": vector,
            "embedding_model": self._embedder.model_name if vector is not None else None,
        }

    def _schedule_backfill(self, memory_ids: list[uuid.UUID]) -> None:
        if not memory_ids:
            return
        tenant_id = self._principal.tenant_id
        backfill = self._backfill

        async def retry() -> None:
            await backfill.retry(tenant_id, memory_ids)

        self._post_commit.add(retry)

    def _event(
        self,
        memory: Memory,
        action: str,
        *,
        old_text: str | None,
        new_text: str | None,
        changes: dict[str, Any] | None = None,
    ) -> MemoryEvent:
        return MemoryEvent(
            tenant_id=memory.tenant_id,
            memory_id=memory.id,
            user_id=memory.user_id,
            action=action,
            old_text=old_text,
            new_text=new_text,
            changes=changes or {},
            actor=self._principal.subject,
        )

    @staticmethod
    def _written(memory: Memory, *, duplicate: bool) -> MemoryWritten:
        return MemoryWritten(**MemoryRead.model_validate(memory).model_dump(), duplicate=duplicate)

    # --- reading ----------------------------------------------------------------------------

    async def get(self, user_id: str | None, memory_id: uuid.UUID) -> MemoryRead:
        return MemoryRead.model_validate(await self._load(self.owner_for(user_id), memory_id))

    async def _load(
        self, owner: Owner, memory_id: uuid.UUID, *, for_update: bool = False
    ) -> Memory:
        memory = await self._repository.get(owner, memory_id, for_update=for_update)
        if memory is None:
            raise MemoryNotFound(f"No memory {memory_id} here.")
        return memory

    async def list_page(
        self, user_id: str | None, filters: MemoryFilter, *, cursor: str | None, limit: int
    ) -> Page[MemoryRead]:
        after = decode_newest_first_cursor(cursor)
        owners = [self.owner_for(user_id)]
        if user_id is not None and filters.scopes:
            # On a user's listing, `scope` may add (or choose) the org-shared memories.
            owners = [Owner.user(user_id) if s == "user" else Owner.org() for s in filters.scopes]
        rows = await self._repository.list_page(
            owners,
            kinds=filters.kinds,
            categories=filters.categories,
            lifecycles=filters.lifecycles or ["proposed", "confirmed"],
            created_after=filters.created_after,
            created_before=filters.created_before,
            event_after=filters.event_after,
            event_before=filters.event_before,
            after=after,
            limit=limit + 1,
        )
        return Page[MemoryRead](
            items=[MemoryRead.model_validate(row) for row in rows[:limit]],
            next_cursor=newest_first_cursor(rows, limit),
        )

    async def history(self, user_id: str | None, memory_id: uuid.UUID) -> MemoryHistory:
        events = await self._repository.history(self.owner_for(user_id), memory_id)
        if not events:
            raise MemoryNotFound(f"No memory {memory_id} here.")
        return MemoryHistory(items=[MemoryEventRead.model_validate(event) for event in events])

    # --- changing and forgetting -------------------------------------------------------------

    async def update(
        self, user_id: str | None, memory_id: uuid.UUID, change: MemoryUpdate
    ) -> MemoryRead:
        if user_id is None:
            self._require_org_writer()
        owner = self.owner_for(user_id)
        memory = await self._load(owner, memory_id, for_update=True)
        values: dict[str, Any] = change.model_dump(exclude_unset=True, exclude={"metadata"})
        if "metadata" in change.model_fields_set:
            values["metadata_"] = change.metadata or {}
        if change.expires_at is not None and change.expires_at <= datetime.now(UTC):
            raise ValidationFailed("expires_at must be in the future.")
        for field in ("text", "lifecycle", "confidence", "needs_review"):
            if field in values and values[field] is None:
                raise ValidationFailed(f"{field} cannot be null.")

        old_text = memory.text
        new_text = values.get("text")
        if new_text is not None:
            new_text = new_text.strip()
            values["text"] = new_text
            self._refuse_secrets(new_text, ["body", "text"])
            if new_text != old_text:
                duplicate = await self._repository.find_live_duplicate(owner, memory.kind, new_text)
                if duplicate is not None and duplicate.id != memory.id:
                    raise DuplicateMemory(
                        "Another memory already says exactly this.", existing_id=str(duplicate.id)
                    )
                vectors = await embed_or_none(self._embedder, [new_text])
                values["embedding"] = vectors[0] if vectors else None
                values["embedding_model"] = self._embedder.model_name if vectors else None
        if values.get("lifecycle") == "confirmed":
            values.setdefault("needs_review", False)
            values["last_confirmed_at"] = datetime.now(UTC)
        if values.get("lifecycle") == "superseded":
            values.setdefault("invalid_at", datetime.now(UTC))

        changes = {
            key: _jsonable(value)
            for key, value in values.items()
            if key not in {"embedding", "embedding_model", "text", "last_confirmed_at"}
        }
        updated = await self._repository.update(memory.id, values)
        action = "supersede" if values.get("lifecycle") == "superseded" else "update"
        await self._repository.add_events(
            [
                self._event(
                    updated, action, old_text=old_text, new_text=updated.text, changes=changes
                )
            ]
        )
        if new_text is not None and updated.embedding_model is None:
            self._schedule_backfill([updated.id])
        return MemoryRead.model_validate(updated)

    async def delete(self, user_id: str | None, memory_id: uuid.UUID) -> None:
        if user_id is None:
            self._require_org_writer()
        memory = await self._load(self.owner_for(user_id), memory_id, for_update=True)
        await self._forget([memory])

    async def delete_matching(
        self, user_id: str | None, filters: MemoryFilter, *, everything: bool
    ) -> int:
        if user_id is None:
            self._require_org_writer()
        if user_id is not None and filters.scopes and set(filters.scopes) != {"user"}:
            raise ValidationFailed(
                "Org memories are deleted through /v1/org/memories, not a user's route.",
                errors=[{"loc": ["query", "scope"], "msg": "only `user` here", "type": "value"}],
            )
        unfiltered = not any(
            (
                filters.kinds,
                filters.categories,
                filters.lifecycles,
                filters.created_after,
                filters.created_before,
            )
        )
        if unfiltered and not everything:
            raise ValidationFailed(
                "Give at least one filter, or all=true to forget every memory here.",
                errors=[{"loc": ["query"], "msg": "no filter given", "type": "missing"}],
            )
        memories = await self._repository.matching_for_delete(
            self.owner_for(user_id),
            kinds=filters.kinds,
            categories=filters.categories,
            lifecycles=filters.lifecycles,
            created_after=filters.created_after,
            created_before=filters.created_before,
        )
        await self._forget(memories)
        return len(memories)

    async def forget_thread(self, user_id: str, thread_id: uuid.UUID) -> int:
        """Forget the user's memories that came from this thread (with history)."""
        memories = await self._repository.from_thread(Owner.user(user_id), thread_id)
        await self._forget(memories)
        return len(memories)

    async def _forget(self, memories: list[Memory]) -> None:
        await self._repository.add_events(
            [self._event(m, "delete", old_text=m.text, new_text=None) for m in memories]
        )
        await self._repository.delete_many([m.id for m in memories])

    # --- derived writes: the write path reconciles, then calls these -----------------------

    async def lock_derived_writes(self, owner: Owner) -> None:
        """Serialise derived writes to the owner's memories until the transaction ends."""
        await self._repository.lock_writers(owner)

    async def related(
        self,
        owner: Owner,
        kind: str,
        *,
        text_value: str,
        vector: list[float] | None,
        categories: list[str],
        nearest: int = 5,
    ) -> list[RelatedMemory]:
        """The owner's live memories a new memory with this text and vector must be reconciled
        with: nearest neighbours, those of `categories` and an exact duplicate."""
        rows = await self._repository.related_live(
            owner,
            kind,
            text_value=text_value,
            vector=vector,
            categories=categories,
            nearest=nearest,
        )
        return [RelatedMemory(memory, cosine) for memory, cosine in rows]

    async def live_memories(self, owner: Owner, kind: str, *, limit: int) -> list[Memory]:
        """The owner's live memories of `kind`, oldest first (compaction's input)."""
        return await self._repository.live_owned(owner, kind, limit=limit)

    async def by_ids(self, memory_ids: list[uuid.UUID]) -> dict[uuid.UUID, Memory]:
        """Memories of this tenant by id as stored now, whoever owns them: callers check
        ownership."""
        return await self._repository.reload_many(memory_ids) if memory_ids else {}

    async def record_derived(self, items: list[DerivedMemory]) -> list[MemoryWritten]:
        """Store derived memories one by one (with `add` events naming their origin).

        A confirmed one is stamped `last_confirmed_at`. An identical live memory is not stored
        again: it is re-confirmed and returned with `duplicate: true`. Org-scoped items need an
        admin principal, and secrets are refused, exactly as for API writes.
        """
        owned = [OwnedCreate(entry.owner, entry.item) for entry in items]
        self._validate_new(owned)
        if any(entry.owner.scope == "org" for entry in owned):
            self._require_org_writer()
            await self._accounts.ensure_tenant()
        for user_id in sorted({e.owner.user_id for e in owned if e.owner.user_id is not None}):
            await self._accounts.ensure_user(user_id)
        now = datetime.now(UTC)
        written: list[MemoryWritten] = []
        unembedded: list[uuid.UUID] = []
        for entry, owned_entry in zip(items, owned, strict=True):
            values = self._insert_values(owned_entry, entry.vector)
            if entry.item.lifecycle == "confirmed":
                values["last_confirmed_at"] = now
            memory = await self._repository.insert_unless_duplicate(values)
            if memory is None:
                existing = await self._repository.find_live_duplicate(
                    entry.owner, entry.item.kind, entry.item.text
                )
                if existing is None:
                    raise DuplicateMemory("A concurrent change collided with this write; retry.")
                existing = await self._repository.update(existing.id, {"last_confirmed_at": now})
                written.append(self._written(existing, duplicate=True))
                continue
            await self._repository.add_events(
                [
                    self._event(
                        memory,
                        "add",
                        old_text=None,
                        new_text=memory.text,
                        changes={"origin": entry.origin},
                    )
                ]
            )
            if entry.vector is None:
                unembedded.append(memory.id)
            written.append(self._written(memory, duplicate=False))
        self._schedule_backfill(unembedded)
        return written

    async def supersede(
        self,
        owner: Owner,
        memory_id: uuid.UUID,
        *,
        by: MemoryRead | None,
        reason: str,
    ) -> bool:
        """Mark a live memory superseded (by `by`, or by nothing when it was removed): it stops
        being true now (`invalid_at`), stays readable, and the history records why. False when
        it is not a live memory of `owner`. Never deletes."""
        if owner.scope == "org":
            self._require_org_writer()
        memory = await self._repository.get(owner, memory_id, for_update=True)
        if memory is None or memory.lifecycle == "superseded":
            return False
        old_text = memory.text
        invalid_at = datetime.now(UTC)
        updated = await self._repository.update(
            memory.id,
            {
                "lifecycle": "superseded",
                "superseded_by": by.id if by is not None else None,
                "invalid_at": invalid_at,
                "needs_review": False,
            },
        )
        await self._repository.add_events(
            [
                self._event(
                    updated,
                    "supersede",
                    old_text=old_text,
                    new_text=by.text if by is not None else None,
                    changes={
                        "lifecycle": "superseded",
                        "superseded_by": str(by.id) if by is not None else None,
                        "invalid_at": invalid_at.isoformat(),
                        "reason": reason,
                    },
                )
            ]
        )
        return True

    async def reconfirm(
        self, owner: Owner, memory_id: uuid.UUID, *, promote: bool, confidence: float
    ) -> bool:
        """The memory was said again: refresh `last_confirmed_at`; with `promote`, a proposed
        memory becomes confirmed (its confidence raised to `confidence` if that is higher), with
        an `update` event. False when it is not a live memory of `owner`."""
        if owner.scope == "org":
            self._require_org_writer()
        memory = await self._repository.get(owner, memory_id, for_update=True)
        if memory is None or memory.lifecycle == "superseded":
            return False
        values: dict[str, Any] = {"last_confirmed_at": datetime.now(UTC)}
        promoted = promote and memory.lifecycle == "proposed"
        if promoted:
            values.update(
                lifecycle="confirmed",
                needs_review=False,
                confidence=max(memory.confidence, confidence),
            )
        updated = await self._repository.update(memory.id, values)
        if promoted:
            changes = {key: _jsonable(value) for key, value in values.items()}
            changes["reason"] = "reconfirmed"
            await self._repository.add_events(
                [
                    self._event(
                        updated,
                        "update",
                        old_text=updated.text,
                        new_text=updated.text,
                        changes=changes,
                    )
                ]
            )
        return True

    # --- procedural slots --------------------------------------------------------------------

    async def procedures(self, user_id: str | None) -> Procedures:
        slots: dict[str, ProcedureSlotRead] = {}
        for memory in await self._repository.live_procedures(self.owner_for(user_id)):
            if memory.category in PROCEDURE_SLOTS:
                slots[memory.category] = ProcedureSlotRead(
                    text=memory.text, memory_id=memory.id, updated_at=memory.updated_at
                )
        return Procedures.model_validate(slots)

    async def set_procedures(self, user_id: str | None, change: ProceduresUpdate) -> Procedures:
        """Replace the given slots: the old instruction is superseded, never silently lost."""
        if user_id is None:
            self._require_org_writer()
        owner = self.owner_for(user_id)
        requested = change.model_dump(exclude_unset=True)
        for slot, value in requested.items():
            self._refuse_secrets(value, ["body", slot])
        if user_id is not None:
            await self._accounts.ensure_user(user_id)
        else:
            await self._accounts.ensure_tenant()
        current = {
            m.category: m
            for m in await self._repository.live_procedures(owner)
            if m.category in PROCEDURE_SLOTS
        }
        for slot, value in requested.items():
            text_value = (value or "").strip()
            previous = current.get(slot)
            if previous is not None and previous.text == text_value:
                continue
            replacement = None
            if previous is not None:
                # Supersede first: the unique index allows one live memory per text.
                await self._repository.update(
                    previous.id,
                    {"lifecycle": "superseded", "invalid_at": datetime.now(UTC)},
                )
            if text_value:
                replacement = await self._create_procedure(owner, slot, text_value)
            if previous is not None:
                if replacement is not None:
                    await self._repository.update(previous.id, {"superseded_by": replacement.id})
                await self._repository.add_events(
                    [
                        self._event(
                            previous,
                            "supersede",
                            old_text=previous.text,
                            new_text=text_value or None,
                            changes={
                                "slot": slot,
                                "superseded_by": str(replacement.id) if replacement else None,
                            },
                        )
                    ]
                )
        return await self.procedures(user_id)

    async def _create_procedure(self, owner: Owner, slot: str, text_value: str) -> Memory:
        vectors = await embed_or_none(self._embedder, [text_value])
        item = MemoryCreate(kind="procedural", text=text_value, category=slot)
        memory = await self._repository.insert_unless_duplicate(
            self._insert_values(OwnedCreate(owner, item), vectors[0] if vectors else None)
        )
        if memory is None:
            existing = await self._repository.find_live_duplicate(owner, "procedural", text_value)
            if existing is None:
                raise DuplicateMemory("A concurrent change collided with this write; retry.")
            # The same words already live as another procedural memory: make it this slot.
            memory = await self._repository.update(existing.id, {"category": slot})
        else:
            await self._repository.add_events(
                [self._event(memory, "add", old_text=None, new_text=text_value)]
            )
            if not vectors:
                self._schedule_backfill([memory.id])
        return memory

    # --- search ------------------------------------------------------------------------------

    async def embed_query(self, query: str) -> list[float] | None:
        """The query's vector, or None when the embedder is down (search goes lexical)."""
        with tracer.start_as_current_span("memories.embed_query"):
            try:
                return await self._embedder.embed_query(query)
            except EmbedderUnavailable:
                return None

    @traced("memories.search")
    async def search(
        self,
        user_id: str,
        request: SearchRequest,
        *,
        query_embedding: list[float] | None = None,
    ) -> SearchResponse:
        """Hybrid search; pass `query_embedding` to reuse one embedding across searches."""
        settings = self._settings
        if request.mode != "lexical" and query_embedding is None:
            query_embedding = await self.embed_query(request.query)
        use_vector = request.mode != "lexical" and query_embedding is not None
        use_lexical = request.mode != "vector" or query_embedding is None
        with_mmr = request.mmr_lambda is not None and use_vector
        fetch = min(request.limit * MMR_CANDIDATE_FACTOR, 300) if with_mmr else request.limit
        params = SearchParams(
            user_id=user_id,
            include_user="user" in request.scopes,
            include_org="org" in request.scopes,
            query=request.query,
            query_embedding=query_embedding,
            kinds=list(request.kinds) if request.kinds else None,
            categories=request.categories or None,
            lifecycles=list(request.lifecycles),
            event_after=request.event_after,
            event_before=request.event_before,
            use_lexical=use_lexical,
            use_vector=use_vector,
            pool=max(settings.search_candidate_pool, fetch),
            limit=fetch,
            fusion=request.fusion,
            rrf_k=request.rrf_k or settings.search_rrf_k,
            lexical_weight=_pick(
                request.linear_lexical_weight, settings.search_linear_lexical_weight
            ),
            recency_weight=_pick(request.recency_weight, settings.search_recency_weight),
            confidence_weight=_pick(request.confidence_weight, settings.search_confidence_weight),
            half_life_semantic=settings.half_life_semantic_days,
            half_life_episodic=settings.half_life_episodic_days,
            half_life_procedural=settings.half_life_procedural_days,
            with_embeddings=with_mmr,
        )
        with fusion_statement(request.mode) as statement:
            rows = await self._repository.search(params)
            statement.rows(len(rows))
        mmr_scores: dict[uuid.UUID, float] = {}
        if with_mmr and query_embedding is not None and request.mmr_lambda is not None:
            with search_stage("mmr", request.mode):
                rows, mmr_scores = maximal_marginal_relevance(
                    rows, query_embedding, request.mmr_lambda, request.limit
                )
        memories = await self._repository.get_many([row.id for row in rows])
        hits = [
            SearchHit(
                memory=MemoryRead.model_validate(memories[row.id]),
                scores=ComponentScores(
                    lexical_rank=row.lexical_rank,
                    lexical_score=row.lexical_score,
                    vector_rank=row.vector_rank,
                    vector_cosine=row.vector_cosine,
                    fused_score=row.fused_score,
                    recency_factor=row.recency_factor,
                    confidence_factor=row.confidence_factor,
                    final_score=row.final_score,
                    mmr_score=mmr_scores.get(row.id),
                ),
            )
            for row in rows
            if row.id in memories
        ]
        record_search_hits(trace.get_current_span(), hits, mode=request.mode)
        return SearchResponse(
            hits=hits,
            mode=request.mode,
            fusion=request.fusion,
            query_embedded=query_embedding is not None,
        )


def maximal_marginal_relevance(
    rows: list[SearchRow], query: list[float], lambda_: float, limit: int
) -> tuple[list[SearchRow], dict[uuid.UUID, float]]:
    """Greedy MMR: relevance (cosine to the query) against redundancy (max cosine to picks).

    Candidates without a vector have no measurable redundancy and keep their fused order.
    """
    if not rows:
        return [], {}
    query_vector = np.asarray(query, dtype=np.float32)
    vectors = [
        None if row.embedding is None else np.asarray(row.embedding, dtype=np.float32)
        for row in rows
    ]
    relevance = [
        float(vector @ query_vector) if vector is not None else (row.vector_cosine or 0.0)
        for row, vector in zip(rows, vectors, strict=True)
    ]
    chosen: list[int] = []
    scores: dict[uuid.UUID, float] = {}
    remaining = list(range(len(rows)))
    while remaining and len(chosen) < limit:
        best_index, best_score = remaining[0], float("-inf")
        for index in remaining:
            vector = vectors[index]
            redundancy = 0.0
            if vector is not None:
                similarities = [
                    float(vector @ chosen_vector)
                    for chosen_vector in (vectors[c] for c in chosen)
                    if chosen_vector is not None
                ]
                redundancy = max(similarities, default=0.0)
            score = lambda_ * relevance[index] - (1 - lambda_) * redundancy
            if score > best_score:
                best_index, best_score = index, score
        chosen.append(best_index)
        remaining.remove(best_index)
        scores[rows[best_index].id] = best_score
    return [rows[index] for index in chosen], scores


def _pick(value: float | None, default: float) -> float:
    return default if value is None else value


def _jsonable(value: object) -> object:
    if isinstance(value, datetime | uuid.UUID):
        return str(value)
    return value
