from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ...client import AuthenticatedClient, Client
from ...models.memory_read import MemoryRead
from ...models.memory_update import MemoryUpdate
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    user_id: str,
    memory_id: UUID,
    *,
    body: MemoryUpdate,
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
        "url": "/v1/users/{user_id}/memories/{memory_id}".format(
            user_id=quote(str(user_id), safe=""),
            memory_id=quote(str(memory_id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> MemoryRead | Problem:
    if response.status_code == 200:
        response_200 = MemoryRead.from_dict(response.json())

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

    if response.status_code == 409:
        response_409 = Problem.from_dict(response.json())

        return response_409

    if response.status_code == 412:
        response_412 = Problem.from_dict(response.json())

        return response_412

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
) -> Response[MemoryRead | Problem]:
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
    body: MemoryUpdate,
    if_match: None | str | Unset = UNSET,
    if_none_match: None | str | Unset = UNSET,
) -> Response[MemoryRead | Problem]:
    """Change a memory

     Change text (re-embedded), category, confidence, lifecycle (e.g. confirm a proposed
    memory), review flag, event time, metadata or expiry, of one of the user's own memories (an
    organization memory is changed on its own route: 422 here). Recorded in the history. A keyed
    memory's new category moves its key with it (409 `CONFLICT` when another memory holds the
    key there). With `If-Match`, only if the memory still has that ETag (else 412 and nothing
    changes); with `If-None-Match: *` (or its ETag), 412 since it exists (in that state).

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        memory_id (UUID):
        if_match (None | str | Unset): An ETag from a previous read or write: the change happens
            only if the resource is still in that state (412 `PRECONDITION_FAILED` otherwise, with the
            current ETag, and nothing changed).
        if_none_match (None | str | Unset): `*`, or an ETag: 412 `PRECONDITION_FAILED` (with the
            current ETag, and nothing changed) when the resource exists, or is in that state.
        body (MemoryUpdate): Fields to change; absent fields stay as they are. `null` clears a
            field that may be
            empty (category, event time, speaker, metadata, expiry); a memory always has a text,
            confidence, lifecycle and review flag, so `null` for one of them is refused as any other
            invalid value is (leave the field out to keep it).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[MemoryRead | Problem]
    """

    kwargs = _get_kwargs(
        user_id=user_id,
        memory_id=memory_id,
        body=body,
        if_match=if_match,
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
    body: MemoryUpdate,
    if_match: None | str | Unset = UNSET,
    if_none_match: None | str | Unset = UNSET,
) -> MemoryRead | Problem | None:
    """Change a memory

     Change text (re-embedded), category, confidence, lifecycle (e.g. confirm a proposed
    memory), review flag, event time, metadata or expiry, of one of the user's own memories (an
    organization memory is changed on its own route: 422 here). Recorded in the history. A keyed
    memory's new category moves its key with it (409 `CONFLICT` when another memory holds the
    key there). With `If-Match`, only if the memory still has that ETag (else 412 and nothing
    changes); with `If-None-Match: *` (or its ETag), 412 since it exists (in that state).

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        memory_id (UUID):
        if_match (None | str | Unset): An ETag from a previous read or write: the change happens
            only if the resource is still in that state (412 `PRECONDITION_FAILED` otherwise, with the
            current ETag, and nothing changed).
        if_none_match (None | str | Unset): `*`, or an ETag: 412 `PRECONDITION_FAILED` (with the
            current ETag, and nothing changed) when the resource exists, or is in that state.
        body (MemoryUpdate): Fields to change; absent fields stay as they are. `null` clears a
            field that may be
            empty (category, event time, speaker, metadata, expiry); a memory always has a text,
            confidence, lifecycle and review flag, so `null` for one of them is refused as any other
            invalid value is (leave the field out to keep it).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        MemoryRead | Problem
    """

    return sync_detailed(
        user_id=user_id,
        memory_id=memory_id,
        client=client,
        body=body,
        if_match=if_match,
        if_none_match=if_none_match,
    ).parsed


async def asyncio_detailed(
    user_id: str,
    memory_id: UUID,
    *,
    client: AuthenticatedClient,
    body: MemoryUpdate,
    if_match: None | str | Unset = UNSET,
    if_none_match: None | str | Unset = UNSET,
) -> Response[MemoryRead | Problem]:
    """Change a memory

     Change text (re-embedded), category, confidence, lifecycle (e.g. confirm a proposed
    memory), review flag, event time, metadata or expiry, of one of the user's own memories (an
    organization memory is changed on its own route: 422 here). Recorded in the history. A keyed
    memory's new category moves its key with it (409 `CONFLICT` when another memory holds the
    key there). With `If-Match`, only if the memory still has that ETag (else 412 and nothing
    changes); with `If-None-Match: *` (or its ETag), 412 since it exists (in that state).

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        memory_id (UUID):
        if_match (None | str | Unset): An ETag from a previous read or write: the change happens
            only if the resource is still in that state (412 `PRECONDITION_FAILED` otherwise, with the
            current ETag, and nothing changed).
        if_none_match (None | str | Unset): `*`, or an ETag: 412 `PRECONDITION_FAILED` (with the
            current ETag, and nothing changed) when the resource exists, or is in that state.
        body (MemoryUpdate): Fields to change; absent fields stay as they are. `null` clears a
            field that may be
            empty (category, event time, speaker, metadata, expiry); a memory always has a text,
            confidence, lifecycle and review flag, so `null` for one of them is refused as any other
            invalid value is (leave the field out to keep it).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[MemoryRead | Problem]
    """

    kwargs = _get_kwargs(
        user_id=user_id,
        memory_id=memory_id,
        body=body,
        if_match=if_match,
        if_none_match=if_none_match,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    user_id: str,
    memory_id: UUID,
    *,
    client: AuthenticatedClient,
    body: MemoryUpdate,
    if_match: None | str | Unset = UNSET,
    if_none_match: None | str | Unset = UNSET,
) -> MemoryRead | Problem | None:
    """Change a memory

     Change text (re-embedded), category, confidence, lifecycle (e.g. confirm a proposed
    memory), review flag, event time, metadata or expiry, of one of the user's own memories (an
    organization memory is changed on its own route: 422 here). Recorded in the history. A keyed
    memory's new category moves its key with it (409 `CONFLICT` when another memory holds the
    key there). With `If-Match`, only if the memory still has that ETag (else 412 and nothing
    changes); with `If-None-Match: *` (or its ETag), 412 since it exists (in that state).

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        memory_id (UUID):
        if_match (None | str | Unset): An ETag from a previous read or write: the change happens
            only if the resource is still in that state (412 `PRECONDITION_FAILED` otherwise, with the
            current ETag, and nothing changed).
        if_none_match (None | str | Unset): `*`, or an ETag: 412 `PRECONDITION_FAILED` (with the
            current ETag, and nothing changed) when the resource exists, or is in that state.
        body (MemoryUpdate): Fields to change; absent fields stay as they are. `null` clears a
            field that may be
            empty (category, event time, speaker, metadata, expiry); a memory always has a text,
            confidence, lifecycle and review flag, so `null` for one of them is refused as any other
            invalid value is (leave the field out to keep it).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        MemoryRead | Problem
    """

    return (
        await asyncio_detailed(
            user_id=user_id,
            memory_id=memory_id,
            client=client,
            body=body,
            if_match=if_match,
            if_none_match=if_none_match,
        )
    ).parsed
