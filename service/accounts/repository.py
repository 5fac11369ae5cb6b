"""SQL for tenants and user accounts; runs inside the tenant-scoped transaction."""

from __future__ import annotations

import json
from datetime import timedelta

from sqlalchemy import text
from sqlalchemy.dialects.postgresql import insert as pg_insert

from service.accounts.models import UserAccount
from service.auth.principal import AccountClaims
from service.kit.repository import TenantRowRepository

ENSURE_TENANT_SQL = text("INSERT INTO tenant (id) VALUES (:tenant_id) ON CONFLICT (id) DO NOTHING")
"""Provision the tenant row on first use; a no-op afterwards."""

SEEN_REFRESH = timedelta(minutes=5)
"""How old an end user's last-seen mark may grow before a request writes it again (bound as
`:seen_refresh` in every statement that applies it): steady traffic does not rewrite the row."""

TOUCH_END_USER_SQL = text(
    """
    WITH tenant_row AS (
        INSERT INTO tenant (id) VALUES (:tenant_id) ON CONFLICT (id) DO NOTHING
    )
    INSERT INTO user_account AS u (tenant_id, id, name, email, avatar, socials, last_seen_at)
    VALUES (:tenant_id, :user_id, :name, :email, :avatar, CAST(:socials AS jsonb), now())
    ON CONFLICT (tenant_id, id) DO UPDATE
       SET name = EXCLUDED.name, email = EXCLUDED.email, avatar = EXCLUDED.avatar,
           socials = EXCLUDED.socials,
           updated_at = CASE WHEN (u.name, u.email, u.avatar, u.socials)
                                  IS DISTINCT FROM
                                  (EXCLUDED.name, EXCLUDED.email, EXCLUDED.avatar, EXCLUDED.socials)
                             THEN EXCLUDED.last_seen_at ELSE u.updated_at END,
           last_seen_at = EXCLUDED.last_seen_at
     WHERE (u.name, u.email, u.avatar, u.socials)
               IS DISTINCT FROM (EXCLUDED.name, EXCLUDED.email, EXCLUDED.avatar, EXCLUDED.socials)
        OR u.last_seen_at IS NULL
        OR EXCLUDED.last_seen_at - u.last_seen_at > :seen_refresh
    """
)
"""Record an end user and its auth overlay. Writes only when something changed or the
last-seen mark is older than `SEEN_REFRESH`.

The tenant is provisioned in the same statement (`tenant_row`; one round trip per request, not
two): the user row's foreign key is checked once the whole statement has run, so it sees the
tenant row the CTE inserted.

The clock is read once, in VALUES: Citus refuses non-immutable functions (`now()`, even
`timestamptz - interval`) in the DO UPDATE clauses of a distributed table."""

MARK_END_USER_SEEN_SQL = text(
    """
    WITH tenant_row AS (
        INSERT INTO tenant (id) VALUES (:tenant_id) ON CONFLICT (id) DO NOTHING
    )
    INSERT INTO user_account AS u (tenant_id, id, last_seen_at)
    VALUES (:tenant_id, :user_id, now())
    ON CONFLICT (tenant_id, id) DO UPDATE
       SET last_seen_at = EXCLUDED.last_seen_at
     WHERE u.last_seen_at IS NULL OR EXCLUDED.last_seen_at - u.last_seen_at > :seen_refresh
    """
)
"""Record an end user whose token carries no account claims at all (and its tenant, as
`TOUCH_END_USER_SQL` does). Its overlay (perhaps set by a service) stays as it is; the
last-seen mark is refreshed at most every `SEEN_REFRESH`."""


END_USER_CURRENT_SQL = text(
    """
    SELECT u.last_seen_at IS NOT NULL
           AND now() - u.last_seen_at <= :seen_refresh
           AND (NOT :compare_account
                OR (u.name, u.email, u.avatar, u.socials)
                   IS NOT DISTINCT FROM (:name, :email, :avatar, CAST(:socials AS jsonb)))
      FROM user_account u
     WHERE u.tenant_id = :tenant_id AND u.id = :user_id
    """
)
"""Whether the end user's row already says what `TOUCH_END_USER_SQL` / `MARK_END_USER_SEEN_SQL`
would write (the same comparisons), read without a lock.

Those upserts lock the user's row even when their WHERE leaves it unchanged (ON CONFLICT DO
UPDATE locks every conflicting row), until the transaction ends: every request of one end user
would wait for the user's other requests to commit, and each would be a write transaction.
Read first, the common request (nothing changed, seen within `SEEN_REFRESH`) takes no lock."""


ENSURE_USER_SQL = text(
    """
    INSERT INTO user_account (tenant_id, id) VALUES (:tenant_id, :user_id)
    ON CONFLICT (tenant_id, id) DO NOTHING
    """
)
"""Provision a user a service writes for before the user ever signed in."""


class AccountRepository(TenantRowRepository[UserAccount, str]):
    model = UserAccount

    async def ensure_tenant(self) -> None:
        await self._session.execute(ENSURE_TENANT_SQL, {"tenant_id": self._tenant_id})

    async def ensure_user(self, user_id: str) -> None:
        await self.ensure_tenant()
        await self._session.execute(
            ENSURE_USER_SQL, {"tenant_id": self._tenant_id, "user_id": user_id}
        )

    async def touch_end_user(self, user_id: str, account: AccountClaims) -> None:
        """Record the end user making the request (and its tenant, on first use); nothing is
        written, or locked, while the row already says it (`END_USER_CURRENT_SQL`)."""
        with_account = account != AccountClaims()
        values = {
            "tenant_id": self._tenant_id,
            "user_id": user_id,
            "name": account.name,
            "email": account.email,
            "avatar": account.avatar,
            "socials": json.dumps(list(account.socials)),
            "seen_refresh": SEEN_REFRESH,
        }
        current = await self._session.scalar(
            END_USER_CURRENT_SQL, {**values, "compare_account": with_account}
        )
        if current:
            return
        # The claims-less mark leaves the account columns (and so their values) alone.
        await self._session.execute(
            TOUCH_END_USER_SQL if with_account else MARK_END_USER_SEEN_SQL, values
        )

    async def get_user(self, user_id: str, *, for_update: bool = False) -> UserAccount | None:
        return await self.get_by_id(user_id, for_update=for_update)

    async def set_overlay(self, user_id: str, account: AccountClaims) -> UserAccount:
        """Create the user with this overlay, or replace the overlay it has."""
        values = {
            "name": account.name,
            "email": account.email,
            "avatar": account.avatar,
            "socials": list(account.socials),
        }
        inserted = pg_insert(UserAccount).values(tenant_id=self._tenant_id, id=user_id, **values)
        statement = (
            inserted.on_conflict_do_update(
                index_elements=[UserAccount.tenant_id, UserAccount.id],
                # The column default (the clock, read in VALUES): Citus refuses now() here.
                set_={**values, "updated_at": inserted.excluded.updated_at},
            )
            .returning(UserAccount)
            # The row may already sit in the identity map: refresh it from what was written.
            .execution_options(populate_existing=True)
        )
        return (await self._session.execute(statement)).scalar_one()
