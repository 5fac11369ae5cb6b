"""HTTP routes for admins (users, purge, import, audit) and a user's export."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.responses import StreamingResponse

from service.admin.dependencies import AdminSvc, Lifecycle
from service.admin.schemas import (
    AuditEntryRead,
    ImportReport,
    PurgeReport,
    RetentionPolicy,
    UserOverview,
)
from service.auth.principal import ME
from service.dependencies import AdminPrincipal, CurrentPrincipal
from service.errors import Forbidden, NotFound, problem_responses
from service.kit.media_type import UnsupportedMediaType, media_type_of
from service.kit.pagination import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, Page
from service.kit.resource_headers import (
    NOT_MODIFIED_RESPONSE,
    IfMatch,
    IfNoneMatch,
    IfNoneMatchOnWrite,
    conditional_read,
    tagged_response,
    with_etag,
)
from service.kit.routing import ApiRoute, is_head
from service.kit.types import IDENTIFIER_MAX, Timestamp, is_valid_identifier, is_valid_user_id

admin_router = APIRouter(route_class=ApiRoute, prefix="/v1/admin", tags=["admin"])
user_router = APIRouter(route_class=ApiRoute, prefix="/v1/users/{user_id}", tags=["users"])

NDJSON = "application/x-ndjson"
ADMIN_READ_PROBLEMS = problem_responses(401, 403, 404, 422, 429)

UserPath = Annotated[
    str,
    Path(
        description="A user id of the caller's tenant.",
        # Published, not enforced here: a longer id is no id, and like every other invalid one
        # it is a 404 from the route, not a 422 for its length.
        json_schema_extra={"minLength": 1, "maxLength": IDENTIFIER_MAX},
    ),
]
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)]


def _user(user_id: str) -> str:
    if not is_valid_identifier(user_id):
        raise NotFound(f"No user {user_id!r} in this tenant.")
    return user_id


@admin_router.get(
    "/users",
    response_model=Page[UserOverview],
    summary="List the tenant's users",
    responses=ADMIN_READ_PROBLEMS,
)
async def list_users(
    admin: AdminSvc,
    cursor: str | None = None,
    limit: Limit = DEFAULT_PAGE_SIZE,
    active_after: Annotated[
        Timestamp | None, Query(description="Only users last active at or after this time.")
    ] = None,
    active_before: Annotated[
        Timestamp | None,
        Query(description="Only users last active before this time, or never active."),
    ] = None,
) -> Page[UserOverview]:
    """The tenant's users in id order, each with its memories by kind, threads and messages,
    when it was created and when it was last active. Admins only."""
    return await admin.list_users(
        cursor=cursor, limit=limit, active_after=active_after, active_before=active_before
    )


@admin_router.get(
    "/users/{user_id}",
    response_model=UserOverview,
    summary="Get one user with its counts",
    responses=ADMIN_READ_PROBLEMS,
)
async def get_user_overview(user_id: UserPath, admin: AdminSvc) -> UserOverview:
    """One user of the tenant with its counts. Admins only."""
    return await admin.get_user(_user(user_id))


@admin_router.delete(
    "/users/{user_id}",
    response_model=PurgeReport,
    summary="Purge a user",
    responses=ADMIN_READ_PROBLEMS,
)
async def purge_user(
    user_id: UserPath, _admin: AdminPrincipal, lifecycle: Lifecycle
) -> PurgeReport:
    """Delete everything stored about the user — every row of every user-bearing table, its
    queued jobs, and the audit entries that carried its data — in one transaction. The answer
    lists the rows deleted per table and, counted after the commit, the rows left (all zero).
    Organization memories written from the user's conversations are kept without their
    provenance. 404 when the user has nothing stored. Admins only; see docs/admin.md."""
    return await lifecycle.purge_user(_user(user_id))


@admin_router.delete(
    "/tenant",
    response_model=PurgeReport,
    summary="Purge the whole tenant",
    responses=ADMIN_READ_PROBLEMS,
)
async def purge_tenant(
    _admin: AdminPrincipal,
    lifecycle: Lifecycle,
    confirm: Annotated[
        str, Query(description="The id of the caller's tenant, to confirm.", max_length=128)
    ],
) -> PurgeReport:
    """Delete every row of the caller's tenant, with per-table counts and a verification
    counted after the commit. The tenant's audit trail goes too; the service log keeps the
    record. 422 `CONFIRMATION_MISMATCH` unless `confirm` names the tenant. Admins only."""
    return await lifecycle.purge_tenant(confirm)


async def _body_lines(request: Request) -> AsyncIterator[bytes]:
    """The request body split into lines as it arrives."""
    pending = b""
    async for chunk in request.stream():
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            yield line
    if pending:
        yield pending


@admin_router.post(
    "/users/{user_id}/import",
    response_model=ImportReport,
    summary="Import a user's export",
    responses=problem_responses(401, 403, 404, 409, 413, 415, 422, 429),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {NDJSON: {"schema": {"type": "string", "format": "binary"}}},
        }
    },
)
async def import_user(user_id: UserPath, request: Request, admin: AdminSvc) -> ImportReport:
    """Restore a user from `GET /v1/users/{user_id}/export` output (NDJSON, see
    docs/export-format.md): ids and timestamps are kept. The user must hold nothing yet (409
    `USER_NOT_EMPTY`). A bad line is a 422 `IMPORT_LINE_INVALID` naming it, and nothing is
    written; so is a line holding what the API refuses as a secret, as a 422 `SECRET_REFUSED`.
    The body is `application/x-ndjson` (another media type is a 415). Admins only."""
    if not is_valid_user_id(user_id):
        # No credential can name such a user (`me` included), so nothing imported could be
        # reached by the user it is about.
        raise NotFound(f"No user {user_id!r} can be imported here.")
    if media_type_of(request.headers.get("content-type", "")) != NDJSON:
        # A body sent as something else (a file picked by the wrong name, a form) is refused
        # for what it is, not read line by line as if it were an export.
        raise UnsupportedMediaType(
            f"Send the export as NDJSON with `Content-Type: {NDJSON}`.",
            headers={"Accept-Post": NDJSON},
        )
    return await admin.import_user(user_id, _body_lines(request))


@admin_router.get(
    "/retention",
    response_model=RetentionPolicy,
    summary="Read the tenant's retention policy",
    responses={
        **tagged_response("The retention policy."),
        **NOT_MODIFIED_RESPONSE,
        **problem_responses(401, 403, 422, 429),
    },
)
async def get_retention(
    admin: AdminSvc, response: Response, if_none_match: IfNoneMatch = None
) -> RetentionPolicy | Response:
    """How long the tenant keeps episodic memories, raw messages and summaries (null =
    forever), with its ETag; with `If-None-Match` naming the current ETag, 304 and no body.
    Admins only."""
    return conditional_read(response, await admin.retention(), if_none_match)


@admin_router.put(
    "/retention",
    response_model=RetentionPolicy,
    summary="Set the tenant's retention policy",
    responses={
        **tagged_response("The retention policy as set."),
        **problem_responses(401, 403, 412, 422, 429),
    },
)
async def set_retention(
    body: RetentionPolicy,
    admin: AdminSvc,
    response: Response,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatchOnWrite = None,
) -> RetentionPolicy:
    """Replace the retention policy (an omitted field keeps that data forever). The hourly
    sweep removes what is older, and memories whose `expires_at` passed. With `If-Match`, only
    if the policy still has that ETag (else 412 and nothing changes); with `If-None-Match: *`
    (or its ETag), 412, since the tenant always has a policy (in that state). Admins only."""
    policy = await admin.set_retention(body, if_match=if_match, if_none_match=if_none_match)
    return with_etag(response, policy)


@admin_router.get(
    "/audit",
    response_model=Page[AuditEntryRead],
    summary="Read the audit trail",
    responses=problem_responses(401, 403, 422, 429),
)
async def list_audit_entries(
    admin: AdminSvc,
    cursor: str | None = None,
    limit: Limit = DEFAULT_PAGE_SIZE,
    actor_id: str | None = None,
    action: Annotated[
        str | None,
        Query(description="An action (`admin.user_purge`), or a prefix ending in `.` (`admin.`)."),
    ] = None,
    target_type: str | None = None,
    target_id: str | None = None,
    since: Timestamp | None = None,
    until: Timestamp | None = None,
) -> Page[AuditEntryRead]:
    """Who did what to whom, newest first: admin actions, credential changes, profile and
    account changes, write-path passes. Admins only."""
    return await admin.audit(
        cursor=cursor,
        limit=limit,
        actor_id=actor_id,
        action=action,
        target_type=target_type,
        target_id=target_id,
        since=since,
        until=until,
    )


@user_router.get(
    "/export",
    summary="Export everything stored about a user",
    response_class=StreamingResponse,
    responses={
        200: {"description": "NDJSON records", "content": {NDJSON: {}}},
        **problem_responses(401, 403, 404, 422, 429),
    },
)
async def export_user(
    user_id: str, principal: CurrentPrincipal, lifecycle: Lifecycle, request: Request
) -> StreamingResponse:
    """Everything Mneme stores about the user, streamed as NDJSON: a header line (format,
    version, counts), then one typed record per line (account, profile, threads, messages,
    summaries, memories with history, write-path records). The user itself (`me`) or an
    admin; format in docs/export-format.md."""
    if principal.is_admin and user_id != ME:
        resolved: str | None = user_id if is_valid_identifier(user_id) else None
    else:
        resolved = principal.resolve_user(user_id)
    if resolved is None:
        raise NotFound(f"No user {user_id!r} that this caller may address.")
    is_self = not principal.is_service and resolved == principal.subject
    if not (is_self or principal.is_admin):
        raise Forbidden("An export is for the user itself or an admin.")
    headers = {"Content-Disposition": f'attachment; filename="{resolved}.ndjson"'}
    if is_head(request):
        # The GET's status and headers, and no record leaves: no snapshot is read and no
        # `admin.user_export` recorded. Streamed (of nothing), so that, as the GET's, the
        # answer has no `Content-Length`.
        await lifecycle.require_exportable(resolved)
        return StreamingResponse(_nothing(), media_type=NDJSON, headers=headers)
    export = await lifecycle.open_export(resolved)
    return StreamingResponse(export.lines(), media_type=NDJSON, headers=headers)


async def _nothing() -> AsyncIterator[bytes]:
    """An empty body, streamed."""
    return
    yield b""
