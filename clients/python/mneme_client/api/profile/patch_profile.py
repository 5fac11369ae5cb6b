from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...models.patch_add import PatchAdd
from ...models.patch_remove import PatchRemove
from ...models.patch_replace import PatchReplace
from ...models.problem import Problem
from ...models.profile_patch_result import ProfilePatchResult
from ...types import UNSET, Response, Unset


def _get_kwargs(
    user_id: str,
    *,
    body: list[PatchAdd | PatchRemove | PatchReplace],
    if_match: None | str | Unset = UNSET,
    if_none_match: None | str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(if_match, Unset):
        headers["if-match"] = if_match

    if not isinstance(if_none_match, Unset):
        headers["if-none-match"] = if_none_match

    _kwargs: dict[str, Any] = {
        "method": "patch",
        "url": "/v1/users/{user_id}/profile".format(
            user_id=quote(str(user_id), safe=""),
        ),
    }

    _kwargs["json"] = []
    for componentsschemas_profile_patch_item_data in body:
        componentsschemas_profile_patch_item: dict[str, Any]
        if isinstance(componentsschemas_profile_patch_item_data, PatchAdd):
            componentsschemas_profile_patch_item = (
                componentsschemas_profile_patch_item_data.to_dict()
            )
        elif isinstance(componentsschemas_profile_patch_item_data, PatchReplace):
            componentsschemas_profile_patch_item = (
                componentsschemas_profile_patch_item_data.to_dict()
            )
        else:
            componentsschemas_profile_patch_item = (
                componentsschemas_profile_patch_item_data.to_dict()
            )

        _kwargs["json"].append(componentsschemas_profile_patch_item)

    headers["Content-Type"] = "application/json-patch+json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | ProfilePatchResult:
    if response.status_code == 200:
        response_200 = ProfilePatchResult.from_dict(response.json())

        return response_200

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())

        return response_404

    if response.status_code == 409:
        response_409 = Problem.from_dict(response.json())

        return response_409

    if response.status_code == 412:
        response_412 = Problem.from_dict(response.json())

        return response_412

    if response.status_code == 413:
        response_413 = Problem.from_dict(response.json())

        return response_413

    if response.status_code == 415:
        response_415 = Problem.from_dict(response.json())

        return response_415

    if response.status_code == 422:
        response_422 = Problem.from_dict(response.json())

        return response_422

    if response.status_code == 429:
        response_429 = Problem.from_dict(response.json())

        return response_429

    if response.status_code == 500:
        response_500 = Problem.from_dict(response.json())

        return response_500

    if response.status_code == 503:
        response_503 = Problem.from_dict(response.json())

        return response_503

    response_default = Problem.from_dict(response.json())

    return response_default


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[Problem | ProfilePatchResult]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    user_id: str,
    *,
    client: AuthenticatedClient,
    body: list[PatchAdd | PatchRemove | PatchReplace],
    if_match: None | str | Unset = UNSET,
    if_none_match: None | str | Unset = UNSET,
) -> Response[Problem | ProfilePatchResult]:
    """Change a user's profile

     Apply a JSON Patch (`add`, `replace`, `remove` of top-level keys) to the merged view,
    all or nothing. Send it as `application/json-patch+json`; `application/json` is accepted
    too. `replace` works on a key from the account (the profile then stores an
    override); account keys a patch does not touch are never copied into the profile.

    Errors: `replace`/`remove` of a key the view lacks → 409 `PATCH_FAILED`; `remove` of a
    key that only the account provides → 409 `KEY_FROM_ACCOUNT`; a stored document over
    `max_bytes` → 413 `PROFILE_TOO_LARGE` (with `attempted_bytes`, `max_bytes`); a stale
    `If-Match`, or `If-None-Match` of `*` or the current ETag (a profile always exists) → 412;
    other ops (`move`, `copy`, `test`), nested or array paths, and values
    naming tokens or account ids → 422. Each applied operation echoes `old_value`, the value
    just before it ran. Concurrent patches are applied one after another, never lost.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        if_match (None | str | Unset): An ETag from a previous read or write: the change happens
            only if the resource is still in that state (412 `PRECONDITION_FAILED` otherwise, with the
            current ETag, and nothing changed).
        if_none_match (None | str | Unset): `*`, or an ETag: 412 `PRECONDITION_FAILED` (with the
            current ETag, and nothing changed) when the resource exists, or is in that state.
        body (list[PatchAdd | PatchRemove | PatchReplace]): An RFC 6902 JSON Patch limited to
            `add`, `replace` and `remove` of top-level keys,
            applied in order, all or nothing.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | ProfilePatchResult]
    """

    kwargs = _get_kwargs(
        user_id=user_id,
        body=body,
        if_match=if_match,
        if_none_match=if_none_match,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    user_id: str,
    *,
    client: AuthenticatedClient,
    body: list[PatchAdd | PatchRemove | PatchReplace],
    if_match: None | str | Unset = UNSET,
    if_none_match: None | str | Unset = UNSET,
) -> Problem | ProfilePatchResult | None:
    """Change a user's profile

     Apply a JSON Patch (`add`, `replace`, `remove` of top-level keys) to the merged view,
    all or nothing. Send it as `application/json-patch+json`; `application/json` is accepted
    too. `replace` works on a key from the account (the profile then stores an
    override); account keys a patch does not touch are never copied into the profile.

    Errors: `replace`/`remove` of a key the view lacks → 409 `PATCH_FAILED`; `remove` of a
    key that only the account provides → 409 `KEY_FROM_ACCOUNT`; a stored document over
    `max_bytes` → 413 `PROFILE_TOO_LARGE` (with `attempted_bytes`, `max_bytes`); a stale
    `If-Match`, or `If-None-Match` of `*` or the current ETag (a profile always exists) → 412;
    other ops (`move`, `copy`, `test`), nested or array paths, and values
    naming tokens or account ids → 422. Each applied operation echoes `old_value`, the value
    just before it ran. Concurrent patches are applied one after another, never lost.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        if_match (None | str | Unset): An ETag from a previous read or write: the change happens
            only if the resource is still in that state (412 `PRECONDITION_FAILED` otherwise, with the
            current ETag, and nothing changed).
        if_none_match (None | str | Unset): `*`, or an ETag: 412 `PRECONDITION_FAILED` (with the
            current ETag, and nothing changed) when the resource exists, or is in that state.
        body (list[PatchAdd | PatchRemove | PatchReplace]): An RFC 6902 JSON Patch limited to
            `add`, `replace` and `remove` of top-level keys,
            applied in order, all or nothing.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | ProfilePatchResult
    """

    return sync_detailed(
        user_id=user_id,
        client=client,
        body=body,
        if_match=if_match,
        if_none_match=if_none_match,
    ).parsed


async def asyncio_detailed(
    user_id: str,
    *,
    client: AuthenticatedClient,
    body: list[PatchAdd | PatchRemove | PatchReplace],
    if_match: None | str | Unset = UNSET,
    if_none_match: None | str | Unset = UNSET,
) -> Response[Problem | ProfilePatchResult]:
    """Change a user's profile

     Apply a JSON Patch (`add`, `replace`, `remove` of top-level keys) to the merged view,
    all or nothing. Send it as `application/json-patch+json`; `application/json` is accepted
    too. `replace` works on a key from the account (the profile then stores an
    override); account keys a patch does not touch are never copied into the profile.

    Errors: `replace`/`remove` of a key the view lacks → 409 `PATCH_FAILED`; `remove` of a
    key that only the account provides → 409 `KEY_FROM_ACCOUNT`; a stored document over
    `max_bytes` → 413 `PROFILE_TOO_LARGE` (with `attempted_bytes`, `max_bytes`); a stale
    `If-Match`, or `If-None-Match` of `*` or the current ETag (a profile always exists) → 412;
    other ops (`move`, `copy`, `test`), nested or array paths, and values
    naming tokens or account ids → 422. Each applied operation echoes `old_value`, the value
    just before it ran. Concurrent patches are applied one after another, never lost.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        if_match (None | str | Unset): An ETag from a previous read or write: the change happens
            only if the resource is still in that state (412 `PRECONDITION_FAILED` otherwise, with the
            current ETag, and nothing changed).
        if_none_match (None | str | Unset): `*`, or an ETag: 412 `PRECONDITION_FAILED` (with the
            current ETag, and nothing changed) when the resource exists, or is in that state.
        body (list[PatchAdd | PatchRemove | PatchReplace]): An RFC 6902 JSON Patch limited to
            `add`, `replace` and `remove` of top-level keys,
            applied in order, all or nothing.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | ProfilePatchResult]
    """

    kwargs = _get_kwargs(
        user_id=user_id,
        body=body,
        if_match=if_match,
        if_none_match=if_none_match,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    user_id: str,
    *,
    client: AuthenticatedClient,
    body: list[PatchAdd | PatchRemove | PatchReplace],
    if_match: None | str | Unset = UNSET,
    if_none_match: None | str | Unset = UNSET,
) -> Problem | ProfilePatchResult | None:
    """Change a user's profile

     Apply a JSON Patch (`add`, `replace`, `remove` of top-level keys) to the merged view,
    all or nothing. Send it as `application/json-patch+json`; `application/json` is accepted
    too. `replace` works on a key from the account (the profile then stores an
    override); account keys a patch does not touch are never copied into the profile.

    Errors: `replace`/`remove` of a key the view lacks → 409 `PATCH_FAILED`; `remove` of a
    key that only the account provides → 409 `KEY_FROM_ACCOUNT`; a stored document over
    `max_bytes` → 413 `PROFILE_TOO_LARGE` (with `attempted_bytes`, `max_bytes`); a stale
    `If-Match`, or `If-None-Match` of `*` or the current ETag (a profile always exists) → 412;
    other ops (`move`, `copy`, `test`), nested or array paths, and values
    naming tokens or account ids → 422. Each applied operation echoes `old_value`, the value
    just before it ran. Concurrent patches are applied one after another, never lost.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        if_match (None | str | Unset): An ETag from a previous read or write: the change happens
            only if the resource is still in that state (412 `PRECONDITION_FAILED` otherwise, with the
            current ETag, and nothing changed).
        if_none_match (None | str | Unset): `*`, or an ETag: 412 `PRECONDITION_FAILED` (with the
            current ETag, and nothing changed) when the resource exists, or is in that state.
        body (list[PatchAdd | PatchRemove | PatchReplace]): An RFC 6902 JSON Patch limited to
            `add`, `replace` and `remove` of top-level keys,
            applied in order, all or nothing.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | ProfilePatchResult
    """

    return (
        await asyncio_detailed(
            user_id=user_id,
            client=client,
            body=body,
            if_match=if_match,
            if_none_match=if_none_match,
        )
    ).parsed
