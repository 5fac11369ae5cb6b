"""SQL of the admin domain: the catalogue, users with their counts, purge, export and import,
the audit trail. Every statement runs inside a tenant-scoped transaction; the per-table
statements are built from catalogue names (`plan.quote_identifier`), never from input."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ARRAY, Text, bindparam, text
from sqlalchemy.dialects.postgresql import UUID as PG_UUID
from sqlalchemy.ext.asyncio import AsyncSession

from service.accounts.repository import (
    USER_WRITES_ALONE_SQL,
    tenant_writes_lock_key,
    user_lock_keys,
)
from service.admin.plan import (
    AUDIT_TABLE,
    IDEMPOTENCY_TABLE,
    TENANT_COLUMN,
    CatalogueTable,
    ForeignKey,
    PurgePlan,
    TableRule,
    build_plan,
    quote_identifier,
)
from service.jobs import (
    MEMORY_EXTRACTION_JOB,
    SEARCH_STATISTICS_JOB,
    THREAD_SUMMARY_JOB,
    TURN_MEMORIES_JOB,
)
from service.jobs.sweep import WRITE_PATH_SWEEP_JOB
from service.kit.repository import TenantRepository, rowcount
from service.memories.filters import unexpired

THREAD_TABLE = "thread"
MEMORY_TABLE = "memory"
MEMORY_EVENT_TABLE = "memory_event"
JOBS_TABLE = "pgqueuer"
ORG_PROVENANCE = "memory (org provenance)"
EXPORT_BATCH = 500
USER_JOB_KINDS = (
    MEMORY_EXTRACTION_JOB,
    TURN_MEMORIES_JOB,
    THREAD_SUMMARY_JOB,
    SEARCH_STATISTICS_JOB,
)
"""The kinds of job queued for a user's threads or the user: dropped by the user's purge."""
TENANT_JOB_KINDS = (*USER_JOB_KINDS, WRITE_PATH_SWEEP_JOB)
"""Every kind of job the service queues, each for one tenant (its id in the payload): dropped
by the tenant's purge. The tenant's sweep belongs to no user; left queued, it would name the
purged tenant and outlive a purge whose report says no job is left."""

CATALOGUE_TABLES_SQL = text(
    """
    SELECT c.relname AS name,
           array_agg(a.attname::text ORDER BY a.attnum) AS columns,
           array_agg(format_type(a.atttypid, a.atttypmod) ORDER BY a.attnum) AS types,
           coalesce(array_agg(a.attname::text ORDER BY a.attnum)
                    FILTER (WHERE a.attgenerated <> ''), '{}') AS generated,
           coalesce(array_agg(a.attname::text ORDER BY a.attnum)
                    FILTER (WHERE a.attnotnull), '{}') AS not_null,
           coalesce(array_agg(a.attname::text ORDER BY a.attnum)
                    FILTER (WHERE a.atthasdef AND a.attgenerated = ''), '{}') AS defaulted,
           (SELECT array_agg(k.attname::text ORDER BY x.i)
              FROM pg_constraint p,
                   unnest(p.conkey) WITH ORDINALITY AS x(attnum, i)
                   JOIN pg_attribute k ON k.attrelid = c.oid AND k.attnum = x.attnum
             WHERE p.conrelid = c.oid AND p.contype = 'p') AS primary_key
      FROM pg_class c
      JOIN pg_namespace n ON n.oid = c.relnamespace
      JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
     WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND c.relrowsecurity
     GROUP BY c.oid, c.relname
     ORDER BY c.relname
    """
)
"""Every table of the schema under row-level security: its columns in order with their types,
which of them are generated, never null or have a default, and its primary key."""

CATALOGUE_RULES_SQL = text(
    """
    SELECT t.relname AS table_name, r.name,
           array_agg(a.attname::text ORDER BY a.attnum) AS columns
      FROM (SELECT DISTINCT o.relid, o.name, d.refobjsubid AS attnum
              FROM (SELECT p.conrelid AS relid, p.conname AS name,
                           'pg_constraint'::regclass AS classid, p.oid AS objid
                      FROM pg_constraint p
                     WHERE p.contype IN ('c', 'f', 'u', 'p', 'x')
                    UNION ALL
                    SELECT i.indrelid, x.relname, 'pg_class'::regclass, i.indexrelid
                      FROM pg_index i JOIN pg_class x ON x.oid = i.indexrelid
                     WHERE i.indisunique) o
              JOIN pg_depend d
                ON d.classid = o.classid AND d.objid = o.objid
               AND d.refclassid = 'pg_class'::regclass AND d.refobjid = o.relid
               AND d.refobjsubid > 0) r
      JOIN pg_class t ON t.oid = r.relid
      JOIN pg_namespace n ON n.oid = t.relnamespace
      JOIN pg_attribute a ON a.attrelid = r.relid AND a.attnum = r.attnum
     WHERE n.nspname = current_schema() AND t.relrowsecurity
     GROUP BY t.relname, r.name
    """
)
"""Every constraint (check, foreign key, unique, primary key, exclusion) and every unique index
of the tables under row-level security, with the table's columns each reads (its keys, and
those its expressions and condition name)."""

CATALOGUE_FOREIGN_KEYS_SQL = text(
    """
    SELECT child.relname AS child, parent.relname AS parent,
           (SELECT array_agg(a.attname::text ORDER BY x.i)
              FROM unnest(f.conkey) WITH ORDINALITY AS x(attnum, i)
              JOIN pg_attribute a ON a.attrelid = f.conrelid AND a.attnum = x.attnum) AS columns,
           (SELECT array_agg(a.attname::text ORDER BY x.i)
              FROM unnest(f.confkey) WITH ORDINALITY AS x(attnum, i)
              JOIN pg_attribute a ON a.attrelid = f.confrelid AND a.attnum = x.attnum)
               AS parent_columns
      FROM pg_constraint f
      JOIN pg_class child ON child.oid = f.conrelid
      JOIN pg_class parent ON parent.oid = f.confrelid
      JOIN pg_namespace n ON n.oid = child.relnamespace
     WHERE f.contype = 'f' AND n.nspname = current_schema()
     ORDER BY child.relname, f.conname
    """
)
"""Every foreign key of the schema: child table and columns, parent table and columns."""

USERS_SQL = text(
    """
    WITH page AS (
        SELECT * FROM (
            SELECT u.id, u.name, u.email, u.created_at, u.last_seen_at,
                   greatest(u.last_seen_at, th.last_message_at, newest.created_at)
                       AS last_active_at
              FROM user_account u
              LEFT JOIN LATERAL (
                   SELECT max(last_message_at) AS last_message_at FROM thread
                    WHERE tenant_id = :tenant_id AND user_id = u.id
              ) th ON true
              LEFT JOIN LATERAL (
                   SELECT created_at FROM memory
                    WHERE tenant_id = :tenant_id AND user_id = u.id
                    ORDER BY created_at DESC, id DESC
                    LIMIT 1
              ) newest ON true
             WHERE u.tenant_id = :tenant_id
               AND (CAST(:user_id AS text) IS NULL OR u.id = :user_id)
               AND (CAST(:after_id AS text) IS NULL OR u.id > :after_id)
        ) users
         WHERE (CAST(:active_after AS timestamptz) IS NULL OR last_active_at >= :active_after)
           AND (CAST(:active_before AS timestamptz) IS NULL OR last_active_at < :active_before
                OR last_active_at IS NULL)
         ORDER BY id
         LIMIT :limit
    )
    SELECT p.id, p.name, p.email, p.created_at, p.last_seen_at, p.last_active_at,
           m.semantic, m.episodic, m.procedural,
           coalesce(t.threads, 0) AS threads, coalesce(t.messages, 0) AS messages
      FROM page p
     CROSS JOIN LATERAL (
           SELECT count(*) FILTER (WHERE kind = 'semantic') AS semantic,
                  count(*) FILTER (WHERE kind = 'episodic') AS episodic,
                  count(*) FILTER (WHERE kind = 'procedural') AS procedural
             FROM memory
            WHERE tenant_id = :tenant_id AND user_id = p.id AND UNEXPIRED
     ) m
      LEFT JOIN LATERAL (
           SELECT count(*) AS threads, sum(n.messages) AS messages
             FROM thread th
            CROSS JOIN LATERAL (
                 SELECT count(*) AS messages FROM message
                  WHERE tenant_id = :tenant_id AND thread_id = th.id
            ) n
            WHERE th.tenant_id = :tenant_id AND th.user_id = p.id
     ) t ON true
     ORDER BY p.id
    """.replace("UNEXPIRED", unexpired("memory"))
)
"""The tenant's users in id order after `after_id` (or just `user_id`), each with its memories
by kind, threads, messages, creation and last activity (the latest of its last request, last
message and newest memory), filtered by last activity: a user never active (no request, message
or memory: one a service created) is inactive since any time, so `active_before` lists it and
`active_after` does not.

Each user's last activity is read from the newest entry of three indexes (its row, its threads,
its memories newest first), so the activity filter costs the tenant's users, not their
memories; the counts, which read each of a user's memories, are taken for the page's users
alone, and leave out memories whose `expires_at` has passed (gone for every reader, though not
yet swept). A memory's last change (`updated_at`, in no index: an index of it would
make every update of a memory write every index) is not activity: a change is made by a request
(`last_seen_at`) or after a message, or it is a new memory.

Every table is named with the tenant as a value, not through another table's column: a Citus
coordinator routes the whole statement to the tenant's shards only when each table's
distribution column is compared with the same value."""

IDS_AMONG_SQL = "SELECT id FROM {table} WHERE tenant_id = :tenant_id AND id = ANY(:ids)"
"""Which of `ids` are rows of the tenant in `{table}` (a table whose key is `(tenant_id, id)`)."""

THREAD_JOBS_PREDICATE = """
    entrypoint = ANY(:kinds)
    AND convert_from(payload, 'UTF8')::jsonb ->> 'tenant_id' = :tenant_id
    AND (convert_from(payload, 'UTF8')::jsonb ->> 'thread_id' = ANY(:thread_ids)
         OR convert_from(payload, 'UTF8')::jsonb ->> 'user_id' = :user_id)
"""

DELETE_USER_JOBS_SQL = text(
    f"DELETE FROM pgqueuer WHERE {THREAD_JOBS_PREDICATE}"  # noqa: S608 - a constant predicate
).bindparams(bindparam("kinds", type_=ARRAY(Text)), bindparam("thread_ids", type_=ARRAY(Text)))
"""Drop the jobs for the user's threads (or the user), waiting or running. pgqueuer's table is
shared by all tenants, so the tenant is matched in the payload. A job's run in progress goes
on, finds the thread gone and writes nothing; dropped, the job cannot be queued again by that
run's retry, after the purge (its end changes nothing of a job that is gone, see
`service.jobs.queue.JobQueries`)."""

COUNT_USER_JOBS_SQL = text(
    f"SELECT count(*) FROM pgqueuer WHERE {THREAD_JOBS_PREDICATE}"  # noqa: S608
).bindparams(bindparam("kinds", type_=ARRAY(Text)), bindparam("thread_ids", type_=ARRAY(Text)))

TENANT_JOBS_PREDICATE = """
    entrypoint = ANY(:kinds)
    AND convert_from(payload, 'UTF8')::jsonb ->> 'tenant_id' = :tenant_id
"""
"""The tenant's jobs of `kinds`, waiting or running; pgqueuer's table is shared by all tenants,
so the tenant is matched in the payload."""

DELETE_TENANT_JOBS_SQL = text(
    f"DELETE FROM pgqueuer WHERE {TENANT_JOBS_PREDICATE}"  # noqa: S608 - a constant predicate
).bindparams(bindparam("kinds", type_=ARRAY(Text)))
"""Drop the tenant's jobs, waiting or running (as `DELETE_USER_JOBS_SQL` does the user's)."""

COUNT_TENANT_JOBS_SQL = text(
    f"SELECT count(*) FROM pgqueuer WHERE {TENANT_JOBS_PREDICATE}"  # noqa: S608
).bindparams(bindparam("kinds", type_=ARRAY(Text)))

ORG_PROVENANCE_PREDICATE = """
    tenant_id = :tenant_id AND scope = 'org'
    AND (source_thread_id = ANY(:thread_ids) OR source_message_ids && :message_ids)
"""

LOCK_ORG_PROVENANCE_SQL = text(
    f"SELECT updated_at FROM memory WHERE {ORG_PROVENANCE_PREDICATE} FOR UPDATE"  # noqa: S608 - constant predicate
)
"""The last change of each organization memory `REDACT_ORG_PROVENANCE_SQL` changes, the memory
locked until the transaction ends: the redaction is timed after them (`change_time`)."""

REDACT_ORG_PROVENANCE_SQL = text(
    "UPDATE memory SET source_thread_id = NULL, source_message_ids = '{}', evidence = NULL, "  # noqa: S608 - constant predicate
    f"speaker = NULL, updated_at = :at WHERE {ORG_PROVENANCE_PREDICATE}"
)
"""Organization memories written from the user's conversations stay (they belong to the
organization) but lose the pointers to the user's messages, the quoted evidence and who said
it. `at`: when, as `change_time` reads it once their locks are held (`LOCK_ORG_PROVENANCE_SQL`):
a change an administrator made to one while the purge waited for its user's writes comes
before the redaction, and the memory's `updated_at` does not go back."""

COUNT_ORG_PROVENANCE_SQL = text(
    f"SELECT count(*) FROM memory WHERE {ORG_PROVENANCE_PREDICATE}"  # noqa: S608
)

USER_MESSAGE_IDS_SQL = text("SELECT id FROM message WHERE tenant_id = :tenant_id AND user_id = :u")

LOCK_USER_THREADS_SQL = text(
    "SELECT id FROM thread WHERE tenant_id = :tenant_id AND user_id = :u ORDER BY id FOR UPDATE"
)
"""Lock the user's threads as their deletion does, in id order (the order a memory's source
check takes them in: `memories.repository.CITABLE_THREADS_SQL`)."""

IDEMPOTENCY_PREDICATE = """
    tenant_id = :tenant_id
    AND (principal = :principal OR path = :user_path
         OR left(path, char_length(:user_prefix)) = :user_prefix)
"""
"""A user's idempotency records: those of the user's own requests, and those of any caller's
requests under the user's path (their stored responses carry the user's data)."""

AUDIT_PREDICATE = """
    tenant_id = :tenant_id AND action NOT LIKE 'admin.%'
    AND ((target_type IN ('user', 'profile') AND target_id = :user_id)
         OR detail ->> 'user_id' = :user_id)
"""
"""Audit entries about the user's data: account overlay and profile changes (with their
before/after values) and write-path passes and failures on the user's threads. Entries of
admin actions (`admin.*`) carry ids and counts only and are kept."""

AUDIT_PAGE_SQL = text(
    """
    SELECT id, actor_kind, actor_id, action, target_type, target_id, detail, request_id,
           created_at
      FROM audit_log
     WHERE tenant_id = :tenant_id
       AND (CAST(:actor_id AS text) IS NULL OR actor_id = :actor_id)
       AND (CAST(:action AS text) IS NULL OR action = :action
            OR (right(:action, 1) = '.' AND left(action, char_length(:action)) = :action))
       AND (CAST(:target_type AS text) IS NULL OR target_type = :target_type)
       AND (CAST(:target_id AS text) IS NULL OR target_id = :target_id)
       AND (CAST(:since AS timestamptz) IS NULL OR created_at >= :since)
       AND (CAST(:until AS timestamptz) IS NULL OR created_at < :until)
       AND (CAST(:before_at AS timestamptz) IS NULL
            OR (created_at, id) < (:before_at, CAST(:before_id AS uuid)))
     ORDER BY created_at DESC, id DESC
     LIMIT :limit
    """
)
"""The tenant's audit entries newest first, after the keyset position, filtered by actor,
action (exactly, or every action under a prefix ending in `.`), target and time."""


RETENTION_WRITES_SQL = text(
    "SELECT pg_advisory_xact_lock_shared(hashtextextended(:tenant_key, 0)),"
    " pg_advisory_xact_lock(hashtextextended(:retention_key, 0))"
)
"""Hold the tenant's write lock as one of its writers, then the retention policy's alone, in
one statement (left to right, the tenant's first, as every write takes it:
`accounts.repository.USER_WRITES_SQL`)."""

READ_RETENTION_SQL = text(
    "SELECT episodic_days, messages_days, summaries_days FROM retention_policy "
    "WHERE tenant_id = :tenant_id"
)

SET_RETENTION_SQL = text(
    """
    INSERT INTO retention_policy
           (tenant_id, episodic_days, messages_days, summaries_days, updated_at)
    VALUES (:tenant_id, :episodic_days, :messages_days, :summaries_days, now())
    ON CONFLICT (tenant_id) DO UPDATE
       SET episodic_days = EXCLUDED.episodic_days, messages_days = EXCLUDED.messages_days,
           summaries_days = EXCLUDED.summaries_days, updated_at = EXCLUDED.updated_at
    """
)
"""Replace the tenant's retention policy (creating it on first use). The clock is read in VALUES
and taken from EXCLUDED: Citus refuses a DO UPDATE SET that calls a non-immutable function."""


@dataclass(frozen=True, slots=True)
class UserRow:
    id: str
    name: str | None
    email: str | None
    created_at: datetime
    last_seen_at: datetime | None
    last_active_at: datetime | None
    semantic: int
    episodic: int
    procedural: int
    threads: int
    messages: int


@dataclass(frozen=True, slots=True)
class UserScope:
    """The keys a user's rows are found by: its id, and the keys of its rows in the tables
    that `parent` rules point at (read once, before anything is deleted)."""

    tenant_id: str
    user_id: str
    parent_keys: Mapping[str, list[Any]]
    message_ids: list[uuid.UUID]

    @property
    def thread_ids(self) -> list[str]:
        return [str(key) for key in self.parent_keys.get(THREAD_TABLE, [])]


def _rule_predicate(rule: TableRule) -> str:
    column = quote_identifier(rule.column)
    if rule.kind == "parent":
        key_type = rule.table.column_types[rule.column]
        return f"{column} = ANY(CAST(:parent_keys AS {key_type}[]))"
    return f"{column} = :user_id"


def _rule_params(rule: TableRule, scope: UserScope) -> dict[str, Any]:
    params: dict[str, Any] = {"tenant_id": scope.tenant_id, "user_id": scope.user_id}
    if rule.parent is not None:
        params["parent_keys"] = scope.parent_keys.get(rule.parent, [])
    return params


def _special_params(scope: UserScope) -> dict[str, Any]:
    return {
        "tenant_id": scope.tenant_id,
        "user_id": scope.user_id,
        "principal": f"user:{scope.user_id}",
        "user_path": f"/v1/users/{scope.user_id}",
        "user_prefix": f"/v1/users/{scope.user_id}/",
    }


SPECIAL_PREDICATES = {IDEMPOTENCY_TABLE: IDEMPOTENCY_PREDICATE, AUDIT_TABLE: AUDIT_PREDICATE}

EXPORT_PREDICATES: Mapping[str, str] = {
    MEMORY_TABLE: unexpired("t"),
    MEMORY_EVENT_TABLE: (
        "NOT EXISTS (SELECT 1 FROM memory m WHERE m.tenant_id = t.tenant_id"  # noqa: S608 - constant
        f" AND m.id = t.memory_id AND NOT {unexpired('m')})"
    ),
}
"""Which of a user's rows (of `<table> AS t`) an export carries, for the tables where that is
not all of them: a memory whose `expires_at` has passed is gone for every reader, so it and its
history are left out before the retention sweep removes them (as the sweep does: together).
Purge still reaches every row."""


def _export_predicate(rule: TableRule) -> str:
    extra = EXPORT_PREDICATES.get(rule.name)
    return _rule_predicate(rule) if extra is None else f"{_rule_predicate(rule)} AND {extra}"


class AdminRepository(TenantRepository):
    @property
    def session(self) -> AsyncSession:
        return self._session

    # --- catalogue ---------------------------------------------------------------------------

    async def catalogue(self) -> list[CatalogueTable]:
        keys: dict[str, list[ForeignKey]] = {}
        for row in await self._session.execute(CATALOGUE_FOREIGN_KEYS_SQL):
            keys.setdefault(row.child, []).append(
                ForeignKey(tuple(row.columns), row.parent, tuple(row.parent_columns))
            )
        rules: dict[str, dict[str, tuple[str, ...]]] = {}
        for row in await self._session.execute(CATALOGUE_RULES_SQL):
            rules.setdefault(row.table_name, {})[row.name] = tuple(row.columns)
        return [
            CatalogueTable(
                name=row.name,
                columns=tuple(row.columns),
                column_types=dict(zip(row.columns, row.types, strict=True)),
                generated=frozenset(row.generated),
                primary_key=tuple(row.primary_key or ()),
                foreign_keys=tuple(keys.get(row.name, ())),
                not_null=frozenset(row.not_null),
                defaulted=frozenset(row.defaulted),
                rules=rules.get(row.name, {}),
            )
            for row in await self._session.execute(CATALOGUE_TABLES_SQL)
        ]

    async def plan(self) -> PurgePlan:
        return build_plan(await self.catalogue())

    # --- users -------------------------------------------------------------------------------

    async def users(
        self,
        *,
        user_id: str | None = None,
        after_id: str | None = None,
        active_after: datetime | None = None,
        active_before: datetime | None = None,
        limit: int = 1,
    ) -> list[UserRow]:
        rows = await self._session.execute(
            USERS_SQL,
            {
                "tenant_id": self._tenant_id,
                "user_id": user_id,
                "after_id": after_id,
                "active_after": active_after,
                "active_before": active_before,
                "limit": limit,
            },
        )
        return [UserRow(**row._asdict()) for row in rows]

    # --- purge -------------------------------------------------------------------------------

    async def lock_user_writes(self, user_id: str) -> None:
        """Hold the user's write lock alone (`user_writes_lock_key`) until the transaction
        ends, after the tenant's as one of its writers (`USER_WRITES_ALONE_SQL`): every write
        to the user's data in flight (a request's, a write-path pass's) commits first, and
        those that come meanwhile wait, then find the user as this transaction leaves it."""
        await self._session.execute(USER_WRITES_ALONE_SQL, user_lock_keys(self._tenant_id, user_id))

    async def lock_tenant_writes(self) -> None:
        """Hold the tenant's write lock alone (`tenant_writes_lock_key`) until the transaction
        ends: every write to the tenant's data in flight (to any user's, to the
        organization's, a purge or an import of a user) commits first, and those that come
        meanwhile wait, then find the tenant as this transaction leaves it."""
        await self.hold_lock(tenant_writes_lock_key(self._tenant_id))

    async def lock_user_threads(self, user_id: str) -> None:
        """Hold the user's threads for their deletion before anything of the user is read. An
        organization memory citing one of them (its source check holds the thread until it
        commits) is then committed before the purge reads what to redact, and one written
        later waits for the purge and finds no thread: none keeps pointing at a purged
        conversation. (The user's own writes wait on the user's write lock already.)"""
        await self._session.execute(
            LOCK_USER_THREADS_SQL, {"tenant_id": self._tenant_id, "u": user_id}
        )

    async def user_scope(self, plan: PurgePlan, user_id: str) -> UserScope:
        """The user's parent keys and message ids, as they are now."""
        base = UserScope(self._tenant_id, user_id, {}, [])
        parent_keys: dict[str, list[Any]] = {}
        for parent in plan.parents:
            rule = plan.rule(parent)
            statement = text(
                f"SELECT {quote_identifier(_key_of(plan, rule))} FROM {quote_identifier(parent)} "  # noqa: S608 - catalogue names
                f"WHERE tenant_id = :tenant_id AND {_rule_predicate(rule)}"
            )
            result = await self._session.execute(statement, _rule_params(rule, base))
            parent_keys[parent] = list(result.scalars())
        message_ids = list(
            (
                await self._session.execute(
                    USER_MESSAGE_IDS_SQL, {"tenant_id": self._tenant_id, "u": user_id}
                )
            ).scalars()
        )
        return UserScope(self._tenant_id, user_id, parent_keys, message_ids)

    async def delete_rows(self, rule: TableRule, scope: UserScope) -> int:
        statement = text(
            f"DELETE FROM {quote_identifier(rule.name)} "  # noqa: S608 - catalogue names
            f"WHERE tenant_id = :tenant_id AND {_rule_predicate(rule)}"
        )
        result = await self._session.execute(statement, _rule_params(rule, scope))
        return rowcount(result)

    async def count_rows(self, rule: TableRule, scope: UserScope) -> int:
        statement = text(
            f"SELECT count(*) FROM {quote_identifier(rule.name)} "  # noqa: S608 - catalogue names
            f"WHERE tenant_id = :tenant_id AND {_rule_predicate(rule)}"
        )
        return int((await self._session.execute(statement, _rule_params(rule, scope))).scalar_one())

    async def count_exported(self, rule: TableRule, scope: UserScope) -> int:
        """How many records `stream_records` gives for the user's rows of one table."""
        statement = text(
            f"SELECT count(*) FROM {quote_identifier(rule.name)} t "  # noqa: S608 - catalogue names
            f"WHERE tenant_id = :tenant_id AND {_export_predicate(rule)}"
        )
        return int((await self._session.execute(statement, _rule_params(rule, scope))).scalar_one())

    async def delete_special(self, table: str, scope: UserScope) -> int:
        statement = text(
            f"DELETE FROM {quote_identifier(table)} WHERE {SPECIAL_PREDICATES[table]}"  # noqa: S608
        )
        result = await self._session.execute(statement, _special_params(scope))
        return rowcount(result)

    async def count_special(self, table: str, scope: UserScope) -> int:
        statement = text(
            f"SELECT count(*) FROM {quote_identifier(table)} WHERE {SPECIAL_PREDICATES[table]}"  # noqa: S608
        )
        return int((await self._session.execute(statement, _special_params(scope))).scalar_one())

    async def delete_user_jobs(self, scope: UserScope) -> int:
        result = await self._session.execute(DELETE_USER_JOBS_SQL, self._jobs_params(scope))
        return rowcount(result)

    async def count_user_jobs(self, scope: UserScope) -> int:
        result = await self._session.execute(COUNT_USER_JOBS_SQL, self._jobs_params(scope))
        return int(result.scalar_one())

    def _jobs_params(self, scope: UserScope) -> dict[str, Any]:
        return {
            "kinds": list(USER_JOB_KINDS),
            "tenant_id": scope.tenant_id,
            "thread_ids": scope.thread_ids,
            "user_id": scope.user_id,
        }

    async def ids_among(self, table: str, ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
        statement = text(IDS_AMONG_SQL.format(table=quote_identifier(table))).bindparams(
            bindparam("ids", type_=ARRAY(PG_UUID(as_uuid=True)))
        )
        result = await self._session.execute(
            statement, {"tenant_id": self._tenant_id, "ids": list(ids)}
        )
        return set(result.scalars())

    async def redact_org_provenance(self, scope: UserScope) -> int:
        params = _provenance_params(scope)
        changed = list((await self._session.execute(LOCK_ORG_PROVENANCE_SQL, params)).scalars())
        if not changed:
            return 0
        at = await self.change_time(max(changed))
        result = await self._session.execute(REDACT_ORG_PROVENANCE_SQL, {**params, "at": at})
        return rowcount(result)

    async def count_org_provenance(self, scope: UserScope) -> int:
        result = await self._session.execute(COUNT_ORG_PROVENANCE_SQL, _provenance_params(scope))
        return int(result.scalar_one())

    # --- tenant purge ------------------------------------------------------------------------

    async def delete_tenant_rows(self, table: CatalogueTable) -> int:
        column = "id" if TENANT_COLUMN not in table.columns else TENANT_COLUMN
        statement = text(
            f"DELETE FROM {quote_identifier(table.name)} "  # noqa: S608 - catalogue names
            f"WHERE {quote_identifier(column)} = :tenant_id"
        )
        result = await self._session.execute(statement, {"tenant_id": self._tenant_id})
        return rowcount(result)

    async def count_tenant_rows(self, table: CatalogueTable) -> int:
        column = "id" if TENANT_COLUMN not in table.columns else TENANT_COLUMN
        statement = text(
            f"SELECT count(*) FROM {quote_identifier(table.name)} "  # noqa: S608 - catalogue names
            f"WHERE {quote_identifier(column)} = :tenant_id"
        )
        return int(
            (await self._session.execute(statement, {"tenant_id": self._tenant_id})).scalar_one()
        )

    async def delete_tenant_jobs(self) -> int:
        result = await self._session.execute(
            DELETE_TENANT_JOBS_SQL, {"kinds": list(TENANT_JOB_KINDS), "tenant_id": self._tenant_id}
        )
        return rowcount(result)

    async def count_tenant_jobs(self) -> int:
        result = await self._session.execute(
            COUNT_TENANT_JOBS_SQL, {"kinds": list(TENANT_JOB_KINDS), "tenant_id": self._tenant_id}
        )
        return int(result.scalar_one())

    # --- export and import -------------------------------------------------------------------

    async def stream_records(self, rule: TableRule, scope: UserScope) -> AsyncIterator[str]:
        """The user's rows of one table as export records (see `_stream`), but those
        `EXPORT_PREDICATES` leaves out."""
        async for record in self._stream(
            rule.table, _export_predicate(rule), _rule_params(rule, scope)
        ):
            yield record

    async def stream_audit(self, table: CatalogueTable, scope: UserScope) -> AsyncIterator[str]:
        """The audit entries about the user's data (see `AUDIT_PREDICATE`) as export records."""
        async for record in self._stream(table, AUDIT_PREDICATE, _special_params(scope)):
            yield record

    async def _stream(
        self, table: CatalogueTable, predicate: str, params: Mapping[str, Any]
    ) -> AsyncIterator[str]:
        """`{"type": <table>, "data": <row>}` as JSON text per row, built by the database:
        every column but the generated ones (the database computes them), in primary-key
        order, read through a server-side cursor so memory stays flat however many rows."""
        generated = "".join(f" - {_literal(c)}" for c in sorted(table.generated))
        order = ", ".join(quote_identifier(c) for c in table.primary_key)
        statement = text(
            "SELECT jsonb_build_object('type', CAST(:record_type AS text), "  # noqa: S608 - catalogue names
            f"'data', to_jsonb(t){generated})::text AS record "
            f"FROM {quote_identifier(table.name)} t "
            f"WHERE tenant_id = :tenant_id AND {predicate} ORDER BY {order}"
        )
        result = await self._session.stream(
            statement.execution_options(yield_per=EXPORT_BATCH),
            {**params, "record_type": table.name},
        )
        async for row in result:
            yield str(row.record)

    async def insert_rows(self, table: CatalogueTable, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert exported rows (all with the first row's columns) as they were: ids and
        timestamps kept; the database recomputes generated columns.

        Two statements: `jsonb_populate_recordset` reads the records into the table's own types
        and hands back each value's text form, which a multi-row `INSERT … VALUES` casts back to
        the column's type. A single `INSERT … SELECT … FROM jsonb_populate_recordset(…)` is not
        used because Citus moves the rows of an INSERT whose source is not a distributed table
        into the shards with COPY, which row-level security refuses."""
        columns = [c for c in table.columns if c not in table.generated and c in rows[0]]
        names = ", ".join(quote_identifier(c) for c in columns)
        as_text = ", ".join(f"CAST({quote_identifier(c)} AS text)" for c in columns)
        typed = await self._session.execute(
            text(
                f"SELECT {as_text} FROM jsonb_populate_recordset("  # noqa: S608 - catalogue names
                f"NULL::{quote_identifier(table.name)}, CAST(:rows AS jsonb))"
            ),
            {"rows": json.dumps([dict(r) for r in rows])},
        )
        params: dict[str, str | None] = {}
        tuples = []
        for row_number, values in enumerate(typed):
            cells = []
            for column_number, (column, value) in enumerate(zip(columns, values, strict=True)):
                name = f"v{row_number}_{column_number}"
                params[name] = value
                # The parameter is sent as text; Postgres, not the driver, converts it.
                cells.append(f"CAST(CAST(:{name} AS text) AS {table.column_types[column]})")
            tuples.append(f"({', '.join(cells)})")
        await self._session.execute(
            text(
                f"INSERT INTO {quote_identifier(table.name)} ({names}) "  # noqa: S608 - catalogue names and types
                f"VALUES {', '.join(tuples)}"
            ),
            params,
        )

    # --- retention ---------------------------------------------------------------------------

    async def retention(self) -> dict[str, int | None]:
        row = (
            await self._session.execute(READ_RETENTION_SQL, {"tenant_id": self._tenant_id})
        ).first()
        if row is None:
            return {"episodic_days": None, "messages_days": None, "summaries_days": None}
        return dict(row._asdict())

    async def lock_retention(self) -> None:
        """Hold the tenant's retention policy until the transaction ends, so that of two
        conditional writers (`If-Match`) only the first sees the state it names, even before
        the policy's row exists; after the tenant's write lock, as one of its writers
        (`RETENTION_WRITES_SQL`)."""
        await self._session.execute(
            RETENTION_WRITES_SQL,
            {
                "tenant_key": tenant_writes_lock_key(self._tenant_id),
                "retention_key": f"retention:{self._tenant_id}",
            },
        )

    async def set_retention(self, values: Mapping[str, int | None]) -> None:
        await self._session.execute(SET_RETENTION_SQL, {"tenant_id": self._tenant_id, **values})

    # --- audit -------------------------------------------------------------------------------

    async def audit_page(
        self,
        *,
        actor_id: str | None,
        action: str | None,
        target_type: str | None,
        target_id: str | None,
        since: datetime | None,
        until: datetime | None,
        before: tuple[datetime, uuid.UUID] | None,
        limit: int,
    ) -> Sequence[Any]:
        rows = await self._session.execute(
            AUDIT_PAGE_SQL,
            {
                "tenant_id": self._tenant_id,
                "actor_id": actor_id,
                "action": action,
                "target_type": target_type,
                "target_id": target_id,
                "since": since,
                "until": until,
                "before_at": before[0] if before else None,
                "before_id": before[1] if before else None,
                "limit": limit,
            },
        )
        return rows.all()


def _key_of(plan: PurgePlan, parent_rule: TableRule) -> str:
    """The key column `parent` rules reference in this parent table."""
    keys = {r.parent_key for r in plan.rules if r.parent == parent_rule.name}
    if len(keys) != 1:
        raise RuntimeError(f"tables reference {parent_rule.name} by different keys: {keys}")
    key = keys.pop()
    assert key is not None
    return key


def _provenance_params(scope: UserScope) -> dict[str, Any]:
    return {
        "tenant_id": scope.tenant_id,
        "thread_ids": [uuid.UUID(t) for t in scope.thread_ids],
        "message_ids": scope.message_ids,
    }


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"
