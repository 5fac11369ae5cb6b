import datetime
from http import HTTPStatus
from typing import Any

import httpx

from ...client import AuthenticatedClient, Client
from ...models.page_user_overview import PageUserOverview
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    cursor: None | str | Unset = UNSET,
    limit: int | Unset = 50,
    active_after: datetime.datetime | None | Unset = UNSET,
    active_before: datetime.datetime | None | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    json_cursor: None | str | Unset
    if isinstance(cursor, Unset):
        json_cursor = UNSET
    else:
        json_cursor = cursor
    params["cursor"] = json_cursor

    params["limit"] = limit

    json_active_after: None | str | Unset
    if isinstance(active_after, Unset):
        json_active_after = UNSET
    elif isinstance(active_after, datetime.datetime):
        json_active_after = active_after.isoformat()
    else:
        json_active_after = active_after
    params["active_after"] = json_active_after

    json_active_before: None | str | Unset
    if isinstance(active_before, Unset):
        json_active_before = UNSET
    elif isinstance(active_before, datetime.datetime):
        json_active_before = active_before.isoformat()
    else:
        json_active_before = active_before
    params["active_before"] = json_active_before

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/admin/users",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> PageUserOverview | Problem:
    if response.status_code == 200:
        response_200 = PageUserOverview.from_dict(response.json())

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
) -> Response[PageUserOverview | Problem]:
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
    active_after: datetime.datetime | None | Unset = UNSET,
    active_before: datetime.datetime | None | Unset = UNSET,
) -> Response[PageUserOverview | Problem]:
    """List the tenant's users

     The tenant's users in id order, each with its memories by kind, threads and messages,
    when it was created and when it was last active. Admins only.

    Args:
        cursor (None | str | Unset):
        limit (int | Unset):  Default: 50.
        active_after (datetime.datetime | None | Unset): Only users last active at or after this
            time.
        active_before (datetime.datetime | None | Unset): Only users last active before this time,
            or never active.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[PageUserOverview | Problem]
    """

    kwargs = _get_kwargs(
        cursor=cursor,
        limit=limit,
        active_after=active_after,
        active_before=active_before,
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
    active_after: datetime.datetime | None | Unset = UNSET,
    active_before: datetime.datetime | None | Unset = UNSET,
) -> PageUserOverview | Problem | None:
    """List the tenant's users

     The tenant's users in id order, each with its memories by kind, threads and messages,
    when it was created and when it was last active. Admins only.

    Args:
        cursor (None | str | Unset):
        limit (int | Unset):  Default: 50.
        active_after (datetime.datetime | None | Unset): Only users last active at or after this
            time.
        active_before (datetime.datetime | None | Unset): Only users last active before this time,
            or never active.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        PageUserOverview | Problem
    """

    return sync_detailed(
        client=client,
        cursor=cursor,
        limit=limit,
        active_after=active_after,
        active_before=active_before,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    cursor: None | str | Unset = UNSET,
    limit: int | Unset = 50,
    active_after: datetime.datetime | None | Unset = UNSET,
    active_before: datetime.datetime | None | Unset = UNSET,
) -> Response[PageUserOverview | Problem]:
    """List the tenant's users

     The tenant's users in id order, each with its memories by kind, threads and messages,
    when it was created and when it was last active. Admins only.

    Args:
        cursor (None | str | Unset):
        limit (int | Unset):  Default: 50.
        active_after (datetime.datetime | None | Unset): Only users last active at or after this
            time.
        active_before (datetime.datetime | None | Unset): Only users last active before this time,
            or never active.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[PageUserOverview | Problem]
    """

    kwargs = _get_kwargs(
        cursor=cursor,
        limit=limit,
        active_after=active_after,
        active_before=active_before,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    cursor: None | str | Unset = UNSET,
    limit: int | Unset = 50,
    active_after: datetime.datetime | None | Unset = UNSET,
    active_before: datetime.datetime | None | Unset = UNSET,
) -> PageUserOverview | Problem | None:
    """List the tenant's users

     The tenant's users in id order, each with its memories by kind, threads and messages,
    when it was created and when it was last active. Admins only.

    Args:
        cursor (None | str | Unset):
        limit (int | Unset):  Default: 50.
        active_after (datetime.datetime | None | Unset): Only users last active at or after this
            time.
        active_before (datetime.datetime | None | Unset): Only users last active before this time,
            or never active.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        PageUserOverview | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
            cursor=cursor,
            limit=limit,
            active_after=active_after,
            active_before=active_before,
        )
    ).parsed
