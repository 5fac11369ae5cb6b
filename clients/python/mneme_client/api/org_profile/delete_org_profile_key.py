from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...models.profile_patch_result import ProfilePatchResult
from ...types import UNSET, Response, Unset


def _get_kwargs(
    key: str,
    *,
    if_match: None | str | Unset = UNSET,
    if_none_match: None | str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(if_match, Unset):
        headers["if-match"] = if_match

    if not isinstance(if_none_match, Unset):
        headers["if-none-match"] = if_none_match

    _kwargs: dict[str, Any] = {
        "method": "delete",
        "url": "/v1/org/profile/{key}".format(
            key=quote(str(key), safe=""),
        ),
    }

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

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())

        return response_404

    if response.status_code == 412:
        response_412 = Problem.from_dict(response.json())

        return response_412

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
    key: str,
    *,
    client: AuthenticatedClient,
    if_match: None | str | Unset = UNSET,
    if_none_match: None | str | Unset = UNSET,
) -> Response[Problem | ProfilePatchResult]:
    """Delete a key from the organization profile

     Remove one stored key of the organization profile; admins only.

    Args:
        key (str): A stored key.
        if_match (None | str | Unset): An ETag from a previous read or write: the change happens
            only if the resource is still in that state (412 `PRECONDITION_FAILED` otherwise, with the
            current ETag, and nothing changed).
        if_none_match (None | str | Unset): `*`, or an ETag: 412 `PRECONDITION_FAILED` (with the
            current ETag, and nothing changed) when the resource exists, or is in that state.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | ProfilePatchResult]
    """

    kwargs = _get_kwargs(
        key=key,
        if_match=if_match,
        if_none_match=if_none_match,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    key: str,
    *,
    client: AuthenticatedClient,
    if_match: None | str | Unset = UNSET,
    if_none_match: None | str | Unset = UNSET,
) -> Problem | ProfilePatchResult | None:
    """Delete a key from the organization profile

     Remove one stored key of the organization profile; admins only.

    Args:
        key (str): A stored key.
        if_match (None | str | Unset): An ETag from a previous read or write: the change happens
            only if the resource is still in that state (412 `PRECONDITION_FAILED` otherwise, with the
            current ETag, and nothing changed).
        if_none_match (None | str | Unset): `*`, or an ETag: 412 `PRECONDITION_FAILED` (with the
            current ETag, and nothing changed) when the resource exists, or is in that state.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | ProfilePatchResult
    """

    return sync_detailed(
        key=key,
        client=client,
        if_match=if_match,
        if_none_match=if_none_match,
    ).parsed


async def asyncio_detailed(
    key: str,
    *,
    client: AuthenticatedClient,
    if_match: None | str | Unset = UNSET,
    if_none_match: None | str | Unset = UNSET,
) -> Response[Problem | ProfilePatchResult]:
    """Delete a key from the organization profile

     Remove one stored key of the organization profile; admins only.

    Args:
        key (str): A stored key.
        if_match (None | str | Unset): An ETag from a previous read or write: the change happens
            only if the resource is still in that state (412 `PRECONDITION_FAILED` otherwise, with the
            current ETag, and nothing changed).
        if_none_match (None | str | Unset): `*`, or an ETag: 412 `PRECONDITION_FAILED` (with the
            current ETag, and nothing changed) when the resource exists, or is in that state.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | ProfilePatchResult]
    """

    kwargs = _get_kwargs(
        key=key,
        if_match=if_match,
        if_none_match=if_none_match,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    key: str,
    *,
    client: AuthenticatedClient,
    if_match: None | str | Unset = UNSET,
    if_none_match: None | str | Unset = UNSET,
) -> Problem | ProfilePatchResult | None:
    """Delete a key from the organization profile

     Remove one stored key of the organization profile; admins only.

    Args:
        key (str): A stored key.
        if_match (None | str | Unset): An ETag from a previous read or write: the change happens
            only if the resource is still in that state (412 `PRECONDITION_FAILED` otherwise, with the
            current ETag, and nothing changed).
        if_none_match (None | str | Unset): `*`, or an ETag: 412 `PRECONDITION_FAILED` (with the
            current ETag, and nothing changed) when the resource exists, or is in that state.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | ProfilePatchResult
    """

    return (
        await asyncio_detailed(
            key=key,
            client=client,
            if_match=if_match,
            if_none_match=if_none_match,
        )
    ).parsed
