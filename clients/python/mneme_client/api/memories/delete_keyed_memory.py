from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...models.memory_kind import MemoryKind
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    user_id: str,
    *,
    kind: MemoryKind,
    key: str,
    category: None | str | Unset = UNSET,
    if_match: None | str | Unset = UNSET,
    if_none_match: None | str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(if_match, Unset):
        headers["if-match"] = if_match

    if not isinstance(if_none_match, Unset):
        headers["if-none-match"] = if_none_match

    params: dict[str, Any] = {}

    json_kind = kind.value
    params["kind"] = json_kind

    params["key"] = key

    json_category: None | str | Unset
    if isinstance(category, Unset):
        json_category = UNSET
    else:
        json_category = category
    params["category"] = json_category

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "delete",
        "url": "/v1/users/{user_id}/keyed-memories".format(
            user_id=quote(str(user_id), safe=""),
        ),
        "params": params,
    }

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Any | Problem:
    if response.status_code == 204:
        response_204 = cast(Any, None)
        return response_204

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

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
) -> Response[Any | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    user_id: str,
    *,
    client: AuthenticatedClient,
    kind: MemoryKind,
    key: str,
    category: None | str | Unset = UNSET,
    if_match: None | str | Unset = UNSET,
    if_none_match: None | str | Unset = UNSET,
) -> Response[Any | Problem]:
    """Forget the memory a key holds

     Delete the memory the key holds (recorded in its history); the key is free for a later
    put. `If-Match` with the ETag deletes only that state; else 412 and nothing changes.
    `If-None-Match: *` (or the memory's ETag): 412, since the key holds it (in that state).

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        kind (MemoryKind):
        key (str): The client's key: something visible, not only whitespace or invisible
            characters (kept as given).
        category (None | str | Unset): The memory's category, if any.
        if_match (None | str | Unset): An ETag from a previous read or write: the change happens
            only if the resource is still in that state (412 `PRECONDITION_FAILED` otherwise, with the
            current ETag, and nothing changed).
        if_none_match (None | str | Unset): `*`, or an ETag: 412 `PRECONDITION_FAILED` (with the
            current ETag, and nothing changed) when the resource exists, or is in that state.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | Problem]
    """

    kwargs = _get_kwargs(
        user_id=user_id,
        kind=kind,
        key=key,
        category=category,
        if_match=if_match,
        if_none_match=if_none_match,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    user_id: str,
    *,
    client: AuthenticatedClient,
    kind: MemoryKind,
    key: str,
    category: None | str | Unset = UNSET,
    if_match: None | str | Unset = UNSET,
    if_none_match: None | str | Unset = UNSET,
) -> Any | Problem | None:
    """Forget the memory a key holds

     Delete the memory the key holds (recorded in its history); the key is free for a later
    put. `If-Match` with the ETag deletes only that state; else 412 and nothing changes.
    `If-None-Match: *` (or the memory's ETag): 412, since the key holds it (in that state).

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        kind (MemoryKind):
        key (str): The client's key: something visible, not only whitespace or invisible
            characters (kept as given).
        category (None | str | Unset): The memory's category, if any.
        if_match (None | str | Unset): An ETag from a previous read or write: the change happens
            only if the resource is still in that state (412 `PRECONDITION_FAILED` otherwise, with the
            current ETag, and nothing changed).
        if_none_match (None | str | Unset): `*`, or an ETag: 412 `PRECONDITION_FAILED` (with the
            current ETag, and nothing changed) when the resource exists, or is in that state.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | Problem
    """

    return sync_detailed(
        user_id=user_id,
        client=client,
        kind=kind,
        key=key,
        category=category,
        if_match=if_match,
        if_none_match=if_none_match,
    ).parsed


async def asyncio_detailed(
    user_id: str,
    *,
    client: AuthenticatedClient,
    kind: MemoryKind,
    key: str,
    category: None | str | Unset = UNSET,
    if_match: None | str | Unset = UNSET,
    if_none_match: None | str | Unset = UNSET,
) -> Response[Any | Problem]:
    """Forget the memory a key holds

     Delete the memory the key holds (recorded in its history); the key is free for a later
    put. `If-Match` with the ETag deletes only that state; else 412 and nothing changes.
    `If-None-Match: *` (or the memory's ETag): 412, since the key holds it (in that state).

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        kind (MemoryKind):
        key (str): The client's key: something visible, not only whitespace or invisible
            characters (kept as given).
        category (None | str | Unset): The memory's category, if any.
        if_match (None | str | Unset): An ETag from a previous read or write: the change happens
            only if the resource is still in that state (412 `PRECONDITION_FAILED` otherwise, with the
            current ETag, and nothing changed).
        if_none_match (None | str | Unset): `*`, or an ETag: 412 `PRECONDITION_FAILED` (with the
            current ETag, and nothing changed) when the resource exists, or is in that state.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | Problem]
    """

    kwargs = _get_kwargs(
        user_id=user_id,
        kind=kind,
        key=key,
        category=category,
        if_match=if_match,
        if_none_match=if_none_match,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    user_id: str,
    *,
    client: AuthenticatedClient,
    kind: MemoryKind,
    key: str,
    category: None | str | Unset = UNSET,
    if_match: None | str | Unset = UNSET,
    if_none_match: None | str | Unset = UNSET,
) -> Any | Problem | None:
    """Forget the memory a key holds

     Delete the memory the key holds (recorded in its history); the key is free for a later
    put. `If-Match` with the ETag deletes only that state; else 412 and nothing changes.
    `If-None-Match: *` (or the memory's ETag): 412, since the key holds it (in that state).

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        kind (MemoryKind):
        key (str): The client's key: something visible, not only whitespace or invisible
            characters (kept as given).
        category (None | str | Unset): The memory's category, if any.
        if_match (None | str | Unset): An ETag from a previous read or write: the change happens
            only if the resource is still in that state (412 `PRECONDITION_FAILED` otherwise, with the
            current ETag, and nothing changed).
        if_none_match (None | str | Unset): `*`, or an ETag: 412 `PRECONDITION_FAILED` (with the
            current ETag, and nothing changed) when the resource exists, or is in that state.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | Problem
    """

    return (
        await asyncio_detailed(
            user_id=user_id,
            client=client,
            kind=kind,
            key=key,
            category=category,
            if_match=if_match,
            if_none_match=if_none_match,
        )
    ).parsed
