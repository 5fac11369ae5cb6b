"""HTTP routes for the accounts (users) Mneme knows in the caller's tenant."""

from __future__ import annotations

from fastapi import APIRouter, Response

from service.accounts.dependencies import AccountSvc
from service.accounts.overlay import AccountOverlayUpdate
from service.accounts.schemas import UserRead
from service.accounts.service import user_etag
from service.dependencies import AddressedUserId
from service.errors import problem_responses
from service.kit.resource_headers import (
    NOT_MODIFIED_RESPONSE,
    IfMatch,
    IfNoneMatch,
    IfNoneMatchOnWrite,
    Tagged,
    conditional_read,
    tagged_response,
    with_etag,
)
from service.kit.routing import ApiRoute

router = APIRouter(route_class=ApiRoute, prefix="/v1/users", tags=["users"])


@router.get(
    "/{user_id}",
    response_model=UserRead,
    summary="Get a user's account",
    responses={
        **tagged_response("The user's account."),
        **NOT_MODIFIED_RESPONSE,
        **problem_responses(401, 404, 422, 429),
    },
)
async def get_user(
    user_id: AddressedUserId,
    accounts: AccountSvc,
    response: Response,
    if_none_match: IfNoneMatch = None,
) -> UserRead | Response:
    """The account Mneme knows for a user: its id and the details its identity provider shared
    (the auth overlay). `me` is the caller."""
    user = await accounts.get_user(user_id)
    return conditional_read(response, Tagged(user, user_etag(user)), if_none_match)


@router.put(
    "/{user_id}/account",
    response_model=UserRead,
    summary="Set a user's account details",
    responses={
        **tagged_response("The user's account as set."),
        **problem_responses(401, 403, 404, 412, 422, 429),
    },
)
async def set_user_account(
    user_id: AddressedUserId,
    body: AccountOverlayUpdate,
    accounts: AccountSvc,
    response: Response,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatchOnWrite = None,
) -> UserRead:
    """Set the auth overlay (name, email, avatar, linked providers) of a user of the tenant,
    creating the user if Mneme has not seen it. For service principals (an agent backend that
    holds the user's session); an end user gets 403 `ACCOUNT_WRITE_FORBIDDEN`, because its
    overlay is recorded from its token's claims on each request. A later end-user request whose
    token carries account claims replaces what was set here; one without any keeps it.

    The body replaces the whole overlay. Fields naming tokens or account ids (`access_token`,
    `id_token`, `accountId`, …) and token-shaped values are refused with a 422 whose error
    type is `credential_refused`; nothing is stored. The password `credential` provider is
    dropped from `socials`. With `If-Match` (the ETag of `GET /v1/users/{user_id}`), only if
    the account is still in that state (else 412 and nothing changes); with `If-None-Match:
    *`, only if Mneme does not know the user yet (with its ETag: unless it is in that state)."""
    user = await accounts.set_overlay(user_id, body, if_match=if_match, if_none_match=if_none_match)
    return with_etag(response, Tagged(user, user_etag(user)))
