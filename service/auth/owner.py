"""Whose data a request touches: one user's private data, or the tenant's organization data.

Resolved once per request by a dependency (`UserOwner`, `OrgOwner`, `OrgWriter` in
`service.dependencies`), then passed down unchanged: services and repositories never decide
between "a user" and "the organization" from a missing user id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from service.auth.principal import Principal
from service.errors import OrgWriteForbidden

OwnerScope = Literal["user", "org"]


@dataclass(frozen=True)
class Owner:
    """A user of the tenant (`scope="user"`) or the tenant's organization (`scope="org"`)."""

    scope: OwnerScope
    user_id: str | None

    @classmethod
    def user(cls, user_id: str) -> Owner:
        return cls("user", user_id)

    @classmethod
    def org(cls) -> Owner:
        return cls("org", None)

    @property
    def is_org(self) -> bool:
        return self.scope == "org"

    @property
    def key(self) -> str:
        """A stable name for this owner inside its tenant: 'user:<id>' or 'org:' (the
        `owner_key` column of the search's postings and statistics)."""
        return f"{self.scope}:{self.user_id or ''}"

    @property
    def lock_key(self) -> str:
        """The owner's name in advisory locks and log context (its `key`)."""
        return self.key


def authorize_write(principal: Principal, owner: Owner) -> None:
    """Organization data is written only by admins, by their credential's roles; a user's
    data by whoever may address that user (checked when the route resolved it)."""
    if owner.is_org and not principal.is_admin:
        raise OrgWriteForbidden("Only admins (by their token's roles) may write organization data.")
