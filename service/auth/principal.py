"""Who is calling: the principal every request acts as, derived only from its credential."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from service.kit.types import CALLER_ALIAS, is_valid_identifier

PrincipalKind = Literal["user", "service"]
CredentialKind = Literal["jwt", "api_key"]

TENANT_ID_MAX = 128

ME = CALLER_ALIAS


@dataclass(frozen=True)
class AccountClaims:
    """The auth overlay the token carries about its user (name, email, avatar, linked
    providers): never tokens or provider account ids."""

    name: str | None = None
    email: str | None = None
    avatar: str | None = None
    socials: tuple[str, ...] = ()


@dataclass(frozen=True)
class Principal:
    """An authenticated caller. A model or a request body can never change any of this."""

    tenant_id: str
    subject: str
    kind: PrincipalKind
    credential: CredentialKind
    roles: frozenset[str] = field(default_factory=frozenset)
    is_admin: bool = False
    account: AccountClaims | None = None

    @property
    def is_service(self) -> bool:
        return self.kind == "service"

    def resolve_user(self, user_id: str) -> str | None:
        """The user a path addresses, or None when this principal may not see that user.

        `me` is the caller itself. An end user may address only itself; a service may address
        any user of its own tenant (the tenant is fixed by the credential, so "its own" holds).
        """
        if user_id == ME:
            return None if self.is_service else self.subject
        if not is_valid_identifier(user_id):
            return None
        if self.is_service or user_id == self.subject:
            return user_id
        return None
