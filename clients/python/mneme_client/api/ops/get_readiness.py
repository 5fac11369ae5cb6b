from http import HTTPStatus
from typing import Any

import httpx

from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...models.readiness import Readiness
from ...types import Response


def _get_kwargs() -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/readyz",
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | Readiness:
    if response.status_code == 200:
        response_200 = Readiness.from_dict(response.json())

        return response_200

    if response.status_code == 422:
        response_422 = Problem.from_dict(response.json())

        return response_422

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
) -> Response[Problem | Readiness]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
) -> Response[Problem | Readiness]:
    """Readiness

     Ready to serve: the database answers and its schema is at this code's head revision.

    Asked on a connection of its own, not the requests' pool: a process whose connections are
    all busy is serving, and still ready (it answers the excess 503 `SERVICE_BUSY`); taking it
    out of rotation would only move its load onto the other replicas.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | Readiness]
    """

    kwargs = _get_kwargs()

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient | Client,
) -> Problem | Readiness | None:
    """Readiness

     Ready to serve: the database answers and its schema is at this code's head revision.

    Asked on a connection of its own, not the requests' pool: a process whose connections are
    all busy is serving, and still ready (it answers the excess 503 `SERVICE_BUSY`); taking it
    out of rotation would only move its load onto the other replicas.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | Readiness
    """

    return sync_detailed(
        client=client,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
) -> Response[Problem | Readiness]:
    """Readiness

     Ready to serve: the database answers and its schema is at this code's head revision.

    Asked on a connection of its own, not the requests' pool: a process whose connections are
    all busy is serving, and still ready (it answers the excess 503 `SERVICE_BUSY`); taking it
    out of rotation would only move its load onto the other replicas.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | Readiness]
    """

    kwargs = _get_kwargs()

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
) -> Problem | Readiness | None:
    """Readiness

     Ready to serve: the database answers and its schema is at this code's head revision.

    Asked on a connection of its own, not the requests' pool: a process whose connections are
    all busy is serving, and still ready (it answers the excess 503 `SERVICE_BUSY`); taking it
    out of rotation would only move its load onto the other replicas.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | Readiness
    """

    return (
        await asyncio_detailed(
            client=client,
        )
    ).parsed
