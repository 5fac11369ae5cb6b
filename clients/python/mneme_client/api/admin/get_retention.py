from http import HTTPStatus
from typing import Any, cast

import httpx

from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...models.retention_policy import RetentionPolicy
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    if_none_match: None | str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(if_none_match, Unset):
        headers["if-none-match"] = if_none_match

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/admin/retention",
    }

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Any | Problem | RetentionPolicy:
    if response.status_code == 200:
        response_200 = RetentionPolicy.from_dict(response.json())

        return response_200

    if response.status_code == 304:
        response_304 = cast(Any, None)
        return response_304

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
) -> Response[Any | Problem | RetentionPolicy]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    if_none_match: None | str | Unset = UNSET,
) -> Response[Any | Problem | RetentionPolicy]:
    """Read the tenant's retention policy

     How long the tenant keeps episodic memories, raw messages and summaries (null =
    forever), with its ETag; with `If-None-Match` naming the current ETag, 304 and no body.
    Admins only.

    Args:
        if_none_match (None | str | Unset): An ETag from a previous read: 304 with no body when
            the resource is still in that state.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | Problem | RetentionPolicy]
    """

    kwargs = _get_kwargs(
        if_none_match=if_none_match,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    if_none_match: None | str | Unset = UNSET,
) -> Any | Problem | RetentionPolicy | None:
    """Read the tenant's retention policy

     How long the tenant keeps episodic memories, raw messages and summaries (null =
    forever), with its ETag; with `If-None-Match` naming the current ETag, 304 and no body.
    Admins only.

    Args:
        if_none_match (None | str | Unset): An ETag from a previous read: 304 with no body when
            the resource is still in that state.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | Problem | RetentionPolicy
    """

    return sync_detailed(
        client=client,
        if_none_match=if_none_match,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    if_none_match: None | str | Unset = UNSET,
) -> Response[Any | Problem | RetentionPolicy]:
    """Read the tenant's retention policy

     How long the tenant keeps episodic memories, raw messages and summaries (null =
    forever), with its ETag; with `If-None-Match` naming the current ETag, 304 and no body.
    Admins only.

    Args:
        if_none_match (None | str | Unset): An ETag from a previous read: 304 with no body when
            the resource is still in that state.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | Problem | RetentionPolicy]
    """

    kwargs = _get_kwargs(
        if_none_match=if_none_match,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    if_none_match: None | str | Unset = UNSET,
) -> Any | Problem | RetentionPolicy | None:
    """Read the tenant's retention policy

     How long the tenant keeps episodic memories, raw messages and summaries (null =
    forever), with its ETag; with `If-None-Match` naming the current ETag, 304 and no body.
    Admins only.

    Args:
        if_none_match (None | str | Unset): An ETag from a previous read: 304 with no body when
            the resource is still in that state.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | Problem | RetentionPolicy
    """

    return (
        await asyncio_detailed(
            client=client,
            if_none_match=if_none_match,
        )
    ).parsed
