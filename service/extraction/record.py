"""What the write path records in the tenant's audit trail, as typed models: written by the
passes and the worker's failure hook, read back by the health endpoints.

A finished pass is an `extraction.pass` entry whose detail is a `PassRecord` (the cursor it
moved, counts and ids, never text); a failed job run is a `job.failed` entry whose detail is a
`FailureRecord`. Fields added later have defaults, so older entries still read.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

PassMode = Literal["llm", "turns"]
PassStatus = Literal["written", "superseded"]


class PassRecord(BaseModel):
    """One finished pass over a thread's window of messages `from_seq`..`through_seq`."""

    user_id: str
    mode: PassMode
    trigger: str
    model: str | None = None
    org_writes: bool = False
    from_seq: int
    through_seq: int
    written: list[uuid.UUID] = Field(default_factory=list)
    superseded: int = 0
    reconfirmed: int = 0
    removed: int = 0
    flagged: int = 0
    profile_keys: list[str] = Field(default_factory=list)
    dropped: dict[str, int] = Field(default_factory=dict)

    def detail(self) -> dict[str, object]:
        """The audit entry's JSON detail."""
        return self.model_dump(mode="json")


class FailureRecord(BaseModel):
    """One failed run of a job that works on a thread (`final`: no retry follows)."""

    user_id: str
    kind: str
    attempt: int = 0
    final: bool = False
    error: str = ""
    # Whether the job could write organization memory (its appending principal was an admin).
    org_writes: bool = False

    def detail(self) -> dict[str, object]:
        return self.model_dump(mode="json")


class RequeueRecord(BaseModel):
    """A fresh job of `kind` queued for a thread whose work lagged: by the sweep after a job
    gave up, or by an operator's rerun."""

    user_id: str
    kind: str
    reason: Literal["sweep", "rerun"]

    def detail(self) -> dict[str, object]:
        return self.model_dump(mode="json")


@dataclass(frozen=True, slots=True)
class PassOutcome:
    """What one pass over one window did: its record when it wrote, or `superseded` when
    another pass of the thread got there first (nothing written)."""

    status: PassStatus
    from_seq: int
    through_seq: int
    record: PassRecord | None = None
