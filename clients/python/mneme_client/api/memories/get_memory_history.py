from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ...client import AuthenticatedClient, Client
from ...models.memory_history import MemoryHistory
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    user_id: str,
    memory_id: UUID,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/users/{user_id}/memories/{memory_id}/history".format(
            user_id=quote(str(user_id), safe=""),
            memory_id=quote(str(memory_id), safe=""),
        ),
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> MemoryHistory | Problem:
    if response.status_code == 200:
        response_200 = MemoryHistory.from_dict(response.json())

        return response_200

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
) -> Response[MemoryHistory | Problem]:
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
) -> Response[MemoryHistory | Problem]:
    """A memory's change history

     Every add / update / supersede / delete of the memory (the user's, or an organization
    memory's), oldest first, with old and new text. Still available after the memory was
    deleted.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        memory_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[MemoryHistory | Problem]
    """

    kwargs = _get_kwargs(
        user_id=user_id,
        memory_id=memory_id,
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
) -> MemoryHistory | Problem | None:
    """A memory's change history

     Every add / update / supersede / delete of the memory (the user's, or an organization
    memory's), oldest first, with old and new text. Still available after the memory was
    deleted.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        memory_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        MemoryHistory | Problem
    """

    return sync_detailed(
        user_id=user_id,
        memory_id=memory_id,
        client=client,
    ).parsed


async def asyncio_detailed(
    user_id: str,
    memory_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Response[MemoryHistory | Problem]:
    """A memory's change history

     Every add / update / supersede / delete of the memory (the user's, or an organization
    memory's), oldest first, with old and new text. Still available after the memory was
    deleted.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        memory_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[MemoryHistory | Problem]
    """

    kwargs = _get_kwargs(
        user_id=user_id,
        memory_id=memory_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    user_id: str,
    memory_id: UUID,
    *,
    client: AuthenticatedClient,
) -> MemoryHistory | Problem | None:
    """A memory's change history

     Every add / update / supersede / delete of the memory (the user's, or an organization
    memory's), oldest first, with old and new text. Still available after the memory was
    deleted.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        memory_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        MemoryHistory | Problem
    """

    return (
        await asyncio_detailed(
            user_id=user_id,
            memory_id=memory_id,
            client=client,
        )
    ).parsed
