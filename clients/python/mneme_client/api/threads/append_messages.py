from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ...client import AuthenticatedClient, Client
from ...models.messages_append import MessagesAppend
from ...models.messages_appended import MessagesAppended
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    user_id: str,
    thread_id: UUID,
    *,
    body: MessagesAppend,
    idempotency_key: None | str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(idempotency_key, Unset):
        headers["Idempotency-Key"] = idempotency_key

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/users/{user_id}/threads/{thread_id}/messages".format(
            user_id=quote(str(user_id), safe=""),
            thread_id=quote(str(thread_id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> MessagesAppended | Problem:
    if response.status_code == 201:
        response_201 = MessagesAppended.from_dict(response.json())

        return response_201

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

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
) -> Response[MessagesAppended | Problem]:
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
    body: MessagesAppend,
    idempotency_key: None | str | Unset = UNSET,
) -> Response[MessagesAppended | Problem]:
    """Append messages

     Append up to 100 messages in order. They are committed before anything else happens
    (summaries and extraction run afterwards, in the background). A message whose
    `client_message_id` is already stored is returned, not stored twice. A message's text and
    tool calls are stored as sent and masked wherever they are replayed into a prompt; an
    author `name` or `metadata` that looks like a secret is refused (422 `SECRET_REFUSED`) and
    nothing is appended.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        thread_id (UUID):
        idempotency_key (None | str | Unset): Makes this POST safe to retry: a retry with the same
            key and the same body gets the first attempt's response (marked `Idempotent-Replayed:
            true`) instead of applying the request again. 1-255 printable ASCII characters, unique per
            request (a UUID is a good choice); remembered for 24 hours.
        body (MessagesAppend):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[MessagesAppended | Problem]
    """

    kwargs = _get_kwargs(
        user_id=user_id,
        thread_id=thread_id,
        body=body,
        idempotency_key=idempotency_key,
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
    body: MessagesAppend,
    idempotency_key: None | str | Unset = UNSET,
) -> MessagesAppended | Problem | None:
    """Append messages

     Append up to 100 messages in order. They are committed before anything else happens
    (summaries and extraction run afterwards, in the background). A message whose
    `client_message_id` is already stored is returned, not stored twice. A message's text and
    tool calls are stored as sent and masked wherever they are replayed into a prompt; an
    author `name` or `metadata` that looks like a secret is refused (422 `SECRET_REFUSED`) and
    nothing is appended.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        thread_id (UUID):
        idempotency_key (None | str | Unset): Makes this POST safe to retry: a retry with the same
            key and the same body gets the first attempt's response (marked `Idempotent-Replayed:
            true`) instead of applying the request again. 1-255 printable ASCII characters, unique per
            request (a UUID is a good choice); remembered for 24 hours.
        body (MessagesAppend):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        MessagesAppended | Problem
    """

    return sync_detailed(
        user_id=user_id,
        thread_id=thread_id,
        client=client,
        body=body,
        idempotency_key=idempotency_key,
    ).parsed


async def asyncio_detailed(
    user_id: str,
    thread_id: UUID,
    *,
    client: AuthenticatedClient,
    body: MessagesAppend,
    idempotency_key: None | str | Unset = UNSET,
) -> Response[MessagesAppended | Problem]:
    """Append messages

     Append up to 100 messages in order. They are committed before anything else happens
    (summaries and extraction run afterwards, in the background). A message whose
    `client_message_id` is already stored is returned, not stored twice. A message's text and
    tool calls are stored as sent and masked wherever they are replayed into a prompt; an
    author `name` or `metadata` that looks like a secret is refused (422 `SECRET_REFUSED`) and
    nothing is appended.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        thread_id (UUID):
        idempotency_key (None | str | Unset): Makes this POST safe to retry: a retry with the same
            key and the same body gets the first attempt's response (marked `Idempotent-Replayed:
            true`) instead of applying the request again. 1-255 printable ASCII characters, unique per
            request (a UUID is a good choice); remembered for 24 hours.
        body (MessagesAppend):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[MessagesAppended | Problem]
    """

    kwargs = _get_kwargs(
        user_id=user_id,
        thread_id=thread_id,
        body=body,
        idempotency_key=idempotency_key,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    user_id: str,
    thread_id: UUID,
    *,
    client: AuthenticatedClient,
    body: MessagesAppend,
    idempotency_key: None | str | Unset = UNSET,
) -> MessagesAppended | Problem | None:
    """Append messages

     Append up to 100 messages in order. They are committed before anything else happens
    (summaries and extraction run afterwards, in the background). A message whose
    `client_message_id` is already stored is returned, not stored twice. A message's text and
    tool calls are stored as sent and masked wherever they are replayed into a prompt; an
    author `name` or `metadata` that looks like a secret is refused (422 `SECRET_REFUSED`) and
    nothing is appended.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        thread_id (UUID):
        idempotency_key (None | str | Unset): Makes this POST safe to retry: a retry with the same
            key and the same body gets the first attempt's response (marked `Idempotent-Replayed:
            true`) instead of applying the request again. 1-255 printable ASCII characters, unique per
            request (a UUID is a good choice); remembered for 24 hours.
        body (MessagesAppend):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        MessagesAppended | Problem
    """

    return (
        await asyncio_detailed(
            user_id=user_id,
            thread_id=thread_id,
            client=client,
            body=body,
            idempotency_key=idempotency_key,
        )
    ).parsed
