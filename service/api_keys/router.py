"""HTTP routes for the tenant's API keys (admins only)."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response, status

from service.api_keys.dependencies import ApiKeySvc
from service.api_keys.errors import ApiKeySecretNotReplayable
from service.api_keys.schemas import ApiKeyCreate, ApiKeyCreated, ApiKeyRead
from service.api_keys.service import api_key_etag
from service.dependencies import Idempotency
from service.errors import problem_responses
from service.kit.idempotency import IdempotencyKeyHeader, IdempotentReplay
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

router = APIRouter(route_class=ApiRoute, prefix="/v1/admin/api-keys", tags=["admin"])


def tagged(key: ApiKeyRead) -> Tagged[ApiKeyRead]:
    return Tagged(key, api_key_etag(key))


def _created(response: Response, created: ApiKeyCreated) -> ApiKeyCreated:
    response.headers["Location"] = location("v1", "admin", "api-keys", created.id)
    return with_etag(response, Tagged(created, api_key_etag(created)))


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=ApiKeyCreated,
    summary="Create an API key",
    responses={
        **created_response("The key, with its secret (shown only here)."),
        **problem_responses(401, 403, 409, 422, 429),
    },
)
async def create_api_key(
    body: ApiKeyCreate,
    api_keys: ApiKeySvc,
    request: Request,
    response: Response,
    idempotency_key: IdempotencyKeyHeader,
    idempotency: Idempotency,
) -> ApiKeyCreated:
    """Create a service credential for this tenant. The full key is returned once, here;
    only its hash is stored. A `name` that looks like a secret is refused (422
    `SECRET_REFUSED`).

    A retry with the same `Idempotency-Key` never mints a second key. Because the secret is
    not stored anywhere, the retry cannot repeat it either: it gets 409
    `API_KEY_ALREADY_CREATED` with the `key_id` the first attempt created (revoke that key and
    create another if its secret was lost)."""
    if idempotency_key is None:
        return _created(response, await api_keys.create(body))
    outcome = await idempotency.begin_request(idempotency_key, request, body)
    if isinstance(outcome, IdempotentReplay):
        raise ApiKeySecretNotReplayable(
            "This Idempotency-Key already created an API key; its secret was shown only in "
            "that response.",
            key_id=outcome.body["id"],
        )
    created = await api_keys.create(body)
    # Remembered without the secret: only the key's hash may outlive this response.
    await idempotency.complete(
        outcome, status.HTTP_201_CREATED, created.model_dump(mode="json", exclude={"key"})
    )
    return _created(response, created)


@router.get(
    "",
    response_model=Page[ApiKeyRead],
    summary="List API keys",
    responses=problem_responses(401, 403, 422, 429),
)
async def list_api_keys(
    api_keys: ApiKeySvc,
    cursor: Annotated[str | None, Query(description="From a previous page's next_cursor.")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = DEFAULT_PAGE_SIZE,
    include_revoked: bool = False,
) -> Page[ApiKeyRead]:
    """This tenant's API keys, newest first. Secrets are never shown again."""
    return await api_keys.list(cursor=cursor, limit=limit, include_revoked=include_revoked)


@router.get(
    "/{key_id}",
    response_model=ApiKeyRead,
    summary="Get an API key",
    responses={
        **tagged_response("The key (never its secret)."),
        **NOT_MODIFIED_RESPONSE,
        **problem_responses(401, 403, 404, 422, 429),
    },
)
async def get_api_key(
    key_id: uuid.UUID, api_keys: ApiKeySvc, response: Response, if_none_match: IfNoneMatch = None
) -> ApiKeyRead | Response:
    """One of this tenant's API keys, revoked or not, with its ETag; never its secret. With
    `If-None-Match` naming the current ETag, 304 and no body."""
    return conditional_read(response, tagged(await api_keys.get(key_id)), if_none_match)


@router.delete(
    "/{key_id}",
    response_model=ApiKeyRead,
    summary="Revoke an API key",
    responses={
        **tagged_response("The revoked key."),
        **problem_responses(401, 403, 404, 412, 422, 429),
    },
)
async def revoke_api_key(
    key_id: uuid.UUID,
    api_keys: ApiKeySvc,
    response: Response,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatchOnWrite = None,
) -> ApiKeyRead:
    """Revoke a key: requests carrying it are refused from now on. Revoking twice is harmless.
    With `If-Match`, only if the key is still in that state (else 412); with `If-None-Match:
    *` (or its ETag), 412 since it exists (in that state)."""
    revoked = await api_keys.revoke(key_id, if_match=if_match, if_none_match=if_none_match)
    return with_etag(response, tagged(revoked))
