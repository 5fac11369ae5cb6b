from http import HTTPStatus
from typing import Any

import httpx

from ...client import AuthenticatedClient, Client
from ...models.patch_add import PatchAdd
from ...models.patch_remove import PatchRemove
from ...models.patch_replace import PatchReplace
from ...models.problem import Problem
from ...models.profile_patch_result import ProfilePatchResult
from ...types import UNSET, Response, Unset


def _get_kwargs(
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
        "url": "/v1/org/profile",
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

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())

        return response_403

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
    *,
    client: AuthenticatedClient,
    body: list[PatchAdd | PatchRemove | PatchReplace],
    if_match: None | str | Unset = UNSET,
    if_none_match: None | str | Unset = UNSET,
) -> Response[Problem | ProfilePatchResult]:
    """Change the organization profile

     Same rules as a user's profile, without account details; admins only (403
    `ORG_WRITE_FORBIDDEN`).

    Args:
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
        body=body,
        if_match=if_match,
        if_none_match=if_none_match,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    body: list[PatchAdd | PatchRemove | PatchReplace],
    if_match: None | str | Unset = UNSET,
    if_none_match: None | str | Unset = UNSET,
) -> Problem | ProfilePatchResult | None:
    """Change the organization profile

     Same rules as a user's profile, without account details; admins only (403
    `ORG_WRITE_FORBIDDEN`).

    Args:
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
        client=client,
        body=body,
        if_match=if_match,
        if_none_match=if_none_match,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: list[PatchAdd | PatchRemove | PatchReplace],
    if_match: None | str | Unset = UNSET,
    if_none_match: None | str | Unset = UNSET,
) -> Response[Problem | ProfilePatchResult]:
    """Change the organization profile

     Same rules as a user's profile, without account details; admins only (403
    `ORG_WRITE_FORBIDDEN`).

    Args:
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
        body=body,
        if_match=if_match,
        if_none_match=if_none_match,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: list[PatchAdd | PatchRemove | PatchReplace],
    if_match: None | str | Unset = UNSET,
    if_none_match: None | str | Unset = UNSET,
) -> Problem | ProfilePatchResult | None:
    """Change the organization profile

     Same rules as a user's profile, without account details; admins only (403
    `ORG_WRITE_FORBIDDEN`).

    Args:
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
            client=client,
            body=body,
            if_match=if_match,
            if_none_match=if_none_match,
        )
    ).parsed
