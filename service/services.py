"""One unit of work: a tenant-scoped transaction, the principal it acts for, and the domain
services built on it.

Every entry point that acts for a principal opens its work here — a REST request (through
`service.dependencies`), an MCP tool call and a write-path pass — so they all see the same
tenant scope, per-transaction hooks and post-commit work, and compose services the same way.

`Services` knows no domain: each domain declares how to build its services from a unit as a
plain function in its `dependencies.py` (`memory_service(services)`), and `Services.get` builds
each of them on first use and hands the same instance to everyone else in the unit. A context
read builds the memory, profile and thread services it reads through, and nothing else.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncSession

from service.auth.principal import Principal
from service.db import begun_with, tenant_transaction
from service.kit.post_commit import PostCommitTasks
from service.state import AppState

T = TypeVar("T")


class Services:
    """The session, principal, process state and post-commit work of one unit of work, and
    the domain services built on them (once each, on first use)."""

    def __init__(
        self,
        session: AsyncSession,
        principal: Principal,
        state: AppState,
        post_commit: PostCommitTasks,
    ) -> None:
        self.session = session
        self.principal = principal
        self.state = state
        self.post_commit = post_commit
        self._built: dict[Callable[[Services], Any], Any] = {}

    @property
    def tenant_id(self) -> str:
        return self.principal.tenant_id

    async def end_transaction(self) -> None:
        """Commit the unit's transaction now, for work whose rest needs no database (a hosted
        reranker's round trip then holds no pooled connection). The unit's post-commit work
        still starts when the unit ends. A statement after this is refused: it would run in a
        transaction of its own, outside the tenant's scope."""
        await self.session.commit()
        event.listen(self.session.sync_session, "after_begin", _refuse_a_transaction_after_the_end)

    def get(self, factory: Callable[[Services], T]) -> T:
        """The unit's service that `factory` builds, built now if no one asked for it yet."""
        if factory not in self._built:
            self._built[factory] = factory(self)
        built: T = self._built[factory]
        return built


def _refuse_a_transaction_after_the_end(*_: Any) -> None:
    raise RuntimeError("this unit of work ended its transaction (`Services.end_transaction`)")


@asynccontextmanager
async def principal_transaction(
    state: AppState, principal: Principal, post_commit: PostCommitTasks
) -> AsyncIterator[AsyncSession]:
    """One transaction scoped to the principal's tenant, with the per-transaction hooks run
    first; the work registered in `post_commit` starts only once the commit succeeded."""
    hooks = state.transaction_hooks
    # The first hook with a statement for BEGIN's query gets it sent there, and its tag back.
    offered = [hook.with_begin(principal) for hook in hooks]
    first = next((index for index, statement in enumerate(offered) if statement), None)
    with_begin = None if first is None else offered[first]
    async with tenant_transaction(
        state.sessionmaker, principal.tenant_id, with_begin=with_begin
    ) as session:
        for index, hook in enumerate(hooks):
            await hook(session, principal, begun_with(session) if index == first else None)
        yield session
    for job in post_commit.take():
        state.background.start(job)


@asynccontextmanager
async def unit_of_work(state: AppState, principal: Principal) -> AsyncIterator[Services]:
    """A unit of work outside a request: committed when the block ends, rolled back if it
    raises; its post-commit work starts once it committed."""
    post_commit = PostCommitTasks()
    async with principal_transaction(state, principal, post_commit) as session:
        yield Services(session, principal, state, post_commit)
