from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ...client import AuthenticatedClient, Client
from ...models.message_page import MessagePage
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    user_id: str,
    thread_id: UUID,
    *,
    cursor: None | str | Unset = UNSET,
    limit: int | Unset = 50,
    label: list[int] | None | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    json_cursor: None | str | Unset
    if isinstance(cursor, Unset):
        json_cursor = UNSET
    else:
        json_cursor = cursor
    params["cursor"] = json_cursor

    params["limit"] = limit

    json_label: list[int] | None | Unset
    if isinstance(label, Unset):
        json_label = UNSET
    elif isinstance(label, list):
        json_label = label

    else:
        json_label = label
    params["label"] = json_label

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/users/{user_id}/threads/{thread_id}/messages".format(
            user_id=quote(str(user_id), safe=""),
            thread_id=quote(str(thread_id), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> MessagePage | Problem:
    if response.status_code == 200:
        response_200 = MessagePage.from_dict(response.json())

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
) -> Response[MessagePage | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    user_id: str,
    thread_id: UUID,
    *,
    client: AuthenticatedClient,
    cursor: None | str | Unset = UNSET,
    limit: int | Unset = 50,
    label: list[int] | None | Unset = UNSET,
) -> Response[MessagePage | Problem]:
    """List messages

     Messages in order, oldest first; or the turns a summary's refs cite.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        thread_id (UUID):
        cursor (None | str | Unset): From a previous page.
        limit (int | Unset):  Default: 50.
        label (list[int] | None | Unset): Fetch human turns `#N` (each with the replies that
            follow).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[MessagePage | Problem]
    """

    kwargs = _get_kwargs(
        user_id=user_id,
        thread_id=thread_id,
        cursor=cursor,
        limit=limit,
        label=label,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    user_id: str,
    thread_id: UUID,
    *,
    client: AuthenticatedClient,
    cursor: None | str | Unset = UNSET,
    limit: int | Unset = 50,
    label: list[int] | None | Unset = UNSET,
) -> MessagePage | Problem | None:
    """List messages

     Messages in order, oldest first; or the turns a summary's refs cite.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        thread_id (UUID):
        cursor (None | str | Unset): From a previous page.
        limit (int | Unset):  Default: 50.
        label (list[int] | None | Unset): Fetch human turns `#N` (each with the replies that
            follow).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        MessagePage | Problem
    """

    return sync_detailed(
        user_id=user_id,
        thread_id=thread_id,
        client=client,
        cursor=cursor,
        limit=limit,
        label=label,
    ).parsed


async def asyncio_detailed(
    user_id: str,
    thread_id: UUID,
    *,
    client: AuthenticatedClient,
    cursor: None | str | Unset = UNSET,
    limit: int | Unset = 50,
    label: list[int] | None | Unset = UNSET,
) -> Response[MessagePage | Problem]:
    """List messages

     Messages in order, oldest first; or the turns a summary's refs cite.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        thread_id (UUID):
        cursor (None | str | Unset): From a previous page.
        limit (int | Unset):  Default: 50.
        label (list[int] | None | Unset): Fetch human turns `#N` (each with the replies that
            follow).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[MessagePage | Problem]
    """

    kwargs = _get_kwargs(
        user_id=user_id,
        thread_id=thread_id,
        cursor=cursor,
        limit=limit,
        label=label,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    user_id: str,
    thread_id: UUID,
    *,
    client: AuthenticatedClient,
    cursor: None | str | Unset = UNSET,
    limit: int | Unset = 50,
    label: list[int] | None | Unset = UNSET,
) -> MessagePage | Problem | None:
    """List messages

     Messages in order, oldest first; or the turns a summary's refs cite.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        thread_id (UUID):
        cursor (None | str | Unset): From a previous page.
        limit (int | Unset):  Default: 50.
        label (list[int] | None | Unset): Fetch human turns `#N` (each with the replies that
            follow).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        MessagePage | Problem
    """

    return (
        await asyncio_detailed(
            user_id=user_id,
            thread_id=thread_id,
            client=client,
            cursor=cursor,
            limit=limit,
            label=label,
        )
    ).parsed
