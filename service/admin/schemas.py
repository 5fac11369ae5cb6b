"""I/O models of the admin API: users with counts, purge reports, the audit trail."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from service.kit.types import JsonInt


class MemoryCounts(BaseModel):
    semantic: int
    episodic: int
    procedural: int


class UserOverview(BaseModel):
    """A user of the tenant with how much Mneme holds about it."""

    id: str
    name: str | None = None
    email: str | None = None
    created_at: datetime
    last_seen_at: datetime | None = Field(
        default=None, description="The user's own last request (end-user tokens only)."
    )
    last_active_at: datetime | None = Field(
        default=None,
        description="The latest of its last request, last message and newest memory.",
    )
    memories: MemoryCounts
    threads: int
    messages: int


class PurgeReport(BaseModel):
    """What a purge removed, and proof that nothing is left."""

    tenant_id: str
    user_id: str | None = Field(default=None, description="Null for a tenant purge.")
    deleted: dict[str, int] = Field(description="Rows deleted per table.")
    redacted: dict[str, int] = Field(
        default_factory=dict,
        description="Rows kept but stripped of the user's content (organization memories "
        "written from the user's conversations lose their provenance and evidence).",
    )
    remaining: dict[str, int] = Field(
        description="Counted after the commit, in a new transaction: the rows each table "
        "still holds for the user (or tenant). All zero."
    )
    verified: bool = Field(description="True when every `remaining` count is zero.")
    audit_id: uuid.UUID | None = Field(
        default=None, description="The audit entry recording the purge (none for a tenant)."
    )
    purged_at: datetime


class AuditEntryRead(BaseModel):
    id: uuid.UUID
    actor_kind: str
    actor_id: str
    action: str
    target_type: str
    target_id: str | None
    detail: dict[str, Any]
    request_id: str | None = Field(
        default=None, description="The `X-Request-ID` of the request that caused the entry."
    )
    created_at: datetime


class ImportReport(BaseModel):
    user_id: str
    imported: dict[str, int] = Field(description="Rows inserted per record type.")


class RetentionPolicy(BaseModel):
    """How long the tenant keeps what it stores, in days; null keeps it forever. Memories
    with their own `expires_at` go at that time whatever the policy says."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"episodic_days": 365, "messages_days": 90, "summaries_days": None}]
        },
    )

    episodic_days: JsonInt | None = Field(
        default=None, ge=1, le=36500, description="Episodic memories older than this go."
    )
    messages_days: JsonInt | None = Field(
        default=None,
        ge=1,
        le=36500,
        description="Raw messages older than this go (each thread keeps its newest message).",
    )
    summaries_days: JsonInt | None = Field(
        default=None, ge=1, le=36500, description="Thread summaries older than this go."
    )
