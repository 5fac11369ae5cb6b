"""What every write-path pass shares: reading where a thread's passes got to, and one
transaction per write with the memory and profile services acting as the pass.

Every pass acts as a system principal whose admin flag is the one the appending request's
principal had (carried in the job payload), so org memory is written only for admins however
the model answers. A pass writes in one transaction holding the owner's write lock, after
checking that no other pass moved the thread's cursor since it read: two passes racing on a
thread write once (the loser reports `superseded` and reads again).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from service.auth.principal import Principal
from service.db import tenant_transaction
from service.extraction.dependencies import extraction_repository
from service.extraction.repository import ExtractionRepository
from service.memories.dependencies import memory_writer
from service.memories.writer import DerivedMemoryWriter
from service.services import Services, unit_of_work
from service.state import AppState
from service.threads.models import Message

EXTRACTOR_ACTOR = "mneme:extractor"
TURNS_ACTOR = "mneme:turns"
# The actors the write path writes memories as; any other actor on a memory's history wrote
# or changed it deliberately.
WRITE_PATH_ACTORS = (EXTRACTOR_ACTOR, TURNS_ACTOR)
# Messages before a window shown to the model for context (already processed).
CONTEXT_MESSAGES = 4
# Messages read per round; a longer backlog is read again after it is processed.
READ_LIMIT = 1000
# Rounds per job: a pass that lost a race re-reads; bounded so a job always ends.
MAX_ROUNDS = 10
SOURCE_IDS_MAX = 100


@dataclass(frozen=True, slots=True)
class Pending:
    """A thread's messages after its cursor, and the few before it for context."""

    user_id: str
    after: int  # the cursor: seq of the last processed message, -1 before the first pass
    context: list[Message]
    pending: list[Message]
    truncated: bool


class Unit:
    """One transaction of a pass (a unit of work acting as the pass), with the services it
    writes through."""

    def __init__(self, services: Services) -> None:
        self.services = services

    @property
    def repository(self) -> ExtractionRepository:
        return self.services.get(extraction_repository)

    @property
    def memories(self) -> DerivedMemoryWriter:
        return self.services.get(memory_writer)

    async def cursor_moved(self, thread_id: uuid.UUID, after: int) -> bool:
        """Whether what the pass read is stale: another pass moved the thread's cursor since
        this one read it at `after`, or the thread is gone (deleted or purged while the model
        was answering). Called under the user's write lock, which a purge holds alone, so a
        purge that committed first is seen here and nothing of the purged user is written
        again. The thread is held from here to the commit (`thread_owner(hold=True)`): a
        deletion under way is waited for and then seen, and one that comes later waits for
        the pass, and forgets what it wrote with the thread (`cascade=memories`)."""
        if await self.repository.thread_owner(thread_id, hold=True) is None:
            return True
        cursor = await self.repository.cursor(thread_id)
        return (-1 if cursor is None else cursor.through_seq) != after


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


class PassRunner:
    """Opens the transactions the passes of one process read and write in."""

    def __init__(self, state: AppState) -> None:
        self.state = state

    @asynccontextmanager
    async def unit(self, tenant_id: str, actor: str, *, org_writes: bool) -> AsyncIterator[Unit]:
        """A unit of work acting as the pass; work its services defer until after the commit
        (embedding retries) starts once it committed."""
        principal = writer_principal(tenant_id, actor, org_writes=org_writes)
        async with unit_of_work(self.state, principal) as services:
            yield Unit(services)

    async def read(self, tenant_id: str, thread_id: uuid.UUID) -> Pending | None:
        """The thread's messages after its cursor (None when the thread is gone)."""
        async with tenant_transaction(self.state.sessionmaker, tenant_id) as session:
            repository = ExtractionRepository(session, tenant_id)
            user_id = await repository.thread_owner(thread_id)
            if user_id is None:
                return None
            cursor = await repository.cursor(thread_id)
            after = -1 if cursor is None else cursor.through_seq
            first = max(after + 1 - CONTEXT_MESSAGES, 0)
            limit = READ_LIMIT + (after + 1 - first)
            messages = await repository.messages_between(thread_id, first, limit=limit)
        return Pending(
            user_id=user_id,
            after=after,
            context=[m for m in messages if m.seq <= after],
            pending=[m for m in messages if m.seq > after],
            truncated=len(messages) == limit,
        )
