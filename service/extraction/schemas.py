"""Request and response models of the write-path endpoints: compaction, job health, reruns."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.kit.types import UserId
from service.memories.schemas import CATEGORY_PATTERN, MemoryRead

WritePathMode = Literal["llm", "turns", "off"]
QueuedJobState = Literal["queued", "picked"]


class RerunRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"user_id": "user-42"}]}
    )

    user_id: UserId = Field(description="Whose threads to process.")
    thread_id: uuid.UUID | None = Field(
        default=None, description="Only this thread (default: all the user's threads)."
    )


class RerunQueued(BaseModel):
    threads: list[uuid.UUID] = Field(description="The threads fresh jobs were queued for.")
    kinds: list[str] = Field(
        description="The kinds of job queued per thread; empty when background work is off."
    )


class CompactRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"categories": ["preference"]}]}
    )

    categories: list[Annotated[str, Field(pattern=CATEGORY_PATTERN)]] | None = Field(
        default=None,
        min_length=1,
        max_length=50,
        description="Only facts of these categories (default: every semantic fact).",
    )


class CompactResult(BaseModel):
    status: Literal["compacted", "unchanged", "nothing_to_compact"]
    read: int = Field(description="How many live facts the model was shown.")
    written: list[MemoryRead] = Field(description="The consolidated facts written.")
    superseded: list[uuid.UUID] = Field(
        description="Facts folded into a consolidated one: superseded (with history), not deleted."
    )
    dropped: dict[str, int] = Field(
        description="Proposed facts not written, by reason (e.g. `no_sources`, `secret`)."
    )


class PendingJobRead(BaseModel):
    id: int
    kind: str = Field(examples=["memory_extraction"])
    status: QueuedJobState = Field(description="`picked`: running now.")
    attempts: int = Field(
        description="Runs that failed so far and count towards the job's attempts (it is "
        "retried with backoff, and gives up once `MNEME_JOB_MAX_ATTEMPTS` have failed)."
    )
    uncounted_runs: int = Field(
        description="Runs that failed for a cause outside the job and do not count: a database "
        "outage, every database connection busy, or the service stopping while it ran. It is "
        "retried with backoff all the same."
    )
    thread_id: uuid.UUID | None
    user_id: str | None
    created_at: datetime
    execute_after: datetime = Field(description="Not run before this (backoff after failures).")


class JobFailureRead(BaseModel):
    kind: str
    thread_id: uuid.UUID | None
    user_id: str | None
    attempt: int
    final: bool = Field(description="No retry follows; the next append's pass catches up.")
    error: str = Field(description="The error's type and, for model errors, what went wrong.")
    failed_at: datetime


class PassRead(BaseModel):
    """One finished write-path pass over a thread's window of messages."""

    thread_id: uuid.UUID | None
    user_id: str | None
    mode: Literal["llm", "turns"]
    trigger: str
    model: str | None
    from_seq: int
    through_seq: int
    written: list[uuid.UUID]
    superseded: int
    reconfirmed: int
    removed: int
    flagged: int = Field(
        description="Facts written or changed through the API that this pass would have "
        "replaced on weak evidence: left current, the new fact awaits review."
    )
    profile_keys: list[str]
    dropped: dict[str, int]
    finished_at: datetime


class SummaryPassRead(BaseModel):
    """One summary pass that wrote a summary of a window of a thread's messages."""

    thread_id: uuid.UUID
    start_index: int = Field(description="The first message (`seq`) the summary covers.")
    end_index: int = Field(description="The message after the last one it covers.")
    model: str | None
    finished_at: datetime


class JobCountRead(BaseModel):
    kind: str
    status: QueuedJobState
    jobs: int
    retrying: int = Field(description="Of them, jobs that used at least one attempt already.")
    interrupted: int = Field(
        description="Of them, the others that failed only for causes outside the job "
        "(`uncounted_runs`), with all their attempts left."
    )
    oldest_created_at: datetime


class UserJobs(BaseModel):
    """The write path's health for one user: what waits, what failed, what ran."""

    extraction: WritePathMode = Field(
        description="`llm`: extraction with the model; `turns`: no LLM, human turns are stored "
        "as episodic memories; `off`: nothing runs after appends."
    )
    strategy: str
    pending: list[PendingJobRead]
    failures: list[JobFailureRead]
    passes: list[PassRead]
    summaries: list[SummaryPassRead]


class TenantJobs(BaseModel):
    """The background jobs of the whole tenant (admins)."""

    extraction: WritePathMode
    strategy: str
    counts: list[JobCountRead]
    pending: list[PendingJobRead]
    failures: list[JobFailureRead]
