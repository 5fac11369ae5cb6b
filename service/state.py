"""The process state: what the lifespan opens once and every unit of work shares.

It sits on the ground floor, so it names the domains' start-up objects for the type checker
only; the composition root (`service.main`) builds them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from service.auth.authenticator import Authenticator
from service.auth.principal import Principal
from service.config import Settings
from service.kit.post_commit import BackgroundRunner
from service.observability import Metrics
from service.providers.llm import ChatModel
from service.providers.reranker import Reranker

if TYPE_CHECKING:
    from service.memories.embedding import EmbeddingBackfill
    from service.memories.owner_indexes import OwnerIndexes
    from service.memories.vector_columns import VectorColumns
    from service.threads.service import ThreadSetup


class TransactionHook(Protocol):
    """Runs at the start of every unit of work's transaction (e.g. recording the caller's
    account)."""

    def with_begin(self, principal: Principal) -> str | None:
        """A read-only statement of literals to send in the same query as the transaction's
        BEGIN (one round trip for both), or None; its command tag (e.g. "SELECT 1") is handed
        to the hook. Only the first hook of a transaction that has one gets it sent."""

    async def __call__(
        self, session: AsyncSession, principal: Principal, begun: str | None
    ) -> None:
        """The hook's work in the transaction; `begun` is the command tag of its `with_begin`
        statement, or None if that was not sent (then it asks for itself)."""


TenantWriteLock = Callable[[AsyncSession, str], Awaitable[None]]
"""Holds the tenant's write lock as one of its writers until the session's transaction ends
(`accounts.repository.tenant_writes_lock_key`)."""


@dataclass
class AppState:
    """Process-wide resources opened by the lifespan and shared by all requests."""

    settings: Settings
    engine: AsyncEngine
    # One connection of the runtime role for the operational endpoints (readiness, the metrics'
    # queue gauges), apart from the requests' pool: an orchestrator and an operator see the
    # process as it is however busy its requests keep that pool.
    ops_engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    authenticator: Authenticator
    metrics: Metrics
    schema_head: str | None
    embedding_backfill: EmbeddingBackfill
    # Which vector column each tenant reads, and the embedders of their models.
    vector_columns: VectorColumns
    background: BackgroundRunner
    chat_model: ChatModel | None
    hold_tenant_writes: TenantWriteLock
    # The summarizer and what an append queues (summaries, the write path): built once.
    threads: ThreadSetup
    transaction_hooks: Sequence[TransactionHook] = field(default_factory=tuple)
    # The hosted reranking service searches send their first candidates to, when configured.
    reranker: Reranker | None = None
    # Keeps the largest owners' vector indexes, in a process that holds the owner role.
    owner_indexes: OwnerIndexes | None = None
