from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...models.import_report import ImportReport
from ...models.problem import Problem
from ...types import File, Response


def _get_kwargs(
    user_id: str,
    *,
    body: File,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/admin/users/{user_id}/import".format(
            user_id=quote(str(user_id), safe=""),
        ),
    }

    _kwargs["content"] = body.payload
    headers["Content-Type"] = "application/x-ndjson"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ImportReport | Problem:
    if response.status_code == 200:
        response_200 = ImportReport.from_dict(response.json())

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

    if response.status_code == 413:
        response_413 = Problem.from_dict(response.json())

        return response_413

    if response.status_code == 415:
        response_415 = Problem.from_dict(response.json())

        return response_415

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
) -> Response[ImportReport | Problem]:
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
    body: File,
) -> Response[ImportReport | Problem]:
    """Import a user's export

     Restore a user from `GET /v1/users/{user_id}/export` output (NDJSON, see
    docs/export-format.md): ids and timestamps are kept. The user must hold nothing yet (409
    `USER_NOT_EMPTY`). A bad line is a 422 `IMPORT_LINE_INVALID` naming it, and nothing is
    written; so is a line holding what the API refuses as a secret, as a 422 `SECRET_REFUSED`.
    The body is `application/x-ndjson` (another media type is a 415). Admins only.

    Args:
        user_id (str): A user id of the caller's tenant.
        body (File):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ImportReport | Problem]
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
    body: File,
) -> ImportReport | Problem | None:
    """Import a user's export

     Restore a user from `GET /v1/users/{user_id}/export` output (NDJSON, see
    docs/export-format.md): ids and timestamps are kept. The user must hold nothing yet (409
    `USER_NOT_EMPTY`). A bad line is a 422 `IMPORT_LINE_INVALID` naming it, and nothing is
    written; so is a line holding what the API refuses as a secret, as a 422 `SECRET_REFUSED`.
    The body is `application/x-ndjson` (another media type is a 415). Admins only.

    Args:
        user_id (str): A user id of the caller's tenant.
        body (File):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ImportReport | Problem
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
    body: File,
) -> Response[ImportReport | Problem]:
    """Import a user's export

     Restore a user from `GET /v1/users/{user_id}/export` output (NDJSON, see
    docs/export-format.md): ids and timestamps are kept. The user must hold nothing yet (409
    `USER_NOT_EMPTY`). A bad line is a 422 `IMPORT_LINE_INVALID` naming it, and nothing is
    written; so is a line holding what the API refuses as a secret, as a 422 `SECRET_REFUSED`.
    The body is `application/x-ndjson` (another media type is a 415). Admins only.

    Args:
        user_id (str): A user id of the caller's tenant.
        body (File):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ImportReport | Problem]
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
    body: File,
) -> ImportReport | Problem | None:
    """Import a user's export

     Restore a user from `GET /v1/users/{user_id}/export` output (NDJSON, see
    docs/export-format.md): ids and timestamps are kept. The user must hold nothing yet (409
    `USER_NOT_EMPTY`). A bad line is a 422 `IMPORT_LINE_INVALID` naming it, and nothing is
    written; so is a line holding what the API refuses as a secret, as a 422 `SECRET_REFUSED`.
    The body is `application/x-ndjson` (another media type is a 415). Admins only.

    Args:
        user_id (str): A user id of the caller's tenant.
        body (File):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ImportReport | Problem
    """

    return (
        await asyncio_detailed(
            user_id=user_id,
            client=client,
            body=body,
        )
    ).parsed
