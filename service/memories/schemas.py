"""Request and response models of the memories API."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal, cast

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
)
from pydantic.config import JsonDict

from service.kit.types import (
    JsonBool,
    JsonInt,
    JsonObject,
    QueryText,
    SpeakerName,
    Timestamp,
    UnitInterval,
    has_visible_character,
    stripped_visible,
)

MemoryKind = Literal["semantic", "episodic", "procedural"]
MemoryScope = Literal["user", "org"]
Lifecycle = Literal["proposed", "confirmed", "superseded"]
NewLifecycle = Literal["proposed", "confirmed"]
"""The lifecycle a new memory may start in; only the service supersedes."""
SearchMode = Literal["hybrid", "lexical", "vector"]
FusionMethod = Literal["rrf", "linear"]
ProcedureSlot = Literal["style", "workflow", "safety", "task_policies"]

MEMORY_TEXT_MAX = 4000
BATCH_MAX = 100
CATEGORY_PATTERN = r"^[a-z][a-z0-9_.-]{0,63}$"
Category = Annotated[str, StringConstraints(pattern=CATEGORY_PATTERN)]
"""A memory's category as it is written: a filter by any other spelling ("Family") could only
select nothing, so it is refused as the write would be."""


def before_after(
    before: datetime | None, after: datetime | None, after_name: str
) -> datetime | None:
    """`before`, refused unless it lies after `after` (the field `after_name`): a span that
    ends where or before it begins selects nothing, which a caller asks for only by mistake."""
    if before is not None and after is not None and before <= after:
        raise ValueError(f"must be later than {after_name}")
    return before


MemoryText = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MEMORY_TEXT_MAX),
    AfterValidator(stripped_visible),
]
"""What a memory says: up to 4000 characters, stored without the whitespace and invisible
characters around it (text of nothing else is refused)."""


Evidence = Annotated[
    str,
    StringConstraints(min_length=1, max_length=2000),
    AfterValidator(stripped_visible),
]
"""What a memory was drawn from, in the source's words: as a memory's text, stored without the
whitespace and invisible characters around it (evidence of nothing else is refused)."""


class MemoryCreate(BaseModel):
    """One memory to remember. Identity and tenant come from the token, never from here."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "kind": "semantic",
                    "text": "Prefers window seats on long flights.",
                    "category": "preference",
                    "metadata": {"source": "onboarding"},
                }
            ]
        },
    )

    kind: MemoryKind = "semantic"
    text: MemoryText
    scope: MemoryScope = Field(
        default="user",
        description="Whose memory it is; left out, the route's own. `user` on a user's route, "
        "`org` on the organization's (/v1/org/memories, admins only): the other is refused "
        "with 422.",
    )
    category: str | None = Field(default=None, pattern=CATEGORY_PATTERN, examples=["preference"])
    confidence: UnitInterval = 1.0
    lifecycle: NewLifecycle = "confirmed"
    needs_review: JsonBool = False
    event_at: Timestamp | None = Field(
        default=None, description="When it happened or became true (record time is automatic)."
    )
    source_thread_id: uuid.UUID | None = None
    source_message_ids: list[uuid.UUID] = Field(default_factory=list, max_length=100)
    evidence: Evidence | None = None
    speaker: SpeakerName | None = Field(
        default=None,
        description="Who said it, for a memory of something said in a conversation (the "
        "participant's name): a search whose query names this speaker ranks their memories "
        "higher.",
        examples=["Ada"],
    )
    metadata: JsonObject = Field(default_factory=dict)
    expires_at: Timestamp | None = None


class MemoryBatchCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "items": [
                        {"text": "Works at Acme as a data engineer.", "category": "work"},
                        {
                            "kind": "episodic",
                            "text": "Moved to Lisbon in October 2026.",
                            "event_at": "2026-10-01T00:00:00Z",
                        },
                    ]
                }
            ]
        },
    )

    items: list[MemoryCreate] = Field(min_length=1, max_length=BATCH_MAX)


def _never_null(schema: JsonDict) -> None:
    """The JSON schema of a field a change may leave out but never set to `null`: its
    value's schema, without the `null` alternative."""
    for option in cast("list[JsonDict]", schema.pop("anyOf")):
        if option != {"type": "null"}:
            schema.update(option)


class MemoryUpdate(BaseModel):
    """Fields to change; absent fields stay as they are. `null` clears a field that may be
    empty (category, event time, speaker, metadata, expiry); a memory always has a text,
    confidence, lifecycle and review flag, so `null` for one of them is refused as any other
    invalid value is (leave the field out to keep it)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"text": "Prefers aisle seats on long flights.", "confidence": 0.9}]
        },
    )

    # None is "absent" (the default), never a value a client sends (`_not_null`).
    text: MemoryText | None = Field(default=None, json_schema_extra=_never_null)
    category: str | None = Field(default=None, pattern=CATEGORY_PATTERN)
    confidence: UnitInterval | None = Field(default=None, json_schema_extra=_never_null)
    lifecycle: Lifecycle | None = Field(default=None, json_schema_extra=_never_null)
    needs_review: JsonBool | None = Field(default=None, json_schema_extra=_never_null)
    event_at: Timestamp | None = None
    speaker: SpeakerName | None = Field(
        default=None,
        description="Who said it; `null` removes a speaker that was wrong.",
        examples=["Ada"],
    )
    metadata: JsonObject | None = None
    expires_at: Timestamp | None = None

    @field_validator("text", "confidence", "lifecycle", "needs_review", mode="before")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("cannot be null; leave the field out to keep its value")
        return value


_MEMORY_EXAMPLE: dict[str, Any] = {
    "id": "3f2c8e0a-5b1d-4c7e-9a44-0d6e2b9f1a77",
    "scope": "user",
    "user_id": "ada",
    "kind": "semantic",
    "category": "preference",
    "text": "Prefers window seats on long flights.",
    "confidence": 0.9,
    "lifecycle": "confirmed",
    "needs_review": False,
    "superseded_by": None,
    "source_thread_id": None,
    "source_message_ids": [],
    "evidence": None,
    "speaker": None,
    "event_at": None,
    "created_at": "2026-11-30T09:12:44Z",
    "updated_at": "2026-11-30T09:12:44Z",
    "last_confirmed_at": "2026-11-30T09:12:44Z",
    "invalid_at": None,
    "expires_at": None,
    "embedding_model": "all-MiniLM-L6-v2-onnx-int8-dynamic",
    "metadata": {"source": "settings page"},
    "store_key": None,
}


class MemoryRead(BaseModel):
    model_config = ConfigDict(
        from_attributes=True, json_schema_extra={"examples": [_MEMORY_EXAMPLE]}
    )

    id: uuid.UUID
    scope: MemoryScope
    user_id: str | None
    kind: MemoryKind
    category: str | None
    text: str
    confidence: float
    lifecycle: Lifecycle
    needs_review: bool
    superseded_by: uuid.UUID | None
    source_thread_id: uuid.UUID | None
    source_message_ids: list[uuid.UUID]
    evidence: str | None
    speaker: str | None = Field(
        default=None, description="Who said it (a conversation participant's name), if known."
    )
    event_at: datetime | None
    created_at: datetime
    updated_at: datetime
    last_confirmed_at: datetime | None = Field(
        description="When the write path last heard this memory stated again (or first wrote "
        "it confirmed); null if never."
    )
    invalid_at: datetime | None
    expires_at: datetime | None
    embedding_model: str | None = Field(
        description="The model of the memory's vector that its owner's searches compare (of the "
        "vector column its tenant reads; during a change of embedding model, the old model's "
        "until the tenant switches to the new one): what its search hits name. Null while it "
        "has no vector there (it awaits embedding): searches find it by its words alone.",
        validation_alias=AliasChoices("vector_model", "embedding_model"),
    )
    metadata: dict[str, Any] = Field(validation_alias=AliasChoices("metadata_", "metadata"))
    store_key: str | None = Field(
        default=None, description="The client's key, for memories written by key; else null."
    )


class MemoryWritten(MemoryRead):
    model_config = ConfigDict(
        from_attributes=True,
        json_schema_extra={"examples": [{**_MEMORY_EXAMPLE, "duplicate": False}]},
    )

    duplicate: bool = Field(
        description="True when an identical memory already existed and was returned instead."
    )


class MemoryBatchWritten(BaseModel):
    items: list[MemoryWritten]


class MemoryEventRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    memory_id: uuid.UUID
    action: Literal["add", "update", "supersede", "delete"]
    old_text: str | None
    new_text: str | None
    changes: dict[str, Any]
    actor: str
    created_at: datetime


class MemoryHistory(BaseModel):
    items: list[MemoryEventRead]


class MemoriesDeleted(BaseModel):
    """What a delete by filter removed (or, with `dry_run=true`, would remove)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "matched": 2,
                    "deleted": 0,
                    "dry_run": True,
                    "ids": [
                        "3f2c8e0a-5b1d-4c7e-9a44-0d6e2b9f1a77",
                        "9b1e4d2c-7a3f-4e8b-b5c6-1d2e3f4a5b6c",
                    ],
                }
            ]
        }
    )

    matched: int = Field(description="Memories the filter selects (what a listing shows).")
    deleted: int = Field(description="Memories removed: `matched`, or 0 on a dry run.")
    dry_run: bool
    ids: list[uuid.UUID] = Field(
        description="The first (newest) matched ids, at most 20, to show before deleting."
    )


def _both_scopes() -> list[MemoryScope]:
    return ["user", "org"]


def _live_lifecycles() -> list[Lifecycle]:
    return ["proposed", "confirmed"]


class SearchRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"query": "seat preference when flying", "kinds": ["semantic"], "limit": 5}
            ]
        },
    )

    query: QueryText
    # An empty list is refused rather than read as "any": it would ask for nothing.
    kinds: list[MemoryKind] | None = Field(default=None, min_length=1)
    scopes: list[MemoryScope] = Field(default_factory=_both_scopes, min_length=1)
    categories: list[Category] | None = Field(default=None, min_length=1)
    lifecycles: list[Lifecycle] = Field(
        default_factory=_live_lifecycles,
        min_length=1,
        description="Superseded memories are excluded unless asked for.",
    )
    event_after: Timestamp | None = Field(
        default=None,
        description="Memories that happened at or after this time (`event_at`, else when stored).",
    )
    event_before: Timestamp | None = Field(
        default=None, description="… and before this one (later than `event_after`)."
    )
    limit: JsonInt = Field(default=10, ge=1, le=100)
    mode: SearchMode = "hybrid"
    fusion: FusionMethod | None = Field(
        default=None, description="`rrf` or `linear`; absent = the service's setting."
    )
    rrf_k: JsonInt | None = Field(default=None, ge=1, le=1000)
    linear_lexical_weight: UnitInterval | None = Field(
        default=None,
        description="Linear fusion's share of BM25 (relative to the best lexical hit) against "
        "the cosine, when both sides run; absent = the service's setting. A search with one "
        "side (mode `lexical` or `vector`) takes that side's score whole.",
    )
    recency_weight: UnitInterval | None = None
    confidence_weight: UnitInterval | None = None
    mmr_lambda: UnitInterval | None = Field(
        default=None,
        description="Set to diversify the results: each pick weighs relevance (the hit's "
        "`final_score` relative to the best candidate's) against redundancy (its highest cosine "
        "to the hits picked before it, from their stored vectors: in every mode). 1 = relevance "
        "only, the order without MMR.",
    )

    @field_validator("event_before")
    @classmethod
    def _after_event_after(cls, before: datetime | None, info: ValidationInfo) -> datetime | None:
        return before_after(before, info.data.get("event_after"), "event_after")


class ComponentScores(BaseModel):
    """Why a memory ranked where it did, exactly as the fusion query computed it."""

    lexical_rank: int | None
    lexical_score: float | None
    vector_rank: int | None
    vector_cosine: float | None
    fused_score: float
    neighbour_score: float = Field(
        description="The evidence of this memory's neighbours in its conversation: the best "
        "fused score among the candidates whose turn right before or right after them in the "
        "source thread it is (a fact lends to the turns around it). Only turns (episodic "
        "memories) receive it: 0 for a fact or a procedure, and for a memory outside any "
        "thread."
    )
    thread_score: float = Field(
        description="The evidence of this memory's session: the best fused score among its own "
        "and the candidates from its source thread (its own, outside a thread). The turns of a "
        "session share it, so it orders sessions rather than the turns within one."
    )
    speaker_score: float = Field(
        default=0.0,
        description="Set when the query names the speaker of this memory (one of the speakers "
        "of the searched memories): the prior for that speaker's words, on the fused scale.",
    )
    date_score: float = Field(
        default=0.0,
        description="Set when the query names a day, week or month and this memory happened "
        "then (its `event_at`): the prior for that time, on the fused scale. 0 for a memory "
        "without `event_at` (when it was stored is not when it happened).",
    )
    recency_factor: float
    confidence_factor: float
    final_score: float
    mmr_score: float | None = None
    rerank_score: float | None = Field(
        default=None,
        description="The configured reranking service's relevance score (`MNEME_RERANK_URL`); "
        "null without one, when it failed or timed out, and beyond its first `top_n` "
        "candidates. The hits it scored come first, ordered by it; the rest follow in fused "
        "order.",
    )


class SearchHit(BaseModel):
    memory: MemoryRead
    scores: ComponentScores


class SearchResponse(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "hits": [
                        {
                            "memory": _MEMORY_EXAMPLE,
                            "scores": {
                                "lexical_rank": 1,
                                "lexical_score": 2.31,
                                "vector_rank": 2,
                                "vector_cosine": 0.61,
                                "fused_score": 0.805,
                                "neighbour_score": 0.0,
                                "thread_score": 0.0,
                                "speaker_score": 0.0,
                                "date_score": 0.0,
                                "recency_factor": 1.0,
                                "confidence_factor": 0.98,
                                "final_score": 0.789,
                                "mmr_score": None,
                                "rerank_score": None,
                            },
                        }
                    ],
                    "mode": "hybrid",
                    "fusion": "linear",
                    "query_embedded": True,
                }
            ]
        }
    )

    hits: list[SearchHit]
    mode: SearchMode
    fusion: FusionMethod
    query_embedded: bool = Field(
        description="False when the embedder was unavailable and only lexical search ran."
    )


class ProcedureSlotRead(BaseModel):
    text: str
    memory_id: uuid.UUID
    updated_at: datetime


class Procedures(BaseModel):
    """Standing instructions for the agent, as typed slots."""

    style: ProcedureSlotRead | None = None
    workflow: ProcedureSlotRead | None = None
    safety: ProcedureSlotRead | None = None
    task_policies: ProcedureSlotRead | None = None


class ProceduresUpdate(BaseModel):
    """Slots to set; an empty string clears a slot, an absent slot is left alone."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"style": "Answer in short paragraphs; no emoji.", "safety": ""}]
        },
    )

    style: str | None = Field(default=None, max_length=MEMORY_TEXT_MAX)
    workflow: str | None = Field(default=None, max_length=MEMORY_TEXT_MAX)
    safety: str | None = Field(default=None, max_length=MEMORY_TEXT_MAX)
    task_policies: str | None = Field(default=None, max_length=MEMORY_TEXT_MAX)


STORE_KEY_MAX = 512
StoreKeyText = Annotated[
    str,
    StringConstraints(min_length=1, max_length=STORE_KEY_MAX),
    AfterValidator(has_visible_character),
]
"""A client's key for a memory: something visible, not only whitespace or invisible
characters, kept as given (the keyed routes' `key`, and an imported memory's `store_key`)."""


class KeyedMemoryPut(BaseModel):
    """The memory a key holds; `PUT` replaces every field of the memory already there (an
    absent one takes its default: no event time, no expiry)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"text": "Prefers aisle seats on long flights.", "metadata": {"v": 2}}]
        },
    )

    text: MemoryText
    metadata: JsonObject = Field(default_factory=dict)
    confidence: UnitInterval = 1.0
    event_at: Timestamp | None = None
    expires_at: Timestamp | None = None


class KeyedMemoryWritten(MemoryRead):
    model_config = ConfigDict(
        from_attributes=True,
        json_schema_extra={
            "examples": [{**_MEMORY_EXAMPLE, "store_key": "seat-preference", "created": True}]
        },
    )

    created: bool = Field(description="True when the key held no memory and one was added.")
