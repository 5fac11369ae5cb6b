from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...models.context_request import ContextRequest
from ...models.context_response import ContextResponse
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    user_id: str,
    *,
    body: ContextRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/users/{user_id}/context".format(
            user_id=quote(str(user_id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ContextResponse | Problem:
    if response.status_code == 200:
        response_200 = ContextResponse.from_dict(response.json())

        return response_200

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())

        return response_404

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
) -> Response[ContextResponse | Problem]:
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
    body: ContextRequest,
) -> Response[ContextResponse | Problem]:
    """Build the memory block for the next model call

     A compact, token-budgeted block for the system prompt: organization memory, the user's
    profile, procedural instructions, relevant facts, episodic hints and (with `thread_id`) the
    thread's summaries and recent turns. Each item carries its id and the scores that chose it.
    Nothing is written.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        body (ContextRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ContextResponse | Problem]
    """

    kwargs = _get_kwargs(
        user_id=user_id,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    user_id: str,
    *,
    client: AuthenticatedClient,
    body: ContextRequest,
) -> ContextResponse | Problem | None:
    """Build the memory block for the next model call

     A compact, token-budgeted block for the system prompt: organization memory, the user's
    profile, procedural instructions, relevant facts, episodic hints and (with `thread_id`) the
    thread's summaries and recent turns. Each item carries its id and the scores that chose it.
    Nothing is written.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        body (ContextRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ContextResponse | Problem
    """

    return sync_detailed(
        user_id=user_id,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    user_id: str,
    *,
    client: AuthenticatedClient,
    body: ContextRequest,
) -> Response[ContextResponse | Problem]:
    """Build the memory block for the next model call

     A compact, token-budgeted block for the system prompt: organization memory, the user's
    profile, procedural instructions, relevant facts, episodic hints and (with `thread_id`) the
    thread's summaries and recent turns. Each item carries its id and the scores that chose it.
    Nothing is written.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        body (ContextRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ContextResponse | Problem]
    """

    kwargs = _get_kwargs(
        user_id=user_id,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    user_id: str,
    *,
    client: AuthenticatedClient,
    body: ContextRequest,
) -> ContextResponse | Problem | None:
    """Build the memory block for the next model call

     A compact, token-budgeted block for the system prompt: organization memory, the user's
    profile, procedural instructions, relevant facts, episodic hints and (with `thread_id`) the
    thread's summaries and recent turns. Each item carries its id and the scores that chose it.
    Nothing is written.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        body (ContextRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ContextResponse | Problem
    """

    return (
        await asyncio_detailed(
            user_id=user_id,
            client=client,
            body=body,
        )
    ).parsed
