from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...models.keyed_memory_put import KeyedMemoryPut
from ...models.keyed_memory_written import KeyedMemoryWritten
from ...models.memory_kind import MemoryKind
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    user_id: str,
    *,
    body: KeyedMemoryPut,
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
        "method": "put",
        "url": "/v1/users/{user_id}/keyed-memories".format(
            user_id=quote(str(user_id), safe=""),
        ),
        "params": params,
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> KeyedMemoryWritten | Problem:
    if response.status_code == 200:
        response_200 = KeyedMemoryWritten.from_dict(response.json())

        return response_200

    if response.status_code == 201:
        response_201 = KeyedMemoryWritten.from_dict(response.json())

        return response_201

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())

        return response_404

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
) -> Response[KeyedMemoryWritten | Problem]:
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
    body: KeyedMemoryPut,
    kind: MemoryKind,
    key: str,
    category: None | str | Unset = UNSET,
    if_match: None | str | Unset = UNSET,
    if_none_match: None | str | Unset = UNSET,
) -> Response[KeyedMemoryWritten | Problem]:
    """Put a memory under a key

     The first put of a key adds a memory (201); later ones replace its text, metadata,
    confidence, event time and expiry (200, recorded in its history, re-embedded when the text
    changed); a put of what the key's memory already holds writes nothing and keeps its ETag.
    The memory a put answers with is live: one superseded since (by a procedure slot written
    over it, say) is confirmed again. A procedural memory of a slot's category that a put makes
    live supersedes the slot's other memory. Two keys may hold the same text. Refuses
    secrets and PII-like text (422 `SECRET_REFUSED`). `If-Match` with the ETag replaces only
    that state (`*`: only if the key holds a memory); else 412 and nothing changes.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        kind (MemoryKind):
        key (str): The client's key: something visible, not only whitespace or invisible
            characters (kept as given).
        category (None | str | Unset): The memory's category, if any.
        if_match (None | str | Unset): An ETag from a previous read or write: the change happens
            only if the resource is still in that state (412 `PRECONDITION_FAILED` otherwise, with the
            current ETag, and nothing changed).
        if_none_match (None | str | Unset): `*`: only add; 412 if the key already holds a memory.
            An ETag: 412 if the key's memory is in that state.
        body (KeyedMemoryPut): The memory a key holds; `PUT` replaces every field of the memory
            already there (an
            absent one takes its default: no event time, no expiry).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[KeyedMemoryWritten | Problem]
    """

    kwargs = _get_kwargs(
        user_id=user_id,
        body=body,
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
    body: KeyedMemoryPut,
    kind: MemoryKind,
    key: str,
    category: None | str | Unset = UNSET,
    if_match: None | str | Unset = UNSET,
    if_none_match: None | str | Unset = UNSET,
) -> KeyedMemoryWritten | Problem | None:
    """Put a memory under a key

     The first put of a key adds a memory (201); later ones replace its text, metadata,
    confidence, event time and expiry (200, recorded in its history, re-embedded when the text
    changed); a put of what the key's memory already holds writes nothing and keeps its ETag.
    The memory a put answers with is live: one superseded since (by a procedure slot written
    over it, say) is confirmed again. A procedural memory of a slot's category that a put makes
    live supersedes the slot's other memory. Two keys may hold the same text. Refuses
    secrets and PII-like text (422 `SECRET_REFUSED`). `If-Match` with the ETag replaces only
    that state (`*`: only if the key holds a memory); else 412 and nothing changes.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        kind (MemoryKind):
        key (str): The client's key: something visible, not only whitespace or invisible
            characters (kept as given).
        category (None | str | Unset): The memory's category, if any.
        if_match (None | str | Unset): An ETag from a previous read or write: the change happens
            only if the resource is still in that state (412 `PRECONDITION_FAILED` otherwise, with the
            current ETag, and nothing changed).
        if_none_match (None | str | Unset): `*`: only add; 412 if the key already holds a memory.
            An ETag: 412 if the key's memory is in that state.
        body (KeyedMemoryPut): The memory a key holds; `PUT` replaces every field of the memory
            already there (an
            absent one takes its default: no event time, no expiry).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        KeyedMemoryWritten | Problem
    """

    return sync_detailed(
        user_id=user_id,
        client=client,
        body=body,
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
    body: KeyedMemoryPut,
    kind: MemoryKind,
    key: str,
    category: None | str | Unset = UNSET,
    if_match: None | str | Unset = UNSET,
    if_none_match: None | str | Unset = UNSET,
) -> Response[KeyedMemoryWritten | Problem]:
    """Put a memory under a key

     The first put of a key adds a memory (201); later ones replace its text, metadata,
    confidence, event time and expiry (200, recorded in its history, re-embedded when the text
    changed); a put of what the key's memory already holds writes nothing and keeps its ETag.
    The memory a put answers with is live: one superseded since (by a procedure slot written
    over it, say) is confirmed again. A procedural memory of a slot's category that a put makes
    live supersedes the slot's other memory. Two keys may hold the same text. Refuses
    secrets and PII-like text (422 `SECRET_REFUSED`). `If-Match` with the ETag replaces only
    that state (`*`: only if the key holds a memory); else 412 and nothing changes.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        kind (MemoryKind):
        key (str): The client's key: something visible, not only whitespace or invisible
            characters (kept as given).
        category (None | str | Unset): The memory's category, if any.
        if_match (None | str | Unset): An ETag from a previous read or write: the change happens
            only if the resource is still in that state (412 `PRECONDITION_FAILED` otherwise, with the
            current ETag, and nothing changed).
        if_none_match (None | str | Unset): `*`: only add; 412 if the key already holds a memory.
            An ETag: 412 if the key's memory is in that state.
        body (KeyedMemoryPut): The memory a key holds; `PUT` replaces every field of the memory
            already there (an
            absent one takes its default: no event time, no expiry).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[KeyedMemoryWritten | Problem]
    """

    kwargs = _get_kwargs(
        user_id=user_id,
        body=body,
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
    body: KeyedMemoryPut,
    kind: MemoryKind,
    key: str,
    category: None | str | Unset = UNSET,
    if_match: None | str | Unset = UNSET,
    if_none_match: None | str | Unset = UNSET,
) -> KeyedMemoryWritten | Problem | None:
    """Put a memory under a key

     The first put of a key adds a memory (201); later ones replace its text, metadata,
    confidence, event time and expiry (200, recorded in its history, re-embedded when the text
    changed); a put of what the key's memory already holds writes nothing and keeps its ETag.
    The memory a put answers with is live: one superseded since (by a procedure slot written
    over it, say) is confirmed again. A procedural memory of a slot's category that a put makes
    live supersedes the slot's other memory. Two keys may hold the same text. Refuses
    secrets and PII-like text (422 `SECRET_REFUSED`). `If-Match` with the ETag replaces only
    that state (`*`: only if the key holds a memory); else 412 and nothing changes.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        kind (MemoryKind):
        key (str): The client's key: something visible, not only whitespace or invisible
            characters (kept as given).
        category (None | str | Unset): The memory's category, if any.
        if_match (None | str | Unset): An ETag from a previous read or write: the change happens
            only if the resource is still in that state (412 `PRECONDITION_FAILED` otherwise, with the
            current ETag, and nothing changed).
        if_none_match (None | str | Unset): `*`: only add; 412 if the key already holds a memory.
            An ETag: 412 if the key's memory is in that state.
        body (KeyedMemoryPut): The memory a key holds; `PUT` replaces every field of the memory
            already there (an
            absent one takes its default: no event time, no expiry).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        KeyedMemoryWritten | Problem
    """

    return (
        await asyncio_detailed(
            user_id=user_id,
            client=client,
            body=body,
            kind=kind,
            key=key,
            category=category,
            if_match=if_match,
            if_none_match=if_none_match,
        )
    ).parsed
