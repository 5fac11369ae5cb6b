"""HTTP routes for a user's memories and the organization's shared memories."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response, status

from service.auth.owner import Owner
from service.dependencies import Idempotency, OrgOwner, OrgWriter, UserOwner
from service.errors import ValidationFailed, invalid_inputs, problem_responses
from service.kit.idempotency import AnswerHeaders, IdempotencyKeyHeader
from service.kit.openapi import READS_ONLY
from service.kit.pagination import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, Page
from service.kit.resource_headers import (
    NOT_MODIFIED_RESPONSE,
    IfMatch,
    IfNoneMatch,
    IfNoneMatchOnWrite,
    Tagged,
    conditional_read,
    created_response,
    location,
    tagged_response,
    with_etag,
)
from service.kit.routing import ApiRoute
from service.kit.types import Timestamp
from service.memories.dependencies import (
    ChangedTextAhead,
    CreatedTextAhead,
    CreatedTextsAhead,
    EmbeddingQuestion,
    MemorySearchSvc,
    MemorySvc,
    ProcedureTextsAhead,
)
from service.memories.embedding import TextVectors
from service.memories.filters import MemoryFilter
from service.memories.recording import as_body
from service.memories.schemas import (
    Category,
    Lifecycle,
    MemoriesDeleted,
    MemoryBatchCreate,
    MemoryBatchWritten,
    MemoryCreate,
    MemoryHistory,
    MemoryKind,
    MemoryRead,
    MemoryScope,
    MemoryUpdate,
    MemoryWritten,
    Procedures,
    ProceduresUpdate,
    SearchRequest,
    SearchResponse,
    before_after,
)
from service.memories.service import MemoryService, memory_etag, procedures_etag

user_router = APIRouter(route_class=ApiRoute, prefix="/v1/users/{user_id}", tags=["memories"])
org_router = APIRouter(route_class=ApiRoute, prefix="/v1/org", tags=["org memories"])

READ_PROBLEMS = problem_responses(401, 404, 422, 429)
WRITE_PROBLEMS = problem_responses(401, 403, 404, 409, 413, 422, 429)
READ_ONE = {**tagged_response("The memory."), **NOT_MODIFIED_RESPONSE, **READ_PROBLEMS}
CHANGE_ONE = {
    **tagged_response("The memory as changed."),
    **problem_responses(401, 403, 404, 409, 412, 413, 422, 429),
}
DELETE_ONE = problem_responses(401, 403, 404, 409, 412, 413, 422, 429)
CREATE_ONE = {
    **created_response("The memory (or the identical one already stored)."),
    **WRITE_PROBLEMS,
}
READ_PROCEDURES = {
    **tagged_response("The procedural slots."),
    **NOT_MODIFIED_RESPONSE,
    **READ_PROBLEMS,
}
SET_PROCEDURES = {
    **tagged_response("The procedural slots as set."),
    **problem_responses(401, 403, 404, 409, 412, 413, 422, 429),
}
CREATE_BATCH = {
    **created_response("The memories, in input order.", tagged=False),
    **WRITE_PROBLEMS,
}


class FilterQuery:
    """The memory filter's query parameters, shared by list and delete on both routes."""

    def __init__(
        self,
        kind: Annotated[list[MemoryKind] | None, Query()] = None,
        category: Annotated[list[Category] | None, Query()] = None,
        lifecycle: Annotated[
            list[Lifecycle] | None,
            Query(description="Default: proposed and confirmed (not superseded)."),
        ] = None,
        created_after: Timestamp | None = None,
        created_before: Timestamp | None = None,
        event_after: Timestamp | None = None,
        event_before: Timestamp | None = None,
    ) -> None:
        errors = []
        for after, before, after_name, before_name in (
            (created_after, created_before, "created_after", "created_before"),
            (event_after, event_before, "event_after", "event_before"),
        ):
            try:
                before_after(before, after, after_name)
            except ValueError as refused:
                errors.append(
                    {"loc": ["query", before_name], "msg": str(refused), "type": "value_error"}
                )
        if errors:
            raise invalid_inputs(errors)
        self.kinds = kind
        self.categories = category
        self.lifecycles = lifecycle
        self.created_after = created_after
        self.created_before = created_before
        self.event_after = event_after
        self.event_before = event_before

    def for_owners(self, owners: list[Owner]) -> MemoryFilter:
        return MemoryFilter.build(
            owners,
            kinds=self.kinds,
            categories=self.categories,
            lifecycles=self.lifecycles,
            created_after=self.created_after,
            created_before=self.created_before,
            event_after=self.event_after,
            event_before=self.event_before,
        )


ScopeQuery = Annotated[
    list[MemoryScope] | None,
    Query(description="On a user's route: `user` (default), `org`, or both."),
]


async def user_filter(
    owner: UserOwner, scope: ScopeQuery = None, *, query: Annotated[FilterQuery, Depends()]
) -> MemoryFilter:
    """On a user's route, `scope` may add (or choose) the organization's memories."""
    scopes = scope or ["user"]
    return query.for_owners([owner if s == "user" else Owner.org() for s in scopes])


async def user_delete_filter(
    owner: UserOwner, scope: ScopeQuery = None, *, query: Annotated[FilterQuery, Depends()]
) -> MemoryFilter:
    """A user's route never deletes organization memories (that is the org route, admins)."""
    if scope and set(scope) != {"user"}:
        raise ValidationFailed(
            "Org memories are deleted through /v1/org/memories, not a user's route.",
            errors=[{"loc": ["query", "scope"], "msg": "only `user` here", "type": "value"}],
        )
    return query.for_owners([owner])


async def org_filter(owner: OrgOwner, query: Annotated[FilterQuery, Depends()]) -> MemoryFilter:
    return query.for_owners([owner])


async def org_delete_filter(
    owner: OrgWriter, query: Annotated[FilterQuery, Depends()]
) -> MemoryFilter:
    return query.for_owners([owner])


async def every_match(request: Request) -> None:
    """A delete by filter removes every memory its filters match, never a page of them: the
    paging of a listing (`limit`, `cursor`), copied along with its filters, is refused rather
    than ignored."""
    given = [name for name in ("limit", "cursor") if name in request.query_params]
    if given:
        raise ValidationFailed(
            "A delete by filter forgets every memory the filters match, not a page of them: "
            "leave out limit and cursor (to forget fewer, narrow the filters or delete by id).",
            errors=[
                {"loc": ["query", name], "msg": "deletes every match; no paging", "type": "value"}
                for name in given
            ],
        )


EveryMatch = [Depends(every_match)]
UserFilter = Annotated[MemoryFilter, Depends(user_filter)]
UserDeleteFilter = Annotated[MemoryFilter, Depends(user_delete_filter)]
OrgFilter = Annotated[MemoryFilter, Depends(org_filter)]
OrgDeleteFilter = Annotated[MemoryFilter, Depends(org_delete_filter)]
Cursor = Annotated[str | None, Query(description="From a previous page's next_cursor.")]
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)]
Everything = Annotated[
    bool,
    Query(
        alias="all",
        description="Required to delete without any filter; then superseded memories go too.",
    ),
]
DryRun = Annotated[
    bool,
    Query(description="Only count what would be deleted (and name the first ids); change nothing."),
]


def memory_location(memory: MemoryRead) -> str:
    """Where a memory is read: the organization's route, or its user's."""
    if memory.user_id is None:
        return location("v1", "org", "memories", memory.id)
    return location("v1", "users", memory.user_id, "memories", memory.id)


def tagged(memory: MemoryRead) -> Tagged[MemoryRead]:
    return Tagged(memory, memory_etag(memory))


def _set_procedures_tagged(response: Response, procedures: Procedures) -> Procedures:
    return with_etag(response, Tagged(procedures, procedures_etag(procedures)))


def _created_one(response: Response) -> AnswerHeaders:
    def derive(body: Any) -> dict[str, str]:
        memory = MemoryRead.model_validate(body)
        return {"Location": memory_location(memory), "ETag": memory_etag(memory)}

    return AnswerHeaders(response, derive)


def _created_batch(response: Response, owner: Owner) -> AnswerHeaders:
    """A batch creates many memories: `Location` names the collection it added them to (each
    item carries its id)."""
    if owner.user_id is None:
        collection = location("v1", "org", "memories")
    else:
        collection = location("v1", "users", owner.user_id, "memories")
    return AnswerHeaders(response, lambda _body: {"Location": collection})


async def _create_one(
    memories: MemoryService, owner: Owner, body: MemoryCreate, ahead: TextVectors
) -> MemoryWritten:
    [written] = await memories.create(owner, [body], as_body, ahead=ahead)
    return written


async def _create_batch(
    memories: MemoryService, owner: Owner, body: MemoryBatchCreate, ahead: TextVectors
) -> MemoryBatchWritten:
    return MemoryBatchWritten(items=await memories.create(owner, body.items, ahead=ahead))


# --- a user's memories -------------------------------------------------------------------------


@user_router.post(
    "/memories",
    status_code=status.HTTP_201_CREATED,
    response_model=MemoryWritten,
    summary="Remember one memory",
    responses=CREATE_ONE,
)
async def create_memory(
    owner: UserOwner,
    body: MemoryCreate,
    ahead: CreatedTextAhead,
    memories: MemorySvc,
    request: Request,
    response: Response,
    idempotency_key: IdempotencyKeyHeader,
    idempotency: Idempotency,
) -> MemoryWritten | Response:
    """Store a memory for the user. Organization memory is written through /v1/org/memories:
    an item with `scope: org` is refused here (422). Refuses secrets and PII-like text (422
    `SECRET_REFUSED`). An identical live memory is returned instead of stored twice
    (`duplicate: true`). With an `Idempotency-Key`, a retry replays the first response
    instead of writing again."""
    return await idempotency.run(
        idempotency_key,
        request,
        body,
        lambda: _create_one(memories, owner, body, ahead),
        status_code=status.HTTP_201_CREATED,
        headers=_created_one(response),
    )


@user_router.post(
    "/memories/batch",
    status_code=status.HTTP_201_CREATED,
    response_model=MemoryBatchWritten,
    summary="Remember a batch of memories",
    responses=CREATE_BATCH,
)
async def create_memories(
    owner: UserOwner,
    body: MemoryBatchCreate,
    ahead: CreatedTextsAhead,
    memories: MemorySvc,
    request: Request,
    response: Response,
    idempotency_key: IdempotencyKeyHeader,
    idempotency: Idempotency,
) -> MemoryBatchWritten | Response:
    """Store up to 100 memories at once, all or nothing, in input order; like a single
    memory, none may have `scope: org` here (422)."""
    return await idempotency.run(
        idempotency_key,
        request,
        body,
        lambda: _create_batch(memories, owner, body, ahead),
        status_code=status.HTTP_201_CREATED,
        headers=_created_batch(response, owner),
    )


@user_router.get(
    "/memories",
    response_model=Page[MemoryRead],
    summary="List memories",
    responses=READ_PROBLEMS,
)
async def list_memories(
    memories: MemorySvc,
    filters: UserFilter,
    cursor: Cursor = None,
    limit: Limit = DEFAULT_PAGE_SIZE,
) -> Page[MemoryRead]:
    """The user's memories, newest first, filtered and paged by cursor."""
    return await memories.list_page(filters, cursor=cursor, limit=limit)


@user_router.delete(
    "/memories",
    response_model=MemoriesDeleted,
    summary="Forget memories matching a filter",
    responses=WRITE_PROBLEMS,
    dependencies=EveryMatch,
)
async def delete_memories(
    memories: MemorySvc,
    filters: UserDeleteFilter,
    everything: Everything = False,
    dry_run: DryRun = False,
) -> MemoriesDeleted:
    """Delete exactly the memories the same filters list (e.g. `kind=episodic`; live ones
    unless `lifecycle` says otherwise), every one of them: `limit` and `cursor` are refused
    (422). `all=true` with no filter forgets everything. The answer counts what was removed;
    `dry_run=true` only counts. Each deletion is kept in the history."""
    return await memories.delete_matching(filters, everything=everything, dry_run=dry_run)


@user_router.post(
    "/memories/search",
    response_model=SearchResponse,
    summary="Search memories",
    responses=READ_PROBLEMS,
    openapi_extra=READS_ONLY,
)
async def search_memories(
    owner: UserOwner, body: SearchRequest, question: EmbeddingQuestion, search: MemorySearchSvc
) -> SearchResponse:
    """Hybrid search (full-text OR query + vector similarity, fused in one SQL statement)
    over the user's and the organization's memories. Every hit carries its component scores."""
    return await search.search(owner, body, embedding_question=question, last_database_work=True)


@user_router.get(
    "/memories/{memory_id:uuid}",
    response_model=MemoryRead,
    summary="Get a memory",
    responses=READ_ONE,
)
async def get_memory(
    owner: UserOwner,
    memory_id: uuid.UUID,
    memories: MemorySvc,
    response: Response,
    if_none_match: IfNoneMatch = None,
) -> MemoryRead | Response:
    """One of the user's memories, or one of the organization's (which the listing shows with
    `scope=org`; read-only here), with its ETag. With `If-None-Match` naming the current ETag,
    304 and no body."""
    memory = await memories.get(owner, memory_id, with_org=True)
    return conditional_read(response, tagged(memory), if_none_match)


@user_router.patch(
    "/memories/{memory_id:uuid}",
    response_model=MemoryRead,
    summary="Change a memory",
    responses=CHANGE_ONE,
)
async def update_memory(
    owner: UserOwner,
    memory_id: uuid.UUID,
    body: MemoryUpdate,
    ahead: ChangedTextAhead,
    memories: MemorySvc,
    response: Response,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatchOnWrite = None,
) -> MemoryRead:
    """Change text (re-embedded), category, confidence, lifecycle (e.g. confirm a proposed
    memory), review flag, event time, metadata or expiry, of one of the user's own memories (an
    organization memory is changed on its own route: 422 here). Recorded in the history. A keyed
    memory's new category moves its key with it (409 `CONFLICT` when another memory holds the
    key there). With `If-Match`, only if the memory still has that ETag (else 412 and nothing
    changes); with `If-None-Match: *` (or its ETag), 412 since it exists (in that state)."""
    updated = await memories.update(
        owner, memory_id, body, if_match=if_match, if_none_match=if_none_match, ahead=ahead
    )
    return with_etag(response, tagged(updated))


@user_router.delete(
    "/memories/{memory_id:uuid}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    summary="Forget a memory",
    responses=DELETE_ONE,
)
async def delete_memory(
    owner: UserOwner,
    memory_id: uuid.UUID,
    memories: MemorySvc,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatchOnWrite = None,
) -> None:
    """Delete one of the user's own memories (an organization memory is deleted on its own
    route: 422 here); its history keeps the deletion. With `If-Match`, only if the memory
    still has that ETag (else 412 and nothing changes); with `If-None-Match: *` (or its ETag),
    412 since it exists (in that state)."""
    await memories.delete(owner, memory_id, if_match=if_match, if_none_match=if_none_match)


@user_router.get(
    "/memories/{memory_id:uuid}/history",
    response_model=MemoryHistory,
    summary="A memory's change history",
    responses=READ_PROBLEMS,
)
async def get_memory_history(
    owner: UserOwner, memory_id: uuid.UUID, memories: MemorySvc
) -> MemoryHistory:
    """Every add / update / supersede / delete of the memory (the user's, or an organization
    memory's), oldest first, with old and new text. Still available after the memory was
    deleted."""
    return await memories.history(owner, memory_id, with_org=True)


@user_router.get(
    "/procedures",
    response_model=Procedures,
    summary="Get the user's procedural instructions",
    responses=READ_PROCEDURES,
)
async def get_procedures(
    owner: UserOwner, memories: MemorySvc, response: Response, if_none_match: IfNoneMatch = None
) -> Procedures | Response:
    """The user's instruction slots (style, workflow, safety, task_policies), with their ETag;
    an unset slot is null. With `If-None-Match` naming the current ETag, 304 and no body."""
    procedures = await memories.procedures(owner)
    return conditional_read(
        response, Tagged(procedures, procedures_etag(procedures)), if_none_match
    )


@user_router.put(
    "/procedures",
    response_model=Procedures,
    summary="Set the user's procedural instructions",
    responses=SET_PROCEDURES,
)
async def set_procedures(
    owner: UserOwner,
    body: ProceduresUpdate,
    ahead: ProcedureTextsAhead,
    memories: MemorySvc,
    response: Response,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatchOnWrite = None,
) -> Procedures:
    """Set slots (style, workflow, safety, task_policies); an empty string clears a slot.
    A replaced instruction is superseded, with history, not deleted. A slot holds one live
    memory: any write that makes a procedural memory of its category live (a keyed put, a
    POST, a PATCH) supersedes the other the same way. With `If-Match`, only if the slots
    still have that ETag (else 412 and nothing changes); with `If-None-Match: *` (or their
    ETag), 412, since the slots always exist (in that state)."""
    procedures = await memories.set_procedures(
        owner, body, if_match=if_match, if_none_match=if_none_match, ahead=ahead
    )
    return _set_procedures_tagged(response, procedures)


# --- the organization's shared memories --------------------------------------------------------


@org_router.post(
    "/memories",
    status_code=status.HTTP_201_CREATED,
    response_model=MemoryWritten,
    summary="Remember an organization memory",
    responses=CREATE_ONE,
)
async def create_org_memory(
    owner: OrgWriter,
    body: MemoryCreate,
    ahead: CreatedTextAhead,
    memories: MemorySvc,
    request: Request,
    response: Response,
    idempotency_key: IdempotencyKeyHeader,
    idempotency: Idempotency,
) -> MemoryWritten | Response:
    """Organization-shared memory, readable by every user of the tenant; admins only. An item
    with `scope: user` is refused here (422): a user's memory is written through the user's
    route."""
    return await idempotency.run(
        idempotency_key,
        request,
        body,
        lambda: _create_one(memories, owner, body, ahead),
        status_code=status.HTTP_201_CREATED,
        headers=_created_one(response),
    )


@org_router.post(
    "/memories/batch",
    status_code=status.HTTP_201_CREATED,
    response_model=MemoryBatchWritten,
    summary="Remember a batch of organization memories",
    responses=CREATE_BATCH,
)
async def create_org_memories(
    owner: OrgWriter,
    body: MemoryBatchCreate,
    ahead: CreatedTextsAhead,
    memories: MemorySvc,
    request: Request,
    response: Response,
    idempotency_key: IdempotencyKeyHeader,
    idempotency: Idempotency,
) -> MemoryBatchWritten | Response:
    """Store up to 100 organization memories at once, all or nothing, in input order; admins
    only. Like a single memory, none may have `scope: user` here (422)."""
    return await idempotency.run(
        idempotency_key,
        request,
        body,
        lambda: _create_batch(memories, owner, body, ahead),
        status_code=status.HTTP_201_CREATED,
        headers=_created_batch(response, owner),
    )


@org_router.get(
    "/memories",
    response_model=Page[MemoryRead],
    summary="List organization memories",
    responses=READ_PROBLEMS,
)
async def list_org_memories(
    memories: MemorySvc, filters: OrgFilter, cursor: Cursor = None, limit: Limit = DEFAULT_PAGE_SIZE
) -> Page[MemoryRead]:
    """The organization's shared memories, newest first, filtered and paged by cursor;
    readable by every user of the tenant."""
    return await memories.list_page(filters, cursor=cursor, limit=limit)


@org_router.delete(
    "/memories",
    response_model=MemoriesDeleted,
    summary="Forget organization memories matching a filter",
    responses=WRITE_PROBLEMS,
    dependencies=EveryMatch,
)
async def delete_org_memories(
    memories: MemorySvc,
    filters: OrgDeleteFilter,
    everything: Everything = False,
    dry_run: DryRun = False,
) -> MemoriesDeleted:
    """Delete exactly the organization memories the same filters list, every one of them
    (`limit` and `cursor` are refused); `all=true` with no filter forgets them all. The
    answer counts what was removed; `dry_run=true` only counts. Each deletion is kept in the
    history. Admins only."""
    return await memories.delete_matching(filters, everything=everything, dry_run=dry_run)


@org_router.get(
    "/memories/{memory_id:uuid}",
    response_model=MemoryRead,
    summary="Get an organization memory",
    responses=READ_ONE,
)
async def get_org_memory(
    owner: OrgOwner,
    memory_id: uuid.UUID,
    memories: MemorySvc,
    response: Response,
    if_none_match: IfNoneMatch = None,
) -> MemoryRead | Response:
    """One organization memory, with its ETag. With `If-None-Match` naming the current ETag,
    304 and no body."""
    return conditional_read(response, tagged(await memories.get(owner, memory_id)), if_none_match)


@org_router.patch(
    "/memories/{memory_id:uuid}",
    response_model=MemoryRead,
    summary="Change an organization memory",
    responses=CHANGE_ONE,
)
async def update_org_memory(
    owner: OrgWriter,
    memory_id: uuid.UUID,
    body: MemoryUpdate,
    ahead: ChangedTextAhead,
    memories: MemorySvc,
    response: Response,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatchOnWrite = None,
) -> MemoryRead:
    """Change an organization memory as `PATCH …/memories/{memory_id}` changes a user's;
    admins only. With `If-Match`, only if it still has that ETag (else 412 and nothing
    changes); `If-None-Match` as on a user's memory."""
    updated = await memories.update(
        owner, memory_id, body, if_match=if_match, if_none_match=if_none_match, ahead=ahead
    )
    return with_etag(response, tagged(updated))


@org_router.delete(
    "/memories/{memory_id:uuid}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    summary="Forget an organization memory",
    responses=DELETE_ONE,
)
async def delete_org_memory(
    owner: OrgWriter,
    memory_id: uuid.UUID,
    memories: MemorySvc,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatchOnWrite = None,
) -> None:
    """Delete an organization memory; its history keeps the deletion. Admins only. With
    `If-Match`, only if it still has that ETag (else 412 and nothing changes); `If-None-Match`
    as on a user's memory."""
    await memories.delete(owner, memory_id, if_match=if_match, if_none_match=if_none_match)


@org_router.get(
    "/memories/{memory_id:uuid}/history",
    response_model=MemoryHistory,
    summary="An organization memory's change history",
    responses=READ_PROBLEMS,
)
async def get_org_memory_history(
    owner: OrgOwner, memory_id: uuid.UUID, memories: MemorySvc
) -> MemoryHistory:
    """Every add / update / supersede / delete of the organization memory, oldest first, with
    old and new text. Still available after the memory was deleted."""
    return await memories.history(owner, memory_id)


@org_router.get(
    "/procedures",
    response_model=Procedures,
    summary="Get the organization's procedural instructions",
    responses=READ_PROCEDURES,
)
async def get_org_procedures(
    owner: OrgOwner, memories: MemorySvc, response: Response, if_none_match: IfNoneMatch = None
) -> Procedures | Response:
    """The organization's instruction slots, which every user's context block includes, with
    their ETag. With `If-None-Match` naming the current ETag, 304 and no body."""
    procedures = await memories.procedures(owner)
    return conditional_read(
        response, Tagged(procedures, procedures_etag(procedures)), if_none_match
    )


@org_router.put(
    "/procedures",
    response_model=Procedures,
    summary="Set the organization's procedural instructions",
    responses=SET_PROCEDURES,
)
async def set_org_procedures(
    owner: OrgWriter,
    body: ProceduresUpdate,
    ahead: ProcedureTextsAhead,
    memories: MemorySvc,
    response: Response,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatchOnWrite = None,
) -> Procedures:
    """Set the organization's slots as `PUT …/procedures` sets a user's; admins only. With
    `If-Match`, only if the slots still have that ETag (else 412 and nothing changes);
    `If-None-Match` as on a user's slots."""
    procedures = await memories.set_procedures(
        owner, body, if_match=if_match, if_none_match=if_none_match, ahead=ahead
    )
    return _set_procedures_tagged(response, procedures)
