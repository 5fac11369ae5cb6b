"""Account use cases: what Mneme knows about a user of the caller's tenant."""

from __future__ import annotations

from typing import Any

from service.accounts.errors import AccountWriteForbidden
from service.accounts.models import UserAccount
from service.accounts.overlay import AccountOverlayUpdate
from service.accounts.repository import AccountRepository, stored_claims
from service.accounts.schemas import UserRead
from service.audit.service import AuditTrail
from service.auth.owner import Owner
from service.auth.principal import AccountClaims, Principal
from service.errors import NotFound
from service.kit.resource_headers import (
    entity_tag,
    require_preconditions,
)


def user_etag(user: UserRead) -> str:
    """A user's entity tag; its last-seen mark is part of it, so it also moves as the user is
    active (at most every few minutes)."""
    return entity_tag(user)


class AccountService:
    """Reading accounts needs only the repository; setting an overlay also needs the caller
    and the audit trail, which the accounts router passes."""

    def __init__(
        self,
        repository: AccountRepository,
        *,
        audit: AuditTrail | None = None,
        principal: Principal | None = None,
    ) -> None:
        self._repository = repository
        self._audit = audit
        self._principal = principal

    async def get_user(self, user_id: str) -> UserRead:
        user = await self._repository.get_user(user_id)
        if user is None:
            raise NotFound(f"User {user_id!r} is not known in this tenant.")
        return UserRead.model_validate(user)

    async def overlay(self, user_id: str) -> AccountClaims:
        """The user's auth overlay; empty for a user Mneme has not seen. The caller's own, when
        its token carries claims, is known without a read (`known_overlay`)."""
        known = self._repository.known_overlay(user_id)
        if known is not None:
            return known
        return await self._repository.stored_overlay(user_id) or AccountClaims()

    async def set_overlay(
        self,
        user_id: str,
        update: AccountOverlayUpdate,
        *,
        if_match: str | None = None,
        if_none_match: str | None = None,
    ) -> UserRead:
        """Replace a user's overlay (creating the user if needed). Only service principals may:
        an end user's overlay is recorded from its own token on every request. With
        `if_match`, only if the user exists and is still in that state; with `if_none_match`,
        only if it is not (`*`: only if the user does not exist yet)."""
        principal, audit = self._principal, self._audit
        if principal is None or audit is None:
            raise RuntimeError("setting an overlay needs the caller and the audit trail")
        if not principal.is_service:
            raise AccountWriteForbidden(
                "An end user's name, email, avatar and linked accounts are taken from its "
                "token's claims; only a service principal may set them here."
            )
        await self._repository.hold_user_writes(user_id)
        await self._repository.ensure_tenant()
        current = await self._repository.get_user(user_id, for_update=True)
        tag = None if current is None else user_etag(UserRead.model_validate(current))
        require_preconditions(
            if_match,
            if_none_match,
            tag,
            changed="The user's account changed since you read it; read it again and retry.",
            unchanged="The user's account exists in the state If-None-Match names; nothing "
            "changed.",
            absent=f"There is no user {user_id!r} yet, and If-Match (`*` too) sets only an "
            "account that exists; nothing changed. Without If-Match, the put adds the user.",
        )
        wanted = AccountClaims(
            name=update.name,
            email=update.email,
            avatar=update.avatar,
            socials=tuple(update.socials),
        )
        if current is not None and _claims(current) == wanted:
            return UserRead.model_validate(current)
        before = None if current is None else _overlay_detail(_claims(current))
        user = await self._repository.set_overlay(user_id, wanted)
        await audit.record(
            "account.overlay_set",
            target_type="user",
            target_id=user_id,
            detail={"before": before, "after": _overlay_detail(wanted)},
        )
        return UserRead.model_validate(user)

    async def ensure_tenant(self) -> None:
        """Provision the caller's tenant row (tenants are created on first use)."""
        await self._repository.ensure_tenant()

    async def ensure_user(self, user_id: str) -> None:
        """Provision the tenant and user rows a service's writes for `user_id` need."""
        await self._repository.ensure_user(user_id)

    async def hold_user_writes(self, user_id: str) -> None:
        """Hold the tenant's and the user's write locks as one of their writers until the
        transaction ends: the first thing every write to the user's data does
        (`user_writes_lock_key`)."""
        await self._repository.hold_user_writes(user_id)

    async def hold_owner_writes(self, *owners: Owner) -> None:
        """Hold the write locks of `owners` until the transaction ends: each user's with the
        tenant's, or the tenant's alone for the organization's data."""
        await self._repository.hold_owner_writes(*owners)

    async def hold_tenant_writes(self) -> None:
        """Hold the tenant's write lock as one of its writers until the transaction ends: the
        first thing every write to the tenant's data that is no user's does
        (`tenant_writes_lock_key`)."""
        await self._repository.hold_tenant_writes()


def _claims(user: UserAccount) -> AccountClaims:
    return stored_claims(user.name, user.email, user.avatar, user.socials)


def _overlay_detail(claims: AccountClaims) -> dict[str, Any]:
    return {
        "name": claims.name,
        "email": claims.email,
        "avatar": claims.avatar,
        "socials": list(claims.socials),
    }
