"""The request's injectables, as `Annotated` aliases routers declare in their signatures."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from service.accounts.repository import AccountRepository
from service.auth.authenticator import Authenticator
from service.auth.principal import Principal
from service.config import Settings
from service.db import tenant_transaction
from service.errors import Forbidden, NotFound, Unauthenticated
from service.kit.idempotency import IdempotencyStore
from service.kit.post_commit import BackgroundRunner, PostCommitTasks
from service.memories.embedding import EmbeddingBackfill
from service.observability import Metrics
from service.providers.llm import ChatModel
from service.rate_limits import RateLimiter


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


def get_state(request: Request) -> AppState:
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
    try:
        principal = await state.authenticator.authenticate(request.headers.get("authorization"))
    except Unauthenticated:
        if limiter is not None:
            await limiter.charge_unauthenticated(request)
        raise
    if limiter is not None:
        await limiter.charge_principal(request, principal)
    request.state.principal = principal
    return principal


CurrentPrincipal = Annotated[Principal, Depends(get_principal)]


def get_post_commit_tasks() -> PostCommitTasks:
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
    async with tenant_transaction(state.sessionmaker, principal.tenant_id) as session:
        if principal.account is not None:
            await AccountRepository(session, principal.tenant_id).touch_end_user(
                principal.subject, principal.account
            )
        yield session
    for job in post_commit.take():
        state.background.start(job)


Session = Annotated[AsyncSession, Depends(get_session, scope="function")]


async def get_idempotency_store(session: Session, principal: CurrentPrincipal) -> IdempotencyStore:
    # The record references the tenant row, which a service's first request may not have made.
    await AccountRepository(session, principal.tenant_id).ensure_tenant()
    # Keys are per principal; the kind keeps a service and a user sharing a `sub` apart.
    return IdempotencyStore(session, principal.tenant_id, f"{principal.kind}:{principal.subject}")


Idempotency = Annotated[IdempotencyStore, Depends(get_idempotency_store)]


def resolve_addressed_user(
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


def require_admin(principal: CurrentPrincipal) -> Principal:
    if not principal.is_admin:
        raise Forbidden("This operation needs the admin role.")
    return principal


AdminPrincipal = Annotated[Principal, Depends(require_admin)]
