from http import HTTPStatus
from typing import Any

import httpx

from ...client import AuthenticatedClient, Client
from ...models.page_api_key_read import PageApiKeyRead
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    cursor: None | str | Unset = UNSET,
    limit: int | Unset = 50,
    include_revoked: bool | Unset = False,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    json_cursor: None | str | Unset
    if isinstance(cursor, Unset):
        json_cursor = UNSET
    else:
        json_cursor = cursor
    params["cursor"] = json_cursor

    params["limit"] = limit

    params["include_revoked"] = include_revoked

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/admin/api-keys",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> PageApiKeyRead | Problem:
    if response.status_code == 200:
        response_200 = PageApiKeyRead.from_dict(response.json())

        return response_200

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())

        return response_403

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
) -> Response[PageApiKeyRead | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    cursor: None | str | Unset = UNSET,
    limit: int | Unset = 50,
    include_revoked: bool | Unset = False,
) -> Response[PageApiKeyRead | Problem]:
    """List API keys

     This tenant's API keys, newest first. Secrets are never shown again.

    Args:
        cursor (None | str | Unset): From a previous page's next_cursor.
        limit (int | Unset):  Default: 50.
        include_revoked (bool | Unset):  Default: False.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[PageApiKeyRead | Problem]
    """

    kwargs = _get_kwargs(
        cursor=cursor,
        limit=limit,
        include_revoked=include_revoked,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    cursor: None | str | Unset = UNSET,
    limit: int | Unset = 50,
    include_revoked: bool | Unset = False,
) -> PageApiKeyRead | Problem | None:
    """List API keys

     This tenant's API keys, newest first. Secrets are never shown again.

    Args:
        cursor (None | str | Unset): From a previous page's next_cursor.
        limit (int | Unset):  Default: 50.
        include_revoked (bool | Unset):  Default: False.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        PageApiKeyRead | Problem
    """

    return sync_detailed(
        client=client,
        cursor=cursor,
        limit=limit,
        include_revoked=include_revoked,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    cursor: None | str | Unset = UNSET,
    limit: int | Unset = 50,
    include_revoked: bool | Unset = False,
) -> Response[PageApiKeyRead | Problem]:
    """List API keys

     This tenant's API keys, newest first. Secrets are never shown again.

    Args:
        cursor (None | str | Unset): From a previous page's next_cursor.
        limit (int | Unset):  Default: 50.
        include_revoked (bool | Unset):  Default: False.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[PageApiKeyRead | Problem]
    """

    kwargs = _get_kwargs(
        cursor=cursor,
        limit=limit,
        include_revoked=include_revoked,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    cursor: None | str | Unset = UNSET,
    limit: int | Unset = 50,
    include_revoked: bool | Unset = False,
) -> PageApiKeyRead | Problem | None:
    """List API keys

     This tenant's API keys, newest first. Secrets are never shown again.

    Args:
        cursor (None | str | Unset): From a previous page's next_cursor.
        limit (int | Unset):  Default: 50.
        include_revoked (bool | Unset):  Default: False.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        PageApiKeyRead | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
            cursor=cursor,
            limit=limit,
            include_revoked=include_revoked,
        )
    ).parsed
