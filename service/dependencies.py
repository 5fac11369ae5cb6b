"""The request's cross-cutting injectables, as `Annotated` aliases routers declare.

Only what every domain shares lives here: the process state, the caller, its one
transaction and unit of work (`service.services`), the user or organization a route
addresses, idempotency. Each domain declares its services in its `dependencies.py`; nothing
here imports a domain.

Every dependency is `async def`, even one that never awaits: FastAPI runs a plain `def`
dependency in a worker thread, and a search resolved five of them — thread hops that were a
measurable part of its time on two busy cores (docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Path, Request
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.ext.asyncio import AsyncSession

from service.auth.owner import Owner, authorize_write
from service.auth.principal import Principal
from service.errors import AmbiguousCredentials, Forbidden, NotFound
from service.kit.idempotency import IdempotencyStore, spelled_path
from service.kit.types import IDENTIFIER_MAX
from service.rate_limits import RateLimiter
from service.services import Services, unit_of_work
from service.state import AppState

T = TypeVar("T")


async def get_state(request: Request) -> AppState:
    state: AppState = request.app.state.mneme
    return state


State = Annotated[AppState, Depends(get_state)]

# auto_error=False: a missing header must become our 401 problem, not FastAPI's 403.
_bearer = HTTPBearer(auto_error=False, description="A JWT or a Mneme API key.")


async def get_principal(
    request: Request,
    # Declared for the OpenAPI document's bearer scheme; the header is read below.
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    # The process state straight from the app rather than as `State`: nearly every dependency
    # depends on the caller, and FastAPI walks a dependency's own dependencies again at each
    # place it meets it (before it finds the value cached), so the caller stays two nodes deep.
    state: AppState = request.app.state.mneme
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


async def get_services(request: Request, principal: CurrentPrincipal) -> AsyncIterator[Services]:
    """The request's unit of work: its one transaction, scoped to the caller's tenant, and the
    domain services built on it (each domain's dependency takes its service from here, built
    once for the request).

    Used with scope="function": the commit runs after the endpoint returns and before the
    response is sent, so a failed commit is a 5xx and never a 2xx. Work registered in the
    unit's post-commit tasks starts only once the commit succeeded.
    """
    async with unit_of_work(request.app.state.mneme, principal) as services:
        yield services


UnitOfWork = Annotated[Services, Depends(get_services, scope="function")]


async def get_session(services: UnitOfWork) -> AsyncSession:
    """The request's one transaction (the unit of work's session)."""
    return services.session


Session = Annotated[AsyncSession, Depends(get_session)]


def provided(factory: Callable[[Services], T]) -> Callable[[Services], Coroutine[Any, Any, T]]:
    """The request dependency that takes `factory`'s service from the request's unit of work
    (`Depends(provided(memory_service))`)."""

    async def from_unit_of_work(services: UnitOfWork) -> T:
        return services.get(factory)

    return from_unit_of_work


def resolved_path(request: Request, principal: Principal) -> str:
    """The request's path with the user it addresses resolved (`me` is the caller's own id).

    One request may be spelled `/v1/users/me/…` or `/v1/users/<own id>/…`; an idempotency
    record fingerprints it by this path, so a retry through a layer that resolves `me` (or
    does not) replays instead of being refused as another request. The path is rebuilt from
    the route (convertors write their canonical form); a path that addresses no user, or one
    this caller may not address (the route answers 404 anyway), is kept as spelled.
    """
    route = request.scope.get("route")
    user_id = request.path_params.get("user_id")
    if not isinstance(route, APIRoute) or not isinstance(user_id, str):
        return request.url.path
    resolved = principal.resolve_user(user_id)
    if resolved is None:
        return request.url.path
    return route.url_path_for(route.name, **{**request.path_params, "user_id": resolved})


def idempotency_store(
    services: Services, request_path: Callable[[Request], str] = spelled_path
) -> IdempotencyStore:
    """The unit of work's idempotency store: keys per principal (the kind keeps a service and
    a user sharing a `sub` apart), each claim made after the tenant's write lock."""
    principal, session = services.principal, services.session

    async def hold_tenant_writes() -> None:
        await services.state.hold_tenant_writes(session, principal.tenant_id)

    return IdempotencyStore(
        session,
        principal.tenant_id,
        f"{principal.kind}:{principal.subject}",
        hold_writes=hold_tenant_writes,
        request_path=request_path,
    )


async def get_idempotency_store(request: Request, services: UnitOfWork) -> IdempotencyStore:
    principal = services.principal
    return idempotency_store(services, lambda spelled: resolved_path(spelled, principal))


Idempotency = Annotated[IdempotencyStore, Depends(get_idempotency_store)]


async def resolve_addressed_user(
    principal: CurrentPrincipal,
    user_id: Annotated[
        str,
        Path(
            description="A user id of the caller's tenant, or `me` for the caller itself.",
            # Published, not enforced here: a longer id is no id, and like every other invalid
            # one it is a 404 from `resolve_user`, not a 422 for its length.
            json_schema_extra={"minLength": 1, "maxLength": IDENTIFIER_MAX},
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
