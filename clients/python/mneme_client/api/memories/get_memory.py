from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote
from uuid import UUID

import httpx

from ...client import AuthenticatedClient, Client
from ...models.memory_read import MemoryRead
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    user_id: str,
    memory_id: UUID,
    *,
    if_none_match: None | str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(if_none_match, Unset):
        headers["if-none-match"] = if_none_match

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/users/{user_id}/memories/{memory_id}".format(
            user_id=quote(str(user_id), safe=""),
            memory_id=quote(str(memory_id), safe=""),
        ),
    }

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Any | MemoryRead | Problem:
    if response.status_code == 200:
        response_200 = MemoryRead.from_dict(response.json())

        return response_200

    if response.status_code == 304:
        response_304 = cast(Any, None)
        return response_304

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())

        return response_404

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
) -> Response[Any | MemoryRead | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    user_id: str,
    memory_id: UUID,
    *,
    client: AuthenticatedClient,
    if_none_match: None | str | Unset = UNSET,
) -> Response[Any | MemoryRead | Problem]:
    """Get a memory

     One of the user's memories, or one of the organization's (which the listing shows with
    `scope=org`; read-only here), with its ETag. With `If-None-Match` naming the current ETag,
    304 and no body.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        memory_id (UUID):
        if_none_match (None | str | Unset): An ETag from a previous read: 304 with no body when
            the resource is still in that state.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | MemoryRead | Problem]
    """

    kwargs = _get_kwargs(
        user_id=user_id,
        memory_id=memory_id,
        if_none_match=if_none_match,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    user_id: str,
    memory_id: UUID,
    *,
    client: AuthenticatedClient,
    if_none_match: None | str | Unset = UNSET,
) -> Any | MemoryRead | Problem | None:
    """Get a memory

     One of the user's memories, or one of the organization's (which the listing shows with
    `scope=org`; read-only here), with its ETag. With `If-None-Match` naming the current ETag,
    304 and no body.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        memory_id (UUID):
        if_none_match (None | str | Unset): An ETag from a previous read: 304 with no body when
            the resource is still in that state.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | MemoryRead | Problem
    """

    return sync_detailed(
        user_id=user_id,
        memory_id=memory_id,
        client=client,
        if_none_match=if_none_match,
    ).parsed


async def asyncio_detailed(
    user_id: str,
    memory_id: UUID,
    *,
    client: AuthenticatedClient,
    if_none_match: None | str | Unset = UNSET,
) -> Response[Any | MemoryRead | Problem]:
    """Get a memory

     One of the user's memories, or one of the organization's (which the listing shows with
    `scope=org`; read-only here), with its ETag. With `If-None-Match` naming the current ETag,
    304 and no body.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        memory_id (UUID):
        if_none_match (None | str | Unset): An ETag from a previous read: 304 with no body when
            the resource is still in that state.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | MemoryRead | Problem]
    """

    kwargs = _get_kwargs(
        user_id=user_id,
        memory_id=memory_id,
        if_none_match=if_none_match,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    user_id: str,
    memory_id: UUID,
    *,
    client: AuthenticatedClient,
    if_none_match: None | str | Unset = UNSET,
) -> Any | MemoryRead | Problem | None:
    """Get a memory

     One of the user's memories, or one of the organization's (which the listing shows with
    `scope=org`; read-only here), with its ETag. With `If-None-Match` naming the current ETag,
    304 and no body.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        memory_id (UUID):
        if_none_match (None | str | Unset): An ETag from a previous read: 304 with no body when
            the resource is still in that state.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | MemoryRead | Problem
    """

    return (
        await asyncio_detailed(
            user_id=user_id,
            memory_id=memory_id,
            client=client,
            if_none_match=if_none_match,
        )
    ).parsed
