"""What the MCP tools return: the part of each REST answer an agent's model acts on.

A tool result is read by a model, and every field costs tokens on every call (and the output
schemas on every tool listing). The REST answers carry what a client program or a debugging
human needs (component scores, provenance, timestamps, before/after diffs); a model needs the
text, the id to act on it, and a few labels. Each shape here is built from the REST body, so
the two cannot disagree, and fields that are empty are left out of the result rather than
sent as null.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, JsonValue
from pydantic.json_schema import SkipJsonSchema

from service.context.schemas import ContextResponse
from service.kit.pagination import Page
from service.memories.schemas import (
    MemoryKind,
    MemoryRead,
    MemoryScope,
    MemoryWritten,
    SearchResponse,
)
from service.profile.schemas import ProfilePatchResult

SCORE_DIGITS = 3
"""A ranking score to three decimals: enough to compare hits, far fewer tokens than 17 digits."""


def _absent_when_empty(schema: dict[str, Any]) -> None:
    # The field is left out of a result rather than sent as null, so it has no default either.
    schema.pop("default", None)


def absent_when_empty(description: str | None = None) -> Any:
    """A field that a result leaves out when it has no value (see `success_result`)."""
    return Field(default=None, description=description, json_schema_extra=_absent_when_empty)


class Memory(BaseModel):
    id: uuid.UUID
    text: str
    kind: MemoryKind
    category: str | SkipJsonSchema[None] = absent_when_empty()
    scope: MemoryScope = Field(description="org: shared by the organization (not forgettable).")
    event_at: datetime | SkipJsonSchema[None] = absent_when_empty("When it happened, if known.")

    @classmethod
    def of(cls, memory: MemoryRead) -> Memory:
        return cls(
            id=memory.id,
            text=memory.text,
            kind=memory.kind,
            category=memory.category,
            scope=memory.scope,
            event_at=memory.event_at,
        )


class RecalledMemory(Memory):
    score: float = Field(description="Higher is more relevant.")


class Recalled(BaseModel):
    hits: list[RecalledMemory]

    @classmethod
    def of(cls, response: SearchResponse) -> Recalled:
        return cls(
            hits=[
                RecalledMemory(
                    **Memory.of(hit.memory).model_dump(),
                    score=round(hit.scores.final_score, SCORE_DIGITS),
                )
                for hit in response.hits
            ]
        )


class Remembered(BaseModel):
    id: uuid.UUID
    duplicate: bool = Field(description="True: it was already known; nothing new was stored.")

    @classmethod
    def of(cls, written: MemoryWritten) -> Remembered:
        return cls(id=written.id, duplicate=written.duplicate)


class Memories(BaseModel):
    items: list[Memory]
    next_cursor: str | SkipJsonSchema[None] = absent_when_empty(
        "Pass as cursor for more; absent on the last page."
    )

    @classmethod
    def of(cls, page: Page[MemoryRead]) -> Memories:
        return cls(items=[Memory.of(item) for item in page.items], next_cursor=page.next_cursor)


class ContextBlock(BaseModel):
    text: str
    token_count: int
    budget_tokens: int

    @classmethod
    def of(cls, response: ContextResponse) -> ContextBlock:
        return cls(
            text=response.text or "",
            token_count=response.token_count,
            budget_tokens=response.budget_tokens,
        )


class ProfileUpdated(BaseModel):
    changed: bool
    profile: dict[str, JsonValue] = Field(description="The profile after the change.")

    @classmethod
    def of(cls, result: ProfilePatchResult) -> ProfileUpdated:
        return cls(changed=result.changed, profile=result.after)


class Forgotten(BaseModel):
    deleted: uuid.UUID
