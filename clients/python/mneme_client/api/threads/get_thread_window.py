from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...models.thread_window import ThreadWindow
from ...types import UNSET, Response, Unset


def _get_kwargs(
    user_id: str,
    thread_id: UUID,
    *,
    max_messages: int | None | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    json_max_messages: int | None | Unset
    if isinstance(max_messages, Unset):
        json_max_messages = UNSET
    else:
        json_max_messages = max_messages
    params["max_messages"] = json_max_messages

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/users/{user_id}/threads/{thread_id}/window".format(
            user_id=quote(str(user_id), safe=""),
            thread_id=quote(str(thread_id), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | ThreadWindow:
    if response.status_code == 200:
        response_200 = ThreadWindow.from_dict(response.json())

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
) -> Response[Problem | ThreadWindow]:
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
    max_messages: int | None | Unset = UNSET,
) -> Response[Problem | ThreadWindow]:
    """The thread as a prompt should carry it

     The summaries (oldest first, formatted for an `<earlier_conversation>` block) and the raw
    messages after the last summarised window, keeping at least
    MNEME_THREAD_MESSAGES_BUFFER_RECENT_TURNS recent human turns raw; at most `max_messages` of
    them, the newest (`truncated` says when older ones were left out). `summarization` says
    whether summaries are being written at all. Secrets in the messages (their text, author,
    tool calls and metadata) and summaries are masked, as in every prompt
    (`MNEME_MESSAGE_SECRETS_ON_REPLAY`).

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        thread_id (UUID):
        max_messages (int | None | Unset): The most raw messages to return, the newest (default
            MNEME_THREAD_WINDOW_MAX_MESSAGES, 200).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | ThreadWindow]
    """

    kwargs = _get_kwargs(
        user_id=user_id,
        thread_id=thread_id,
        max_messages=max_messages,
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
    max_messages: int | None | Unset = UNSET,
) -> Problem | ThreadWindow | None:
    """The thread as a prompt should carry it

     The summaries (oldest first, formatted for an `<earlier_conversation>` block) and the raw
    messages after the last summarised window, keeping at least
    MNEME_THREAD_MESSAGES_BUFFER_RECENT_TURNS recent human turns raw; at most `max_messages` of
    them, the newest (`truncated` says when older ones were left out). `summarization` says
    whether summaries are being written at all. Secrets in the messages (their text, author,
    tool calls and metadata) and summaries are masked, as in every prompt
    (`MNEME_MESSAGE_SECRETS_ON_REPLAY`).

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        thread_id (UUID):
        max_messages (int | None | Unset): The most raw messages to return, the newest (default
            MNEME_THREAD_WINDOW_MAX_MESSAGES, 200).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | ThreadWindow
    """

    return sync_detailed(
        user_id=user_id,
        thread_id=thread_id,
        client=client,
        max_messages=max_messages,
    ).parsed


async def asyncio_detailed(
    user_id: str,
    thread_id: UUID,
    *,
    client: AuthenticatedClient,
    max_messages: int | None | Unset = UNSET,
) -> Response[Problem | ThreadWindow]:
    """The thread as a prompt should carry it

     The summaries (oldest first, formatted for an `<earlier_conversation>` block) and the raw
    messages after the last summarised window, keeping at least
    MNEME_THREAD_MESSAGES_BUFFER_RECENT_TURNS recent human turns raw; at most `max_messages` of
    them, the newest (`truncated` says when older ones were left out). `summarization` says
    whether summaries are being written at all. Secrets in the messages (their text, author,
    tool calls and metadata) and summaries are masked, as in every prompt
    (`MNEME_MESSAGE_SECRETS_ON_REPLAY`).

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        thread_id (UUID):
        max_messages (int | None | Unset): The most raw messages to return, the newest (default
            MNEME_THREAD_WINDOW_MAX_MESSAGES, 200).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | ThreadWindow]
    """

    kwargs = _get_kwargs(
        user_id=user_id,
        thread_id=thread_id,
        max_messages=max_messages,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    user_id: str,
    thread_id: UUID,
    *,
    client: AuthenticatedClient,
    max_messages: int | None | Unset = UNSET,
) -> Problem | ThreadWindow | None:
    """The thread as a prompt should carry it

     The summaries (oldest first, formatted for an `<earlier_conversation>` block) and the raw
    messages after the last summarised window, keeping at least
    MNEME_THREAD_MESSAGES_BUFFER_RECENT_TURNS recent human turns raw; at most `max_messages` of
    them, the newest (`truncated` says when older ones were left out). `summarization` says
    whether summaries are being written at all. Secrets in the messages (their text, author,
    tool calls and metadata) and summaries are masked, as in every prompt
    (`MNEME_MESSAGE_SECRETS_ON_REPLAY`).

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        thread_id (UUID):
        max_messages (int | None | Unset): The most raw messages to return, the newest (default
            MNEME_THREAD_WINDOW_MAX_MESSAGES, 200).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | ThreadWindow
    """

    return (
        await asyncio_detailed(
            user_id=user_id,
            thread_id=thread_id,
            client=client,
            max_messages=max_messages,
        )
    ).parsed
