"""All SQL of the profile domain; every statement runs in the tenant-scoped transaction."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import ARRAY, BindParameter, Select, Text, bindparam, text

from service.auth.owner import Owner
from service.db import fetch_on_driver
from service.kit.repository import TenantRowRepository
from service.profile.models import Profile
from service.profile.schemas import Document

ENSURE_PROFILE_SQL = text(
    """
    INSERT INTO profile (tenant_id, scope, user_id, version)
    VALUES (:tenant_id, :scope, :user_id, 0)
    ON CONFLICT DO NOTHING
    """
)
"""Create the owner's empty profile row so there is a row to lock; a no-op when it exists.
Version 0 is the state a missing row reports, so an ETag read before the row existed still
matches. No conflict target: each scope has its own partial unique index."""

ORG_DOCUMENT_SQL = (
    "SELECT user_id, document FROM profile WHERE tenant_id = :tenant_id AND scope = 'org'"
)
"""The organization's stored document (`uq_profile_org`), as `ProfileRepository.documents`
reads it."""

USER_DOCUMENTS_SQL = (
    "SELECT user_id, document FROM profile"
    " WHERE tenant_id = :tenant_id AND scope = 'user' AND user_id = ANY(:user_ids)"
)
"""Users' stored documents (`uq_profile_user`), as `ProfileRepository.documents` reads them."""


class ProfileRepository(TenantRowRepository[Profile, uuid.UUID]):
    model = Profile

    def _owned(self, owner: Owner) -> Select[Profile]:
        statement = self.scoped(Profile.scope == owner.scope)
        if owner.user_id is not None:
            statement = statement.where(Profile.user_id == owner.user_id)
        return statement

    async def get(self, owner: Owner, *, for_update: bool = False) -> Profile | None:
        """The owner's profile row; with `for_update`, locked until the transaction ends, so
        concurrent writers apply their patches one after another."""
        statement = self._owned(owner)
        if for_update:
            statement = statement.with_for_update()
        # Another statement of this request may have loaded the row before it was locked.
        statement = statement.execution_options(populate_existing=True)
        return (await self._session.execute(statement)).scalar_one_or_none()

    async def documents(self, owners: Sequence[Owner]) -> dict[Owner, Document]:
        """The stored documents of `owners` that have a profile row, in one statement on the
        driver (the context block reads them on every call)."""
        branches = []
        binds: list[BindParameter[Any]] = [bindparam("tenant_id", self._tenant_id, type_=Text())]
        if any(owner.is_org for owner in owners):
            branches.append(ORG_DOCUMENT_SQL)
        users = [owner.user_id for owner in owners if owner.user_id is not None]
        if users:
            branches.append(USER_DOCUMENTS_SQL)
            binds.append(bindparam("user_ids", users, type_=ARRAY(Text())))
        if not branches:
            return {}
        rows = await fetch_on_driver(self._session, " UNION ALL ".join(branches), binds)
        return {
            Owner.org() if row["user_id"] is None else Owner.user(row["user_id"]): row["document"]
            for row in rows
        }

    async def lock_or_create(self, owner: Owner) -> Profile:
        """The owner's profile row, created empty if missing, locked for this transaction."""
        await self._session.execute(
            ENSURE_PROFILE_SQL,
            {"tenant_id": self._tenant_id, "scope": owner.scope, "user_id": owner.user_id},
        )
        profile = await self.get(owner, for_update=True)
        assert profile is not None, "the row was just ensured"
        return profile

    async def save(
        self, profile: Profile, document: dict[str, Any], extracted_keys: list[str]
    ) -> Profile:
        """Store a new document and bump the version. `profile`'s row is held locked
        (`profile` as the lock read it, or as this transaction last wrote it); the change is
        timed (`updated_at`) when it is made (`change_time`): after the profile's last change,
        whichever transaction began first, so `updated_at` never goes back."""
        return await self.update_by_id(
            profile.id,
            {
                "document": document,
                "extracted_keys": extracted_keys,
                "version": Profile.version + 1,
                "updated_at": await self.change_time(profile.updated_at),
            },
        )

    async def save_extracted_keys(self, profile: Profile, extracted_keys: list[str]) -> Profile:
        """Record who set the keys of an unchanged document: the view is the same, so the
        version (and the entity tag) stays."""
        return await self.update_by_id(profile.id, {"extracted_keys": extracted_keys})
