"""HTTP routes for a user's profile document and the organization's."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path, Request, Response

from service.auth.owner import Owner
from service.dependencies import OrgOwner, OrgWriter, UserOwner
from service.errors import problem_responses
from service.kit.resource_headers import (
    NOT_MODIFIED_RESPONSE,
    IfMatch,
    IfNoneMatch,
    IfNoneMatchOnWrite,
    conditional_read,
    tagged_response,
    with_etag,
)
from service.kit.routing import ApiRoute
from service.profile.dependencies import ProfileSvc
from service.profile.errors import UnsupportedPatchMediaType
from service.profile.schemas import (
    JSON_PATCH_MEDIA_TYPE,
    KEY_PATTERN,
    MAX_KEY_LENGTH,
    ProfilePatch,
    ProfilePatchResult,
    ProfileRead,
)
from service.profile.service import ProfileService

user_router = APIRouter(route_class=ApiRoute, prefix="/v1/users/{user_id}", tags=["profile"])
org_router = APIRouter(route_class=ApiRoute, prefix="/v1/org", tags=["org profile"])

PATCH_MEDIA_TYPES = frozenset({JSON_PATCH_MEDIA_TYPE, "application/json"})


def _ok_with_etag(description: str, *problems: int) -> dict[int | str, dict[str, Any]]:
    return {**tagged_response(description), **problem_responses(*problems)}


def _read_with_etag(description: str, *problems: int) -> dict[int | str, dict[str, Any]]:
    return {**_ok_with_etag(description, *problems), **NOT_MODIFIED_RESPONSE}


async def require_patch_media_type(request: Request) -> None:
    """RFC 5789: a patch document in a format the server does not apply is a 415."""
    content_type = request.headers.get("content-type", "")
    if content_type.split(";", 1)[0].strip().lower() not in PATCH_MEDIA_TYPES:
        raise UnsupportedPatchMediaType(
            f"Send the patch as {JSON_PATCH_MEDIA_TYPE} (or application/json).",
            headers={"Accept-Patch": JSON_PATCH_MEDIA_TYPE},
        )


PatchMediaType = Annotated[None, Depends(require_patch_media_type)]
PatchBody = Annotated[
    ProfilePatch,
    Body(
        media_type=JSON_PATCH_MEDIA_TYPE,
        examples=[
            [
                {"op": "add", "path": "/city", "value": "Lisbon"},
                {"op": "replace", "path": "/name", "value": "Ada L."},
                {"op": "remove", "path": "/employer"},
            ]
        ],
    ),
]
ProfileKeyPath = Annotated[
    str, Path(pattern=KEY_PATTERN, max_length=MAX_KEY_LENGTH, description="A stored key.")
]


async def _read(
    profiles: ProfileService, owner: Owner, response: Response, if_none_match: str | None
) -> ProfileRead | Response:
    response.headers["Accept-Patch"] = JSON_PATCH_MEDIA_TYPE
    return conditional_read(response, await profiles.read(owner), if_none_match)


async def _patch(
    profiles: ProfileService,
    owner: Owner,
    body: ProfilePatch,
    response: Response,
    if_match: str | None,
    if_none_match: str | None,
) -> ProfilePatchResult:
    return with_etag(response, await profiles.patch(owner, body.root, if_match, if_none_match))


async def _delete_key(
    profiles: ProfileService,
    owner: Owner,
    key: str,
    response: Response,
    if_match: str | None,
    if_none_match: str | None,
) -> ProfilePatchResult:
    return with_etag(response, await profiles.delete_key(owner, key, if_match, if_none_match))


# --- a user's profile -----------------------------------------------------------------------


@user_router.get(
    "/profile",
    response_model=ProfileRead,
    summary="Get a user's profile",
    responses=_read_with_etag("The merged profile.", 401, 404, 422, 429),
)
async def get_profile(
    owner: UserOwner, profiles: ProfileSvc, response: Response, if_none_match: IfNoneMatch = None
) -> ProfileRead | Response:
    """The stored profile merged with the user's account details (name, email, avatar,
    socials fill keys the profile lacks), each key labelled `memory` or `account`."""
    return await _read(profiles, owner, response, if_none_match)


@user_router.patch(
    "/profile",
    response_model=ProfilePatchResult,
    summary="Change a user's profile",
    responses=_ok_with_etag("What the patch did.", 401, 404, 409, 412, 413, 415, 422, 429),
)
async def patch_profile(
    owner: UserOwner,
    _media_type: PatchMediaType,
    body: PatchBody,
    profiles: ProfileSvc,
    response: Response,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatchOnWrite = None,
) -> ProfilePatchResult:
    """Apply a JSON Patch (`add`, `replace`, `remove` of top-level keys) to the merged view,
    all or nothing. Send it as `application/json-patch+json`; `application/json` is accepted
    too. `replace` works on a key from the account (the profile then stores an
    override); account keys a patch does not touch are never copied into the profile.

    Errors: `replace`/`remove` of a key the view lacks → 409 `PATCH_FAILED`; `remove` of a
    key that only the account provides → 409 `KEY_FROM_ACCOUNT`; a stored document over
    `max_bytes` → 413 `PROFILE_TOO_LARGE` (with `attempted_bytes`, `max_bytes`); a stale
    `If-Match`, or `If-None-Match` of `*` or the current ETag (a profile always exists) → 412;
    other ops (`move`, `copy`, `test`), nested or array paths, and values
    naming tokens or account ids → 422. Each applied operation echoes `old_value`, the value
    just before it ran. Concurrent patches are applied one after another, never lost."""
    return await _patch(profiles, owner, body, response, if_match, if_none_match)


@user_router.delete(
    "/profile/{key}",
    response_model=ProfilePatchResult,
    summary="Delete a key from a user's profile",
    responses=_ok_with_etag("The key was removed.", 401, 404, 409, 412, 422, 429),
)
async def delete_profile_key(
    owner: UserOwner,
    key: ProfileKeyPath,
    profiles: ProfileSvc,
    response: Response,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatchOnWrite = None,
) -> ProfilePatchResult:
    """Remove one stored key (404 if the profile does not store it). A key that only comes
    from the user's account cannot be deleted here: 409 `KEY_FROM_ACCOUNT`."""
    return await _delete_key(profiles, owner, key, response, if_match, if_none_match)


# --- the organization's profile ---------------------------------------------------------------


@org_router.get(
    "/profile",
    response_model=ProfileRead,
    summary="Get the organization profile",
    responses=_read_with_etag("The organization profile.", 401, 422, 429),
)
async def get_org_profile(
    owner: OrgOwner, profiles: ProfileSvc, response: Response, if_none_match: IfNoneMatch = None
) -> ProfileRead | Response:
    """The profile shared by every user of the tenant; readable by all of them."""
    return await _read(profiles, owner, response, if_none_match)


@org_router.patch(
    "/profile",
    response_model=ProfilePatchResult,
    summary="Change the organization profile",
    responses=_ok_with_etag("What the patch did.", 401, 403, 409, 412, 413, 415, 422, 429),
)
async def patch_org_profile(
    owner: OrgWriter,
    _media_type: PatchMediaType,
    body: PatchBody,
    profiles: ProfileSvc,
    response: Response,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatchOnWrite = None,
) -> ProfilePatchResult:
    """Same rules as a user's profile, without account details; admins only (403
    `ORG_WRITE_FORBIDDEN`)."""
    return await _patch(profiles, owner, body, response, if_match, if_none_match)


@org_router.delete(
    "/profile/{key}",
    response_model=ProfilePatchResult,
    summary="Delete a key from the organization profile",
    responses=_ok_with_etag("The key was removed.", 401, 403, 404, 412, 422, 429),
)
async def delete_org_profile_key(
    owner: OrgWriter,
    key: ProfileKeyPath,
    profiles: ProfileSvc,
    response: Response,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatchOnWrite = None,
) -> ProfilePatchResult:
    """Remove one stored key of the organization profile; admins only."""
    return await _delete_key(profiles, owner, key, response, if_match, if_none_match)
