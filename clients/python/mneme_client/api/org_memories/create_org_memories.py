from http import HTTPStatus
from typing import Any

import httpx

from ...client import AuthenticatedClient, Client
from ...models.memory_batch_create import MemoryBatchCreate
from ...models.memory_batch_written import MemoryBatchWritten
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    body: MemoryBatchCreate,
    idempotency_key: None | str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(idempotency_key, Unset):
        headers["Idempotency-Key"] = idempotency_key

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/org/memories/batch",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> MemoryBatchWritten | Problem:
    if response.status_code == 201:
        response_201 = MemoryBatchWritten.from_dict(response.json())

        return response_201

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())

        return response_404

    if response.status_code == 409:
        response_409 = Problem.from_dict(response.json())

        return response_409

    if response.status_code == 413:
        response_413 = Problem.from_dict(response.json())

        return response_413

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
) -> Response[MemoryBatchWritten | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: MemoryBatchCreate,
    idempotency_key: None | str | Unset = UNSET,
) -> Response[MemoryBatchWritten | Problem]:
    """Remember a batch of organization memories

     Store up to 100 organization memories at once, all or nothing, in input order; admins
    only. Like a single memory, none may have `scope: user` here (422).

    Args:
        idempotency_key (None | str | Unset): Makes this POST safe to retry: a retry with the same
            key and the same body gets the first attempt's response (marked `Idempotent-Replayed:
            true`) instead of applying the request again. 1-255 printable ASCII characters, unique per
            request (a UUID is a good choice); remembered for 24 hours.
        body (MemoryBatchCreate):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[MemoryBatchWritten | Problem]
    """

    kwargs = _get_kwargs(
        body=body,
        idempotency_key=idempotency_key,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    body: MemoryBatchCreate,
    idempotency_key: None | str | Unset = UNSET,
) -> MemoryBatchWritten | Problem | None:
    """Remember a batch of organization memories

     Store up to 100 organization memories at once, all or nothing, in input order; admins
    only. Like a single memory, none may have `scope: user` here (422).

    Args:
        idempotency_key (None | str | Unset): Makes this POST safe to retry: a retry with the same
            key and the same body gets the first attempt's response (marked `Idempotent-Replayed:
            true`) instead of applying the request again. 1-255 printable ASCII characters, unique per
            request (a UUID is a good choice); remembered for 24 hours.
        body (MemoryBatchCreate):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        MemoryBatchWritten | Problem
    """

    return sync_detailed(
        client=client,
        body=body,
        idempotency_key=idempotency_key,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: MemoryBatchCreate,
    idempotency_key: None | str | Unset = UNSET,
) -> Response[MemoryBatchWritten | Problem]:
    """Remember a batch of organization memories

     Store up to 100 organization memories at once, all or nothing, in input order; admins
    only. Like a single memory, none may have `scope: user` here (422).

    Args:
        idempotency_key (None | str | Unset): Makes this POST safe to retry: a retry with the same
            key and the same body gets the first attempt's response (marked `Idempotent-Replayed:
            true`) instead of applying the request again. 1-255 printable ASCII characters, unique per
            request (a UUID is a good choice); remembered for 24 hours.
        body (MemoryBatchCreate):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[MemoryBatchWritten | Problem]
    """

    kwargs = _get_kwargs(
        body=body,
        idempotency_key=idempotency_key,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: MemoryBatchCreate,
    idempotency_key: None | str | Unset = UNSET,
) -> MemoryBatchWritten | Problem | None:
    """Remember a batch of organization memories

     Store up to 100 organization memories at once, all or nothing, in input order; admins
    only. Like a single memory, none may have `scope: user` here (422).

    Args:
        idempotency_key (None | str | Unset): Makes this POST safe to retry: a retry with the same
            key and the same body gets the first attempt's response (marked `Idempotent-Replayed:
            true`) instead of applying the request again. 1-255 printable ASCII characters, unique per
            request (a UUID is a good choice); remembered for 24 hours.
        body (MemoryBatchCreate):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        MemoryBatchWritten | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
            idempotency_key=idempotency_key,
        )
    ).parsed
