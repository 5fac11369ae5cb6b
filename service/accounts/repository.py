"""SQL for tenants and user accounts; runs inside the tenant-scoped transaction."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from sqlalchemy import Text, bindparam, text
from sqlalchemy.dialects.postgresql import insert as pg_insert

from service.accounts.models import UserAccount
from service.auth.owner import Owner
from service.auth.principal import AccountClaims
from service.db import escaped_literal, fetch_on_driver
from service.kit.repository import TenantRowRepository
from service.kit.types import is_storable_text

ENSURE_TENANT_SQL = text("INSERT INTO tenant (id) VALUES (:tenant_id) ON CONFLICT (id) DO NOTHING")
"""Provision the tenant row on first use; a no-op afterwards."""

STORED_OVERLAY_SQL = (
    "SELECT name, email, avatar, socials FROM user_account"
    " WHERE tenant_id = :tenant_id AND id = :user_id"
)
"""A user's overlay as stored (`AccountRepository.stored_overlay`)."""

KNOWN_OVERLAY = "mneme.known_overlay"
"""The session's `info` key of the overlay its end user's record found or wrote."""

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


_END_USER_CURRENT = """
    SELECT 1 FROM user_account u
     WHERE u.tenant_id = {tenant_id} AND u.id = {user_id}
       AND u.last_seen_at IS NOT NULL AND now() - u.last_seen_at <= {seen_refresh}
       AND (NOT {compare_account}
            OR (u.name, u.email, u.avatar, u.socials)
               IS NOT DISTINCT FROM ({name}, {email}, {avatar}, CAST({socials} AS jsonb)))
"""
"""Whether the end user's row already says what `TOUCH_END_USER_SQL` / `MARK_END_USER_SEEN_SQL`
would write (the same comparisons): a row when it does, none when not. Read without a lock.

Those upserts lock the user's row even when their WHERE leaves it unchanged (ON CONFLICT DO
UPDATE locks every conflicting row), until the transaction ends: every request of one end user
would wait for the user's other requests to commit, and each would be a write transaction.
Read first, the common request (nothing changed, seen within `SEEN_REFRESH`) takes no lock."""

_END_USER_VALUES = (
    "tenant_id",
    "user_id",
    "seen_refresh",
    "compare_account",
    "name",
    "email",
    "avatar",
    "socials",
)

END_USER_CURRENT_SQL = text(
    _END_USER_CURRENT.format(**{key: f":{key}" for key in _END_USER_VALUES})
)
"""`_END_USER_CURRENT` with its values bound."""


def end_user_current_sql(tenant_id: str, user_id: str, account: AccountClaims) -> str | None:
    """`_END_USER_CURRENT` with its values written in as literals, for the query of the
    request's BEGIN (which takes no parameters): its command tag is "SELECT 1" when the row
    already says it, "SELECT 0" when not. None when a value cannot be a literal (a NUL
    character, which Postgres text cannot hold, or text that is not UTF-8): then the bound
    statement asks, and fails as it always did, with the request's own error."""
    values = _end_user_values(tenant_id, user_id, account)
    written = {
        key: values[key] for key in ("tenant_id", "user_id", "name", "email", "avatar", "socials")
    }
    if not all(value is None or is_storable_text(value) for value in written.values()):
        return None
    texts = {
        key: "NULL" if value is None else escaped_literal(value) for key, value in written.items()
    }
    return _END_USER_CURRENT.format(
        **texts,
        seen_refresh=f"interval '{int(SEEN_REFRESH.total_seconds())} seconds'",
        compare_account="true" if values["compare_account"] else "false",
    ).strip()


def _end_user_values(tenant_id: str, user_id: str, account: AccountClaims) -> dict[str, Any]:
    """What recording the end user compares and writes."""
    return {
        "tenant_id": tenant_id,
        "user_id": user_id,
        "name": account.name,
        "email": account.email,
        "avatar": account.avatar,
        "socials": json.dumps(list(account.socials)),
        "seen_refresh": SEEN_REFRESH,
        # The claims-less mark leaves the account columns (and so their values) alone.
        "compare_account": account != AccountClaims(),
    }


ENSURE_USER_SQL = text(
    """
    INSERT INTO user_account (tenant_id, id) VALUES (:tenant_id, :user_id)
    ON CONFLICT (tenant_id, id) DO NOTHING
    """
)
"""Provision a user a service writes for before the user ever signed in."""


TENANT_EXISTS_SQL = text("SELECT 1 FROM tenant WHERE id = :tenant_id")
USER_EXISTS_SQL = text("SELECT 1 FROM user_account WHERE tenant_id = :tenant_id AND id = :user_id")


def tenant_writes_lock_key(tenant_id: str) -> str:
    """The tenant's write lock: what `user_writes_lock_key` is to a user, to the whole tenant.
    Every write to the tenant's data holds it shared, before any other lock it takes (a write
    to a user's data in the same statement as the user's lock, `USER_WRITES_SQL`, so it costs
    no round trip), until its commit; a purge of the tenant holds it alone. The purge waits
    for the writes in flight, and those that come meanwhile wait for it, then find the tenant
    as the purge left it: gone, and made anew by a write that adds something, as by the
    tenant's first write. Without it a write met the purge half-way: a deadlock, a row
    inserted under a tenant or user row the purge had deleted, a job queued after the purge
    dropped the tenant's jobs."""
    return f"tenant_writes:{tenant_id}"


def user_writes_lock_key(tenant_id: str, user_id: str) -> str:
    """The user's write lock. Every write to the user's data holds it shared, taken before its
    first statement that locks, changes or checks-to-write a row of the user (so before any
    other lock it holds but the tenant's, `tenant_writes_lock_key`, taken just before it) and
    kept until its commit; a purge or an import of the user holds it alone. Writes go on side
    by side, and a purge waits for those in flight while those that come meanwhile wait for
    it: each lands wholly before the purge or wholly after, where it finds the user as the
    purge left it. Without it they met half-way: a deadlock, a user row deleted after a write
    ensured it, a row gone under a write's lock."""
    return f"user_writes:{tenant_id}:{user_id}"


USER_WRITES_SQL = text(
    "SELECT pg_advisory_xact_lock_shared(hashtextextended(:tenant_key, 0)),"
    " pg_advisory_xact_lock_shared(hashtextextended(:user_key, 0))"
)
"""Hold the tenant's write lock, then the user's, each as one of their writers (shared), in
one statement (no round trip more than the user's alone). A select list is computed left to
right: every transaction takes the two in the same order, the tenant's first, so none waits
for the tenant's while holding a user's that another waits for (a purge of the user, itself
holding the tenant's that a purge of the tenant waits for: a circle)."""

USER_WRITES_ALONE_SQL = text(
    "SELECT pg_advisory_xact_lock_shared(hashtextextended(:tenant_key, 0)),"
    " pg_advisory_xact_lock(hashtextextended(:user_key, 0))"
)
"""`USER_WRITES_SQL` for a purge or an import of the user: the tenant's write lock as one of
its writers (a purge of the tenant waits for it), the user's alone."""


def user_lock_keys(tenant_id: str, user_id: str) -> dict[str, str]:
    """The parameters of `USER_WRITES_SQL` and `USER_WRITES_ALONE_SQL`."""
    return {
        "tenant_key": tenant_writes_lock_key(tenant_id),
        "user_key": user_writes_lock_key(tenant_id, user_id),
    }


class AccountRepository(TenantRowRepository[UserAccount, str]):
    model = UserAccount

    async def hold_user_writes(self, user_id: str) -> None:
        """Hold the tenant's and the user's write locks as one of their writers (shared,
        `USER_WRITES_SQL`) until the transaction ends. Taken again in the same transaction,
        they wait for nothing."""
        await self._session.execute(USER_WRITES_SQL, user_lock_keys(self._tenant_id, user_id))

    async def hold_tenant_writes(self) -> None:
        """Hold the tenant's write lock as one of its writers (shared, `tenant_writes_lock_key`)
        until the transaction ends: the first lock of a write to the tenant's data that is no
        user's (the organization's memories and profile, API keys, the retention policy)."""
        await self.hold_lock(tenant_writes_lock_key(self._tenant_id), shared=True)

    async def hold_owner_writes(self, *owners: Owner) -> None:
        """Hold the write lock of each user among `owners` (`hold_user_writes`, in id order),
        or the tenant's alone when none is a user (the organization's data): what a write to
        the owners' data takes before its first statement."""
        users = sorted({owner.user_id for owner in owners if owner.user_id is not None})
        if not users:
            await self.hold_tenant_writes()
        for user_id in users:
            await self.hold_user_writes(user_id)

    async def owner_exists(self, owner: Owner) -> bool:
        """Whether the owner is there: the user's account, or for the organization the tenant.
        Every memory needs it (a foreign key); a purge deletes it, and a first write makes it."""
        values = {"tenant_id": self._tenant_id, "user_id": owner.user_id}
        statement = TENANT_EXISTS_SQL if owner.user_id is None else USER_EXISTS_SQL
        return await self._session.scalar(statement, values) is not None

    async def ensure_tenant(self) -> None:
        await self._session.execute(ENSURE_TENANT_SQL, {"tenant_id": self._tenant_id})

    async def ensure_user(self, user_id: str) -> None:
        await self.ensure_tenant()
        await self._session.execute(
            ENSURE_USER_SQL, {"tenant_id": self._tenant_id, "user_id": user_id}
        )

    async def touch_end_user(
        self, user_id: str, account: AccountClaims, *, current: bool | None = None
    ) -> None:
        """Record the end user making the request (and its tenant, on first use); nothing is
        written, or locked, while the row already says it (`_END_USER_CURRENT`; `current`
        when that was asked already, in the query of the transaction's BEGIN)."""
        values = _end_user_values(self._tenant_id, user_id, account)
        if current is None:
            current = await self._session.scalar(END_USER_CURRENT_SQL, values) is not None
        if not current:
            # A write to the user's row: after the user's write lock, as every such write.
            await self.hold_user_writes(user_id)
            await self._session.execute(
                TOUCH_END_USER_SQL if values["compare_account"] else MARK_END_USER_SEEN_SQL,
                values,
            )
        if values["compare_account"]:
            # The row says what the token carries, compared or just written: the transaction's
            # reads of this user's overlay need not read it again (`known_overlay`).
            self._session.info[KNOWN_OVERLAY] = (self._tenant_id, user_id, account)

    def known_overlay(self, user_id: str) -> AccountClaims | None:
        """The user's overlay as this transaction already knows it (its end user's, from the
        token's claims the row was found or made to hold: `touch_end_user`), or None."""
        known = self._session.info.get(KNOWN_OVERLAY)
        if known is None or known[:2] != (self._tenant_id, user_id):
            return None
        claims: AccountClaims = known[2]
        return claims

    async def stored_overlay(self, user_id: str) -> AccountClaims | None:
        """The user's overlay as stored, None for a user Mneme has not seen: on the driver,
        for a profile read and the context block read it on every call."""
        rows = await fetch_on_driver(
            self._session,
            STORED_OVERLAY_SQL,
            [
                bindparam("tenant_id", self._tenant_id, type_=Text()),
                bindparam("user_id", user_id, type_=Text()),
            ],
        )
        if not rows:
            return None
        row = rows[0]
        return stored_claims(row["name"], row["email"], row["avatar"], row["socials"])

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


def stored_claims(
    name: str | None, email: str | None, avatar: str | None, socials: Any
) -> AccountClaims:
    """The overlay a user row holds: its linked providers are the strings of its `socials`."""
    providers = tuple(item for item in socials or [] if isinstance(item, str))
    return AccountClaims(name=name, email=email, avatar=avatar, socials=providers)
