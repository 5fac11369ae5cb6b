"""Admin use cases: the tenant's users, purge with proof, export and import, the audit trail.

Purge and export are the two use cases here that run their own transactions rather than the
request's: a purge's proof is a count taken *after* its commit, in a new transaction, and an
export streams after the request's handler returned, from one consistent snapshot
(REPEATABLE READ). Both are also run by the `mneme admin` commands, which have no
request.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from pydantic import BaseModel, Field, TypeAdapter, ValidationError
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from service.accounts.overlay import AccountOverlayUpdate
from service.accounts.repository import AccountRepository
from service.admin.errors import ConfirmationMismatch, ImportLineInvalid, UserNotEmpty
from service.admin.import_secrets import refuse_record_secrets
from service.admin.plan import (
    ACCOUNT_TABLE,
    AUDIT_TABLE,
    TENANT_COLUMN,
    CatalogueTable,
    PurgePlan,
    TableRule,
    children_first,
)
from service.admin.repository import (
    JOBS_TABLE,
    MEMORY_TABLE,
    ORG_PROVENANCE,
    THREAD_TABLE,
    AdminRepository,
    UserRow,
    UserScope,
)
from service.admin.schemas import (
    AuditEntryRead,
    ImportReport,
    MemoryCounts,
    PurgeReport,
    RetentionPolicy,
    UserOverview,
)
from service.audit.service import AuditTrail
from service.auth.owner import OwnerScope
from service.auth.principal import Principal
from service.db import set_tenant, tenant_transaction
from service.errors import NotFound
from service.extraction.repository import (
    FAILURE_ACTION,
    PASS_ACTION,
    REQUEUE_ACTION,
    SYSTEM_ACTOR_KIND,
    THREAD_TARGET,
)
from service.kit.pagination import (
    Page,
    decode_identifier_cursor,
    decode_newest_first_cursor,
    encode_cursor,
    newest_first_cursor,
)
from service.kit.resource_headers import (
    Tagged,
    entity_tag,
    require_preconditions,
)
from service.kit.types import (
    INT64_MAX,
    InputRefused,
    JsonBool,
    JsonInt,
    JsonNumber,
    JsonText,
    Position,
    loads_strict,
    parse_timestamp,
)
from service.memories.postings import PostingsRepository
from service.memories.schemas import MemoryCreate, MemoryEventRead, MemoryUpdate, StoreKeyText
from service.memories.vector_columns import VectorColumns, VectorSizeMismatch
from service.profile.models import Profile
from service.profile.schemas import ProfileKey, StoredDocument
from service.profile.service import document_bytes
from service.threads.models import Message
from service.threads.schemas import MessageIn, StoredRole, ThreadCreate

logger = logging.getLogger("mneme.admin")

IMPORT_BATCH = 100
EXPORT_FORMAT = "mneme-user-export"
EXPORT_VERSION = 1
HEADER_TYPE = "header"
HEADER_MEMBERS = frozenset(
    {"type", "format", "version", "tenant_id", "user_id", "exported_at", "counts"}
)
RECORD_MEMBERS = frozenset({"type", "data"})

Progress = Callable[[str, int], None]
"""Told each table's count as a purge goes (the CLI prints a progress line from it)."""


def _overview(row: UserRow) -> UserOverview:
    return UserOverview(
        id=row.id,
        name=row.name,
        email=row.email,
        created_at=row.created_at,
        last_seen_at=row.last_seen_at,
        last_active_at=row.last_active_at,
        memories=MemoryCounts(
            semantic=row.semantic, episodic=row.episodic, procedural=row.procedural
        ),
        threads=row.threads,
        messages=row.messages,
    )


class AdminService:
    """The use cases that run in the request's transaction."""

    def __init__(
        self,
        repository: AdminRepository,
        audit: AuditTrail,
        tenant_id: str,
        *,
        profile_max_bytes: int,
        vector_columns: VectorColumns,
    ) -> None:
        self._repository = repository
        self._audit = audit
        self._tenant_id = tenant_id
        self._profile_max_bytes = profile_max_bytes
        self._vector_columns = vector_columns

    @classmethod
    def acting_as(
        cls,
        session: AsyncSession,
        principal: Principal,
        *,
        profile_max_bytes: int,
        vector_columns: VectorColumns,
    ) -> AdminService:
        """The service on `session`'s transaction in `principal`'s tenant, audited as
        `principal`: an admin's request and the operator at a terminal are served alike."""
        return cls(
            AdminRepository(session, principal.tenant_id),
            AuditTrail(session, principal),
            principal.tenant_id,
            profile_max_bytes=profile_max_bytes,
            vector_columns=vector_columns,
        )

    async def list_users(
        self,
        *,
        cursor: str | None,
        limit: int,
        active_after: datetime | None,
        active_before: datetime | None,
    ) -> Page[UserOverview]:
        rows = await self._repository.users(
            after_id=decode_identifier_cursor(cursor),
            active_after=active_after,
            active_before=active_before,
            limit=limit + 1,
        )
        next_cursor = encode_cursor([rows[limit - 1].id]) if len(rows) > limit else None
        return Page(items=[_overview(r) for r in rows[:limit]], next_cursor=next_cursor)

    async def get_user(self, user_id: str) -> UserOverview:
        rows = await self._repository.users(user_id=user_id)
        if not rows:
            raise NotFound(f"User {user_id!r} is not known in this tenant.")
        return _overview(rows[0])

    async def audit(
        self,
        *,
        cursor: str | None,
        limit: int,
        actor_id: str | None,
        action: str | None,
        target_type: str | None,
        target_id: str | None,
        since: datetime | None,
        until: datetime | None,
    ) -> Page[AuditEntryRead]:
        rows = await self._repository.audit_page(
            actor_id=actor_id,
            action=action,
            target_type=target_type,
            target_id=target_id,
            since=since,
            until=until,
            before=decode_newest_first_cursor(cursor),
            limit=limit + 1,
        )
        return Page(
            items=[AuditEntryRead.model_validate(r._asdict()) for r in rows[:limit]],
            next_cursor=newest_first_cursor(rows, limit),
        )

    async def retention(self) -> Tagged[RetentionPolicy]:
        """The tenant's retention policy, with its entity tag."""
        policy = RetentionPolicy.model_validate(await self._repository.retention())
        return Tagged(policy, entity_tag(policy))

    async def set_retention(
        self,
        policy: RetentionPolicy,
        *,
        if_match: str | None = None,
        if_none_match: str | None = None,
    ) -> Tagged[RetentionPolicy]:
        """Replace the tenant's retention policy; the next sweep applies it. With `if_match`,
        only if the policy still has that tag, and with `if_none_match`, only if it has not
        (`*`: never, since a tenant always has a policy, if only "keep everything"): 412
        `PRECONDITION_FAILED` otherwise."""
        await self._repository.lock_retention()
        await AccountRepository(self._repository.session, self._tenant_id).ensure_tenant()
        before = await self._repository.retention()
        current = entity_tag(RetentionPolicy.model_validate(before))
        require_preconditions(
            if_match,
            if_none_match,
            current,
            changed="The retention policy changed since you read it; read it again and retry.",
            unchanged="The retention policy is in the state If-None-Match names; nothing changed.",
        )
        await self._repository.set_retention(policy.model_dump())
        await self._audit.record(
            "admin.retention_set",
            target_type="tenant",
            target_id=self._tenant_id,
            detail={"before": before, "after": policy.model_dump()},
        )
        return Tagged(policy, entity_tag(policy))

    async def import_user(self, user_id: str, lines: AsyncIterator[bytes]) -> ImportReport:
        """Restore a user from an export (see docs/export-format.md): every record inserted as
        it was, ids and timestamps kept, in this one transaction. Any bad line raises
        `ImportLineInvalid` naming it (`SecretRefused` for what the API refuses as a secret),
        and the transaction — so the whole import — rolls back.
        The user must hold nothing yet (409 `USER_NOT_EMPTY`)."""
        repository = self._repository
        await repository.lock_user_writes(user_id)
        await AccountRepository(repository.session, self._tenant_id).ensure_tenant()
        plan = await repository.plan()
        scope = await repository.user_scope(plan, user_id)
        held = await _count_user_rows(repository, plan, scope)
        if any(held.values()):
            raise UserNotEmpty(
                f"User {user_id!r} already has data here; purge it first or import elsewhere.",
                counts={k: v for k, v in held.items() if v},
            )
        importer = _Importer(plan, self._tenant_id, user_id, self._profile_max_bytes)
        batch = _Batch(repository, plan)
        number = 0
        async for raw in lines:
            number += 1
            if not raw.strip():
                continue
            table, row = importer.check(number, raw)
            if table is not None:
                if table == MEMORY_TABLE:
                    # The exporting deployment's vector columns may hold other models.
                    try:
                        row = self._vector_columns.placed(row)
                    except VectorSizeMismatch as mismatch:
                        raise _line_error(number, f"memory.{mismatch}") from None
                await batch.add(number, table, row)
        await batch.flush()
        importer.finish(number)
        # The search's postings are derived data, never exported: written from the memories
        # as restored, like any other write of a memory's text.
        await PostingsRepository(repository.session, self._tenant_id).write(
            importer.imported(MEMORY_TABLE)
        )
        # A reference without a foreign key names a row of this import or, as after that row
        # was deleted, no row of the tenant at all; never a row of another user (or of the
        # organization), which the database alone would accept.
        for parent, cited in importer.cited_elsewhere().items():
            foreign = await repository.ids_among(parent, list(cited))
            if foreign:
                line, where = min(cited[row_id] for row_id in foreign)
                raise _line_error(line, f"{where} names a {parent} that is not this user's")
        await self._audit.record(
            "admin.user_import",
            target_type="user",
            target_id=user_id,
            detail={"imported": importer.counts},
        )
        return ImportReport(user_id=user_id, imported=importer.counts)


class UserLifecycle:
    """Purge (of a user or the whole tenant) and export, each in its own transactions."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        actor: Principal,
        on_purged: Callable[[], None] | None = None,
    ) -> None:
        """`on_purged` is called after a purge commits: the process's refresh of the owners'
        vector indexes, whose conditions may name a purged user, when it runs one."""
        self._sessionmaker = sessionmaker
        self._actor = actor
        self._tenant_id = actor.tenant_id
        self._on_purged = on_purged or (lambda: None)

    async def purge_user(self, user_id: str, on_progress: Progress | None = None) -> PurgeReport:
        """Delete every row of the user in every user-bearing table in one transaction, then
        count what is left in a new one. 404 when the user had nothing."""
        tell = on_progress or (lambda _table, _count: None)
        async with tenant_transaction(self._sessionmaker, self._tenant_id) as session:
            repository = AdminRepository(session, self._tenant_id)
            # Taken first: every write to the user in flight (an API write, a write-path pass)
            # commits before we read anything, and those that come later wait for the commit.
            await repository.lock_user_writes(user_id)
            await repository.lock_user_threads(user_id)
            plan = await repository.plan()
            scope = await repository.user_scope(plan, user_id)
            deleted: dict[str, int] = {}
            deleted[JOBS_TABLE] = await repository.delete_user_jobs(scope)
            tell(JOBS_TABLE, deleted[JOBS_TABLE])
            redacted = {ORG_PROVENANCE: await repository.redact_org_provenance(scope)}
            for rule in plan.rules:
                deleted[rule.name] = await repository.delete_rows(rule, scope)
                tell(rule.name, deleted[rule.name])
            for table in plan.special:
                deleted[table.name] = await repository.delete_special(table.name, scope)
                tell(table.name, deleted[table.name])
            if not any(deleted.values()) and not any(redacted.values()):
                raise _user_has_nothing(user_id)
            entry = await AuditTrail(session, self._actor).record(
                "admin.user_purge",
                target_type="user",
                target_id=user_id,
                detail={"deleted": deleted, "redacted": redacted},
            )
            audit_id, purged_at = entry.id, datetime.now(UTC)
        self._on_purged()
        remaining = await self.remaining(plan, scope)
        return PurgeReport(
            tenant_id=self._tenant_id,
            user_id=user_id,
            deleted=deleted,
            redacted=redacted,
            remaining=remaining,
            verified=not any(remaining.values()),
            audit_id=audit_id,
            purged_at=purged_at,
        )

    async def remaining(self, plan: PurgePlan, scope: UserScope) -> dict[str, int]:
        """What each table still holds for the user, counted in a transaction of its own."""
        async with tenant_transaction(self._sessionmaker, self._tenant_id) as session:
            return await _count_purgeable(AdminRepository(session, self._tenant_id), plan, scope)

    async def purge_preview(self, user_id: str) -> dict[str, int]:
        """What a purge of the user would delete (per table) or redact (org provenance) now,
        counted without changing anything; 404, as the purge would answer, when that is
        nothing."""
        async with tenant_transaction(self._sessionmaker, self._tenant_id) as session:
            repository = AdminRepository(session, self._tenant_id)
            plan = await repository.plan()
            scope = await repository.user_scope(plan, user_id)
            counts = await _count_purgeable(repository, plan, scope)
        if not any(counts.values()):
            raise _user_has_nothing(user_id)
        return counts

    async def purge_tenant(self, confirm: str, on_progress: Progress | None = None) -> PurgeReport:
        """Delete every row of the tenant in every table under row-level security (and its
        jobs, waiting or running), then count what is left. The tenant's audit trail goes
        with it, so the record of this purge is the response and the service log."""
        if confirm != self._tenant_id:
            raise ConfirmationMismatch(
                "Pass `confirm` set to the id of the tenant being purged (your token's tenant)."
            )
        tell = on_progress or (lambda _table, _count: None)
        async with tenant_transaction(self._sessionmaker, self._tenant_id) as session:
            repository = AdminRepository(session, self._tenant_id)
            # Taken first: every write to the tenant in flight commits before we read anything
            # (its rows, the jobs it queued are then deleted and counted here), and those that
            # come later wait for the commit, then find the tenant gone.
            await repository.lock_tenant_writes()
            tables = {t.name: t for t in await repository.catalogue()}
            deleted = {JOBS_TABLE: await repository.delete_tenant_jobs()}
            for name in children_first(tables):
                deleted[name] = await repository.delete_tenant_rows(tables[name])
                tell(name, deleted[name])
            if not any(deleted.values()):
                raise self._tenant_has_nothing()
        purged_at = datetime.now(UTC)
        self._on_purged()
        logger.warning(
            "tenant %s purged by %s:%s: %s",
            self._tenant_id,
            self._actor.kind,
            self._actor.subject,
            json.dumps(deleted, sort_keys=True),
        )
        remaining = await self._tenant_rows(tables)
        return PurgeReport(
            tenant_id=self._tenant_id,
            deleted=deleted,
            remaining=remaining,
            verified=not any(remaining.values()),
            purged_at=purged_at,
        )

    async def purge_tenant_preview(self) -> dict[str, int]:
        """What a purge of the whole tenant would delete now, per table and in jobs,
        counted without changing anything; 404, as the purge would answer, when that is
        nothing."""
        async with tenant_transaction(self._sessionmaker, self._tenant_id) as session:
            tables = {
                t.name: t for t in await AdminRepository(session, self._tenant_id).catalogue()
            }
        counts = await self._tenant_rows(tables)
        if not any(counts.values()):
            raise self._tenant_has_nothing()
        return counts

    def _tenant_has_nothing(self) -> NotFound:
        return NotFound(f"Tenant {self._tenant_id!r} has nothing stored.")

    async def _tenant_rows(self, tables: dict[str, CatalogueTable]) -> dict[str, int]:
        """The tenant's rows in each of `tables` and its jobs, counted in a transaction
        of their own."""
        async with tenant_transaction(self._sessionmaker, self._tenant_id) as session:
            repository = AdminRepository(session, self._tenant_id)
            counts = {name: await repository.count_tenant_rows(t) for name, t in tables.items()}
            counts[JOBS_TABLE] = await repository.count_tenant_jobs()
        return counts

    async def require_exportable(self, user_id: str) -> None:
        """What `open_export` checks before it reads anything (404 when the user is unknown),
        without opening the export or recording it: the answer to a HEAD of the export."""
        async with tenant_transaction(self._sessionmaker, self._tenant_id) as session:
            account = await AccountRepository(session, self._tenant_id).get_user(user_id)
        if account is None:
            raise NotFound(f"User {user_id!r} is not known in this tenant.")

    async def open_export(self, user_id: str) -> UserExport:
        """Start an export: opens its snapshot (one REPEATABLE READ transaction, so the header's
        counts and the records agree) and counts the records (404 when the user is unknown).
        The snapshot ends when `lines()` is exhausted or closed, so the caller must iterate it."""
        stack = AsyncExitStack()
        try:
            session = await stack.enter_async_context(self._sessionmaker())
            await stack.enter_async_context(session.begin())
            connection = await session.connection(
                execution_options={"isolation_level": "REPEATABLE READ"}
            )
            await set_tenant(connection, self._tenant_id)
            repository = AdminRepository(session, self._tenant_id)
            plan = await repository.plan()
            scope = await repository.user_scope(plan, user_id)
            counts = {
                rule.name: await repository.count_exported(rule, scope) for rule in plan.exported
            }
            counts[AUDIT_TABLE] = await repository.count_special(AUDIT_TABLE, scope)
            if not counts.get(ACCOUNT_TABLE):
                raise NotFound(f"User {user_id!r} is not known in this tenant.")
            if self._actor.is_admin:
                # An `admin.*` action: the operator's records, which purge keeps and exports
                # leave out. It commits when the export's transaction ends.
                await AuditTrail(session, self._actor).record(
                    "admin.user_export",
                    target_type="user",
                    target_id=user_id,
                    detail={"counts": counts},
                )
        except BaseException:
            await stack.aclose()
            raise
        return UserExport(stack, repository, plan, scope, counts)


class ExportDiscarded(Exception):
    """What an export discarded unread ends its transaction with (a rollback)."""


@dataclass
class UserExport:
    """An export in progress: one snapshot, streamed as NDJSON lines."""

    _stack: AsyncExitStack
    _repository: AdminRepository
    plan: PurgePlan
    scope: UserScope
    counts: dict[str, int]

    def header(self) -> dict[str, Any]:
        return {
            "type": HEADER_TYPE,
            "format": EXPORT_FORMAT,
            "version": EXPORT_VERSION,
            "tenant_id": self.scope.tenant_id,
            "user_id": self.scope.user_id,
            "exported_at": datetime.now(UTC).isoformat(),
            "counts": self.counts,
        }

    async def discard(self) -> None:
        """End the export unread (its destination could not be opened): the snapshot's
        transaction is rolled back, and the export's audit entry with it, since nothing was
        exported."""
        await self._stack.__aexit__(ExportDiscarded, ExportDiscarded(), None)

    async def lines(self) -> AsyncGenerator[bytes, None]:
        try:
            yield _line(self.header())
            for rule in self.plan.export_order:
                async for record in self._repository.stream_records(rule, self.scope):
                    yield (record + "\n").encode()
            audit_table = self.plan.tables[AUDIT_TABLE]
            async for record in self._repository.stream_audit(audit_table, self.scope):
                yield (record + "\n").encode()
        finally:
            await self._stack.aclose()


def _line(record: dict[str, Any]) -> bytes:
    return (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


async def _count_user_rows(
    repository: AdminRepository, plan: PurgePlan, scope: UserScope
) -> dict[str, int]:
    counts = {rule.name: await repository.count_rows(rule, scope) for rule in plan.rules}
    for table in plan.special:
        counts[table.name] = await repository.count_special(table.name, scope)
    return counts


def _user_has_nothing(user_id: str) -> NotFound:
    return NotFound(f"User {user_id!r} has nothing stored in this tenant.")


async def _count_purgeable(
    repository: AdminRepository, plan: PurgePlan, scope: UserScope
) -> dict[str, int]:
    counts = await _count_user_rows(repository, plan, scope)
    counts[JOBS_TABLE] = await repository.count_user_jobs(scope)
    counts[ORG_PROVENANCE] = await repository.count_org_provenance(scope)
    return counts


# Columns that name rows of another exported table without a foreign key, and that table: a
# memory's history outlives the memory, and its provenance (and a summary's) the thread and
# messages it came from, so each may also name a row the tenant no longer holds.
IMPORT_REFERENCES: Mapping[tuple[str, str], str] = {
    ("memory", "superseded_by"): "memory",
    ("memory", "source_thread_id"): "thread",
    ("memory", "source_message_ids"): "message",
    ("memory_event", "memory_id"): "memory",
    ("thread_summary", "message_ids"): "message",
}
# The audit records an export holds (actions, or prefixes ending in `.`) with what each is
# about: the account overlay a service set, the profile's changes, and the write path's passes,
# failures and reruns on the user's threads.
IMPORTED_AUDIT_ACTIONS: Mapping[str, str] = {
    "account.overlay_set": "user",
    "profile.": "profile",
    PASS_ACTION: THREAD_TARGET,
    FAILURE_ACTION: THREAD_TARGET,
    REQUEUE_ACTION: THREAD_TARGET,
}
SYSTEM_ACTOR_PREFIX = "mneme:"
# The times a client gives through the API (a memory's event time and expiry: any time the API
# takes). Every other time in an export is the service's own clock reading when it wrote the
# row (`now()`: created, updated, last seen, last message, …), so it has come: an import
# refuses one later than its own clock, by more than the clocks of the exporting and the
# importing deployment may differ (`CLOCK_ALLOWANCE`). Such a row would sort first for ever,
# or make its user look active until then.
CLIENT_TIMES = frozenset({("memory", "event_at"), ("memory", "expires_at")})
CLOCK_ALLOWANCE = timedelta(minutes=5)
# The column that says whose a row is, user or organization: a user's export holds the user's.
SCOPE_COLUMN = "scope"
USER_SCOPE: OwnerScope = "user"


def _names(prefix: str, action: object) -> bool:
    if not isinstance(action, str):
        return False
    return action.startswith(prefix) if prefix.endswith(".") else action == prefix


_UUID_TYPE = "uuid"
_UUID_LIST_TYPE = "uuid[]"

_Key = uuid.UUID | str
"""A row's key as an import compares it: a UUID parsed (so that every spelling Postgres reads as
the same value is the same key), else the text."""


class _Importer:
    """Checks each import line against the format and the user it is imported for."""

    def __init__(
        self, plan: PurgePlan, tenant_id: str, user_id: str, profile_max_bytes: int
    ) -> None:
        self._tables = plan.tables
        self._rules: dict[str, TableRule] = {r.name: r for r in plan.exported}
        # Each exported table's foreign keys to another exported table (`(tenant_id, column)`
        # → the parent's `(tenant_id, key)`): a row names a parent imported before it, so a
        # row cannot hang off another user's thread however the database would take it.
        self._foreign_keys: dict[str, list[tuple[str, str, str]]] = {}
        for name, rule in self._rules.items():
            for key in rule.table.foreign_keys:
                if (
                    key.parent in self._rules
                    and len(key.columns) == 2
                    and key.columns[0] == key.parent_columns[0] == TENANT_COLUMN
                ):
                    self._foreign_keys.setdefault(name, []).append(
                        (key.columns[1], key.parent, key.parent_columns[1])
                    )
        # Parent table → the key columns its children name, collected from each imported row.
        self._key_columns: dict[str, set[str]] = {}
        for keys in self._foreign_keys.values():
            for _, parent, parent_column in keys:
                self._key_columns.setdefault(parent, set()).add(parent_column)
        for parent in IMPORT_REFERENCES.values():
            self._key_columns.setdefault(parent, set()).add("id")
        self._tenant_id = tenant_id
        self._user_id = user_id
        self._profile_max_bytes = profile_max_bytes
        self._header: dict[str, Any] | None = None
        self._keys: dict[tuple[str, str], dict[_Key, None]] = {}
        # Rows named without a foreign key that this import did not hold when named, per table,
        # each with the first line and column naming it.
        self._cited: dict[str, dict[uuid.UUID, tuple[int, str]]] = {}
        # Each thread's last message position, and the write path's cursors (line, thread,
        # position): checked against each other once every line is read.
        self._last_seq: dict[str, int] = {}
        self._cursors: list[tuple[int, str, int]] = []
        self._latest_clock_time = datetime.now(UTC) + CLOCK_ALLOWANCE
        self.counts: dict[str, int] = {}

    def check(self, number: int, raw: bytes) -> tuple[str | None, dict[str, Any]]:
        try:
            record = loads_strict(raw, [])
        except InputRefused as refused:
            raise _line_error(number, f"{_at(refused.loc)}{refused.message.rstrip('.')}") from None
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            raise _line_error(number, "a record is a JSON object with a string `type`")
        kind = record["type"]
        if self._header is None:
            self._header = self._check_header(number, record)
            return None, {}
        if set(record) != RECORD_MEMBERS:
            raise _line_error(number, "a record has exactly the members `type` and `data`")
        data = record.get("data")
        if not isinstance(data, dict):
            raise _line_error(number, "a record's `data` is a JSON object")
        if kind != AUDIT_TABLE and kind not in self._rules:
            raise _line_error(number, f"unknown record type {kind!r}")
        _check_columns(number, self._tables[kind], data, latest=self._latest_clock_time)
        if kind == AUDIT_TABLE:
            self._check_audit(number, data)
        else:
            self._check_owned(number, self._rules[kind], data)
            self._check_references(number, kind, data)
        # Before the values' rules, so that a secret is refused as the API refuses it.
        refuse_record_secrets(number, kind, data)
        _check_values(number, kind, data)
        if kind == PROFILE_TABLE:
            self._check_profile_size(number, data.get("document"))
        self._note_positions(number, kind, data)
        data["tenant_id"] = self._tenant_id
        self.counts[kind] = self.counts.get(kind, 0) + 1
        return kind, data

    def _check_header(self, number: int, record: dict[str, Any]) -> dict[str, Any]:
        if record["type"] != HEADER_TYPE or record.get("format") != EXPORT_FORMAT:
            raise _line_error(number, f"the first line must be the `{EXPORT_FORMAT}` header")
        unknown = sorted(set(record) - HEADER_MEMBERS)
        if unknown:
            raise _line_error(number, f"the header has no member {unknown[0]!r}")
        version = record.get("version")
        # `True == 1` in Python: the type is checked, not only the value.
        if type(version) is not int or version != EXPORT_VERSION:
            raise _line_error(number, f"format version {version!r} is not supported")
        if record.get("user_id") != self._user_id:
            raise _line_error(
                number, f"the export is of user {record.get('user_id')!r}, not {self._user_id!r}"
            )
        if not isinstance(record.get("counts"), dict):
            raise _line_error(number, "the header's `counts` is missing")
        return record

    def _check_owned(self, number: int, rule: TableRule, data: dict[str, Any]) -> None:
        """A row of the user: its `user_id` (`id` for the account) is the user, and its
        `scope`, where it has one, is the user's, not the organization's (whose memories and
        profile are no user's to export). A row that hangs off a parent row instead is the
        user's through that parent, which `_check_references` requires to be of this import."""
        if rule.kind != "parent" and data.get(rule.column) != self._user_id:
            raise _line_error(number, f"{rule.name}.{rule.column} is not {self._user_id!r}")
        if SCOPE_COLUMN in rule.table.columns and data.get(SCOPE_COLUMN) != USER_SCOPE:
            raise _line_error(
                number,
                f"{rule.name}.{SCOPE_COLUMN} is not {USER_SCOPE!r}: a user's export holds the "
                "user's own rows, never the organization's",
            )

    def _note_positions(self, number: int, kind: str, data: dict[str, Any]) -> None:
        """Keep a message's position, or a write-path cursor's, for `_check_cursors`."""
        if kind == MESSAGE_TABLE:
            thread, seq = data["thread_id"], data["seq"]
            self._last_seq[thread] = max(seq, self._last_seq.get(thread, seq))
        elif kind == CURSOR_TABLE:
            self._cursors.append((number, data["thread_id"], data["through_seq"]))

    def _check_cursors(self) -> None:
        """A write-path cursor names a position of its thread: at most its last message's (the
        retention sweep keeps each thread's newest message, so an export holds it)."""
        for number, thread, through_seq in self._cursors:
            last = self._last_seq.get(thread)
            if last is None:
                raise _line_error(
                    number, f"{CURSOR_TABLE}.through_seq: its thread has no message in this import"
                )
            if through_seq > last:
                raise _line_error(
                    number,
                    f"{CURSOR_TABLE}.through_seq {through_seq} is past its thread's last "
                    f"message's position ({last})",
                )

    def _check_references(self, number: int, kind: str, data: dict[str, Any]) -> None:
        for column, parent, parent_column in self._foreign_keys.get(kind, ()):
            value = data.get(column)
            if value is None or self._key(parent, parent_column, value) not in self._keys.get(
                (parent, parent_column), {}
            ):
                raise _line_error(number, f"{kind}.{column} names no {parent} imported before it")
        for (child, column), parent in IMPORT_REFERENCES.items():
            value = data.get(column) if child == kind else None
            if value is None:
                continue
            imported = self._keys.get((parent, "id"), {})
            for row_id in value if isinstance(value, list) else [value]:
                key = uuid.UUID(row_id)
                if key not in imported:
                    self._cited.setdefault(parent, {}).setdefault(key, (number, f"{kind}.{column}"))
        for column in self._key_columns.get(kind, ()):
            value = data.get(column)
            if value is not None:
                self._keys.setdefault((kind, column), {})[self._key(kind, column, value)] = None

    def _key(self, table: str, column: str, value: object) -> _Key:
        if self._tables[table].column_types.get(column) == _UUID_TYPE:
            return uuid.UUID(str(value))
        return str(value)

    def imported(self, table: str) -> list[uuid.UUID]:
        """The ids of the rows of `table` this import holds, in the order it read them."""
        return [key for key in self._keys.get((table, "id"), {}) if isinstance(key, uuid.UUID)]

    def cited_elsewhere(self) -> dict[str, dict[uuid.UUID, tuple[int, str]]]:
        """Per table, the rows named without a foreign key that the whole import does not
        hold (a row later in the file counts), each with its first line and column."""
        elsewhere: dict[str, dict[uuid.UUID, tuple[int, str]]] = {}
        for parent, cited in self._cited.items():
            imported = self._keys.get((parent, "id"), {})
            missing = {key: where for key, where in cited.items() if key not in imported}
            if missing:
                elsewhere[parent] = missing
        return elsewhere

    def _check_profile_size(self, number: int, document: object) -> None:
        """The API's size limit on a stored profile (413 `PROFILE_TOO_LARGE` there): a document
        over it is one no write could have produced, refused with the same measures."""
        if not isinstance(document, dict):
            return
        size = document_bytes(document)
        if size > self._profile_max_bytes:
            raise ImportLineInvalid(
                f"Line {number}: profile.document takes {size} bytes; the limit is "
                f"{self._profile_max_bytes}. Nothing was imported.",
                line=number,
                attempted_bytes=size,
                max_bytes=self._profile_max_bytes,
            )

    def _check_audit(self, number: int, data: dict[str, Any]) -> None:
        """An audit record an export of the user could hold (`IMPORTED_AUDIT_ACTIONS`), by an
        actor that could have written it (at a time that has come, as every time the service
        takes from its clock: `CLIENT_TIMES`): an import never adds to the trail an admin
        action, a credential change, another end user's act or a record that would sort first
        for ever."""
        action, target_type = data.get("action"), data.get("target_type")
        expected = next(
            (target for prefix, target in IMPORTED_AUDIT_ACTIONS.items() if _names(prefix, action)),
            None,
        )
        if expected is None or target_type != expected:
            raise _line_error(
                number,
                f"audit_log.action: an export holds no {action!r} record about {target_type!r}",
            )
        detail, target_id = data.get("detail"), data.get("target_id")
        if target_type == THREAD_TARGET:
            # A write-path record names the user in its detail and a thread of the user's, one
            # of this import or, as after the thread was deleted, none of the tenant.
            if not isinstance(detail, dict) or detail.get("user_id") != self._user_id:
                raise _line_error(number, "audit_log.detail: the record is not about this user")
            try:
                thread = uuid.UUID(str(target_id))
            except ValueError:
                raise _line_error(number, "audit_log.target_id is not a UUID") from None
            data["target_id"] = str(thread)
            if thread not in self._keys.get((THREAD_TABLE, "id"), {}):
                self._cited.setdefault(THREAD_TABLE, {}).setdefault(
                    thread, (number, "audit_log.target_id")
                )
        elif target_id != self._user_id:
            raise _line_error(number, f"audit_log.target_id is not {self._user_id!r}")
        actor_kind, actor_id = data.get("actor_kind"), data.get("actor_id")
        if not (
            (actor_kind == "user" and actor_id == self._user_id)
            or actor_kind == "service"
            or (actor_kind == SYSTEM_ACTOR_KIND and str(actor_id).startswith(SYSTEM_ACTOR_PREFIX))
        ):
            raise _line_error(
                number,
                "audit_log.actor_id: an end user acts only on itself, and the service's own "
                f"actors are named {SYSTEM_ACTOR_PREFIX}…",
            )

    def finish(self, lines: int) -> None:
        if self._header is None:
            raise _line_error(max(lines, 1), "the import is empty: no header line")
        declared = {k: v for k, v in self._header["counts"].items() if v}
        if declared != self.counts:
            raise _line_error(
                lines,
                f"the header announced {declared} records but the file holds {self.counts}",
            )
        self._check_cursors()
        # Every export holds its user's account: a file without one would record an import
        # (in the audit trail) of a user that does not exist.
        if ACCOUNT_TABLE not in self.counts:
            raise _line_error(lines, f"the export holds no `{ACCOUNT_TABLE}` record")


def api_rule(model: type[BaseModel], field: str) -> TypeAdapter[Any]:
    """The rule the API holds `model`'s `field` to (its type and constraints), to hold an
    import's column to: one definition for both, so that they cannot drift apart."""
    info = model.model_fields[field]
    rule: Any = Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
    return TypeAdapter(rule)


# The columns an import holds to the API's rules for the same value, so that what it stores is
# what the API could have stored and reads back (the database's own constraints are looser):
# a value is refused when the API refuses it or would store it changed. Every jsonb column is
# here, with the shape its readers expect, and every column the API constrains (tests keep it
# so).
IMPORT_COLUMN_TYPES: dict[tuple[str, str], TypeAdapter[Any]] = {
    **{
        ("memory", field): api_rule(MemoryCreate, field)
        for field in (
            "kind",
            "scope",
            "needs_review",
            "text",
            "category",
            "confidence",
            "source_message_ids",
            "evidence",
            "speaker",
            "metadata",
        )
    },
    ("memory", "lifecycle"): api_rule(MemoryUpdate, "lifecycle"),
    **{("thread", field): api_rule(ThreadCreate, field) for field in ("title", "metadata")},
    **{
        ("message", field): api_rule(MessageIn, field)
        for field in ("name", "content", "tool_calls", "client_message_id", "metadata")
    },
    ("message", "role"): TypeAdapter(StoredRole),
    ("message", "seq"): TypeAdapter(Position),
    ("memory", "store_key"): TypeAdapter(StoreKeyText),
    ("memory_event", "action"): api_rule(MemoryEventRead, "action"),
    ("extraction_cursor", "through_seq"): TypeAdapter(Position),
    ("thread_summary", "start_index"): TypeAdapter(Position),
    ("thread_summary", "end_index"): TypeAdapter(Position),
    **{
        ("user_account", field): api_rule(AccountOverlayUpdate, field)
        for field in ("name", "email", "avatar", "socials")
    },
    ("profile", "document"): TypeAdapter(StoredDocument),
    ("profile", "version"): TypeAdapter(Position),
    ("profile", "extracted_keys"): TypeAdapter(list[ProfileKey]),
    ("memory_event", "changes"): TypeAdapter(dict[str, Any]),
    ("thread_summary", "entries"): TypeAdapter(list[dict[str, Any]]),
    ("audit_log", "detail"): TypeAdapter(dict[str, Any]),
}
_TIMESTAMP_TYPE = "timestamp with time zone"
PROFILE_TABLE = Profile.__tablename__
MESSAGE_TABLE = Message.__tablename__
CURSOR_TABLE = "extraction_cursor"

_INT16, _INT32 = 2**15, 2**31
# The JSON a column of each type takes, for every column (an API rule of its own, above, may be
# stricter): Postgres would read text as a number (`"4"` as 4) or a number as text, and refuse
# the rest in its own words, naming its types.
COLUMN_TYPE_RULES: dict[str, TypeAdapter[Any]] = {
    "smallint": TypeAdapter(Annotated[JsonInt, Field(ge=-_INT16, lt=_INT16)]),
    "integer": TypeAdapter(Annotated[JsonInt, Field(ge=-_INT32, lt=_INT32)]),
    "bigint": TypeAdapter(Annotated[JsonInt, Field(ge=-INT64_MAX - 1, le=INT64_MAX)]),
    "boolean": TypeAdapter(JsonBool),
    "double precision": TypeAdapter(Annotated[JsonNumber, Field(allow_inf_nan=False)]),
    "real": TypeAdapter(Annotated[JsonNumber, Field(allow_inf_nan=False)]),
    "text": TypeAdapter(JsonText),
    "text[]": TypeAdapter(list[JsonText]),
}


def _check_columns(
    number: int, table: CatalogueTable, data: dict[str, Any], *, latest: datetime
) -> None:
    """Refuse a record naming a column its table does not have, lacking its key or a column its
    table requires (null where the table takes none), holding a value of another JSON type
    than its column's (`COLUMN_TYPE_RULES`), a time the service could not read back (see
    `Timestamp`), a time of the service's clock later than `latest` (`CLIENT_TIMES`) or an id
    that is not a UUID. Times are rewritten as the UTC instant they were read as, so that
    Postgres stores exactly that instant whatever forms of offset it would parse differently
    (seconds, fractions of a second); ids as their canonical text."""
    unknown = sorted(set(data) - set(table.columns))
    if unknown:
        raise _line_error(number, f"{table.name} has no column {unknown[0]!r}")
    for column in table.primary_key:
        # An import keeps ids: a row without its own would be given a new one.
        if column != TENANT_COLUMN and data.get(column) is None:
            raise _line_error(number, f"{table.name}.{column} is missing")
    missing = sorted(table.required - {TENANT_COLUMN} - set(data))
    if missing:
        raise _line_error(number, f"{table.name}.{missing[0]} is missing")
    for column, value in data.items():
        if value is None:
            if column in table.not_null:
                raise _line_error(number, f"{table.name}.{column} is null; it takes a value")
            continue
        column_type = table.column_types[column]
        type_rule = COLUMN_TYPE_RULES.get(column_type)
        if type_rule is not None:
            _validated(number, f"{table.name}.{column}", type_rule, value)
        elif column_type == _TIMESTAMP_TYPE:
            try:
                moment = parse_timestamp(value).astimezone(UTC)
            except ValueError as exc:
                raise _line_error(number, f"{table.name}.{column}: {exc}") from None
            if (table.name, column) not in CLIENT_TIMES and moment > latest:
                raise _line_error(
                    number,
                    f"{table.name}.{column} is in the future (later than this server's clock "
                    f"by more than {CLOCK_ALLOWANCE // timedelta(minutes=1)} minutes); the service "
                    "takes it from its clock",
                )
            data[column] = moment.isoformat()
        elif column_type in (_UUID_TYPE, _UUID_LIST_TYPE):
            # Stored as read (canonical text), so the rows compared are the rows written.
            try:
                data[column] = (
                    [_uuid_text(item) for item in value]
                    if column_type == _UUID_LIST_TYPE and isinstance(value, list)
                    else _uuid_text(value)
                )
            except ValueError:
                kind = "a list of UUIDs" if column_type == _UUID_LIST_TYPE else "a UUID"
                raise _line_error(number, f"{table.name}.{column} is not {kind}") from None


def _check_values(number: int, table: str, data: dict[str, Any]) -> None:
    """Refuse a value the API would refuse for the same column, or store changed (text with
    whitespace or invisible characters around it, which the API strips; `"yes"` for a
    boolean): the API never stored it so."""
    for column, value in data.items():
        adapter = IMPORT_COLUMN_TYPES.get((table, column))
        if adapter is None or value is None:
            continue
        validated = _validated(number, f"{table}.{column}", adapter, value)
        if adapter.dump_python(validated, mode="json") != value:
            raise _line_error(
                number,
                f"{table}.{column}: the API would store this value changed (text without "
                "the whitespace and invisible characters around it, a value as its own type)",
            )


def _validated(number: int, field: str, rule: TypeAdapter[Any], value: object) -> Any:
    """`value` as `rule` reads it, or the line refused naming `field` and what `rule` says."""
    try:
        return rule.validate_python(value)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = _at([part for part in error["loc"] if part != "[key]"])
        raise _line_error(number, f"{field}: {where}{error['msg'].rstrip('.')}") from None


def _uuid_text(value: object) -> str:
    """A UUID in any spelling Postgres reads (upper case, no hyphens, braces) as its canonical
    text, else ValueError."""
    if not isinstance(value, str):
        raise ValueError("not text")
    return str(uuid.UUID(value))


def _at(loc: list[str | int]) -> str:
    return f"at /{'/'.join(str(part) for part in loc)}: " if loc else ""


class _Batch:
    """Consecutive records of one type (and the same columns), inserted in one statement: at
    most `IMPORT_BATCH`, since a memory costs milliseconds of vector-index maintenance and one
    statement must stay well within the statement timeout.

    Each batch runs in a savepoint. When the database refuses it, the batch is rolled back and
    its rows are inserted one by one, each in a savepoint of its own, to name the line it
    refused; the import then fails as a whole."""

    def __init__(self, repository: AdminRepository, plan: PurgePlan) -> None:
        self._repository = repository
        self._plan = plan
        self._key: tuple[str, frozenset[str]] | None = None
        self._rows: list[tuple[int, dict[str, Any]]] = []

    async def add(self, number: int, table: str, row: dict[str, Any]) -> None:
        key = (table, frozenset(row))
        if key != self._key or len(self._rows) >= IMPORT_BATCH:
            await self.flush()
            self._key = key
        self._rows.append((number, row))

    async def flush(self) -> None:
        if self._key is None or not self._rows:
            return
        table = self._plan.tables[self._key[0]]
        session = self._repository.session
        try:
            async with session.begin_nested():
                await self._repository.insert_rows(table, [row for _, row in self._rows])
        except DBAPIError:
            for number, row in self._rows:
                try:
                    async with session.begin_nested():
                        await self._repository.insert_rows(table, [row])
                except DBAPIError as exc:
                    raise _line_error(number, _refusal(table, exc)) from None
            raise
        self._rows = []


def _line_error(number: int, reason: str) -> ImportLineInvalid:
    return ImportLineInvalid(f"Line {number}: {reason}. Nothing was imported.", line=number)


_UNIQUE_VIOLATION = "23505"
_NOT_NULL_VIOLATION = "23502"
_FOREIGN_KEY_VIOLATION = "23503"


def _refusal(table: CatalogueTable, exc: DBAPIError) -> str:
    """Why the database refused a row, in the import's words: the columns of the rule it broke
    (its constraints and unique indexes are in the catalogue), not the rule's name. Checks run
    before the insert stand for the database's rules, so this is said of a rule they miss (a
    value another record of the import or of the tenant holds already, mostly)."""
    cause = exc.orig.__cause__ if exc.orig is not None else None
    state = getattr(exc.orig, "sqlstate", None)
    if state == _NOT_NULL_VIOLATION:
        return f"{table.name}.{getattr(cause, 'column_name', None) or '?'} is missing"
    columns = table.rules.get(str(getattr(cause, "constraint_name", None)))
    if columns is None:
        message = str(getattr(exc.orig, "args", [""])[0] or exc.orig)
        reason = message.splitlines()[0][:300] if message else type(exc.orig).__name__
        return f"the database refused the record: {reason}"
    named = [c for c in columns if c != TENANT_COLUMN]
    fields = ", ".join(
        f"{table.name}.{c}" + (" (computed)" if c in table.generated else "") for c in named
    )
    if state == _UNIQUE_VIOLATION:
        return f"{fields}: another {table.name}, of this import or of the tenant, has the same"
    if state == _FOREIGN_KEY_VIOLATION:
        return f"{fields}: names no row the tenant holds"
    these = "this value" if len(named) == 1 else "these values together"
    return f"{fields}: the {table.name} table refuses {these}"
