"""The request's cross-cutting injectables, as `Annotated` aliases routers declare.

Only what every domain shares lives here: the process state, the caller, its one
transaction, the user or organization a route addresses, idempotency. Each domain wires its
own services in its `dependencies.py`; nothing here imports a domain.

Every dependency is `async def`, even one that never awaits: FastAPI runs a plain `def`
dependency in a worker thread, and a search resolved five of them — thread hops that were a
measurable part of its time on two busy cores (docs/benchmarks.md, issue #15).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from service.auth.authenticator import Authenticator
from service.auth.owner import Owner, authorize_write
from service.auth.principal import Principal
from service.config import Settings
from service.db import tenant_transaction
from service.errors import AmbiguousCredentials, Forbidden, NotFound
from service.kit.idempotency import IdempotencyStore
from service.kit.post_commit import BackgroundRunner, PostCommitTasks
from service.observability import Metrics
from service.providers.llm import ChatModel
from service.providers.reranker import Reranker
from service.rate_limits import RateLimiter

if TYPE_CHECKING:
    from service.memories.embedding import EmbeddingBackfill
    from service.threads.hooks import AppendListener

TransactionHook = Callable[[AsyncSession, Principal], Awaitable[None]]
"""Runs at the start of every request transaction (e.g. recording the caller's account)."""

TenantRegistrar = Callable[[AsyncSession, str], Awaitable[None]]
"""Makes sure the tenant's row exists (records that reference it need it)."""


@dataclass
class AppState:
    """Process-wide resources opened by the lifespan and shared by all requests."""

    settings: Settings
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    authenticator: Authenticator
    metrics: Metrics
    schema_head: str | None
    embedding_backfill: EmbeddingBackfill
    background: BackgroundRunner
    chat_model: ChatModel | None
    ensure_tenant: TenantRegistrar
    transaction_hooks: Sequence[TransactionHook] = field(default_factory=tuple)
    # Told about every append in its transaction (the write path queues its jobs).
    append_listeners: tuple[AppendListener, ...] = ()
    # The hosted reranking service searches send their first candidates to, when configured.
    reranker: Reranker | None = None


async def get_state(request: Request) -> AppState:
    state: AppState = request.app.state.mneme
    return state


State = Annotated[AppState, Depends(get_state)]

# auto_error=False: a missing header must become our 401 problem, not FastAPI's 403.
_bearer = HTTPBearer(auto_error=False, description="A JWT or a Mneme API key.")


async def get_principal(
    request: Request,
    state: State,
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    limiter: RateLimiter | None = request.app.state.rate_limiter
    if len(request.headers.getlist("authorization")) > 1:
        raise AmbiguousCredentials(
            "Send one `Authorization` header: this request carries several, and which of them "
            "names the caller is not for the server to guess."
        )
    # The peer's address, or the client's from X-Forwarded-For when the peer is a trusted
    # proxy (MNEME_TRUSTED_PROXIES, applied by the outermost middleware).
    client_address = request.client.host if request.client is not None else "unknown"
    principal = await state.authenticator.authenticate(
        request.headers.get("authorization"), client_address
    )
    if limiter is not None:
        await limiter.charge_principal(request, principal)
    request.state.principal = principal
    return principal


CurrentPrincipal = Annotated[Principal, Depends(get_principal)]


async def get_post_commit_tasks() -> PostCommitTasks:
    return PostCommitTasks()


PostCommit = Annotated[PostCommitTasks, Depends(get_post_commit_tasks)]


async def get_session(
    state: State, principal: CurrentPrincipal, post_commit: PostCommit
) -> AsyncIterator[AsyncSession]:
    """The request's one transaction, scoped to the caller's tenant.

    Used with scope="function": the commit runs after the endpoint returns and before the
    response is sent, so a failed commit is a 5xx and never a 2xx. Work registered in
    `PostCommit` starts only once the commit succeeded.
    """
    async with principal_transaction(state, principal, post_commit) as session:
        yield session


@asynccontextmanager
async def principal_transaction(
    state: AppState, principal: Principal, post_commit: PostCommitTasks
) -> AsyncIterator[AsyncSession]:
    """One transaction scoped to the principal's tenant, with the per-transaction hooks run
    first; the work registered in `post_commit` starts only once the commit succeeded.

    Every entry point that acts for a principal (REST requests, MCP tool calls) opens its
    transaction here, so they all see the same tenant scope and side effects.
    """
    async with tenant_transaction(state.sessionmaker, principal.tenant_id) as session:
        for hook in state.transaction_hooks:
            await hook(session, principal)
        yield session
    for job in post_commit.take():
        state.background.start(job)


Session = Annotated[AsyncSession, Depends(get_session, scope="function")]


async def get_idempotency_store(
    session: Session, principal: CurrentPrincipal, state: State
) -> IdempotencyStore:
    # The record references the tenant row, which a service's first request may not have made.
    await state.ensure_tenant(session, principal.tenant_id)
    # Keys are per principal; the kind keeps a service and a user sharing a `sub` apart.
    return IdempotencyStore(session, principal.tenant_id, f"{principal.kind}:{principal.subject}")


Idempotency = Annotated[IdempotencyStore, Depends(get_idempotency_store)]


async def resolve_addressed_user(
    principal: CurrentPrincipal,
    user_id: Annotated[
        str,
        Path(
            description="A user id of the caller's tenant, or `me` for the caller itself.",
            min_length=1,
            max_length=256,
        ),
    ],
) -> str:
    resolved = principal.resolve_user(user_id)
    if resolved is None:
        # Same answer whether the user exists or not: no existence leak across users.
        raise NotFound(f"No user {user_id!r} that this caller may address.")
    return resolved


AddressedUserId = Annotated[str, Depends(resolve_addressed_user)]


async def require_admin(principal: CurrentPrincipal) -> Principal:
    if not principal.is_admin:
        raise Forbidden("This operation needs the admin role.")
    return principal


AdminPrincipal = Annotated[Principal, Depends(require_admin)]


async def user_owner(user_id: AddressedUserId) -> Owner:
    return Owner.user(user_id)


async def org_owner(_principal: CurrentPrincipal) -> Owner:
    """Every user of the tenant reads the organization's data."""
    return Owner.org()


async def org_writer(principal: CurrentPrincipal) -> Owner:
    """Only admins (by their credential's roles, never a request body) write it."""
    owner = Owner.org()
    authorize_write(principal, owner)
    return owner


UserOwner = Annotated[Owner, Depends(user_owner)]
OrgOwner = Annotated[Owner, Depends(org_owner)]
OrgWriter = Annotated[Owner, Depends(org_writer)]
