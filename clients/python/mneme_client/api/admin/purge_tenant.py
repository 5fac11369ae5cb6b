from http import HTTPStatus
from typing import Any

import httpx

from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...models.purge_report import PurgeReport
from ...types import UNSET, Response


def _get_kwargs(
    *,
    confirm: str,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["confirm"] = confirm

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "delete",
        "url": "/v1/admin/tenant",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | PurgeReport:
    if response.status_code == 200:
        response_200 = PurgeReport.from_dict(response.json())

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
) -> Response[Problem | PurgeReport]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    confirm: str,
) -> Response[Problem | PurgeReport]:
    """Purge the whole tenant

     Delete every row of the caller's tenant, with per-table counts and a verification
    counted after the commit. The tenant's audit trail goes too; the service log keeps the
    record. 422 `CONFIRMATION_MISMATCH` unless `confirm` names the tenant. Admins only.

    Args:
        confirm (str): The id of the caller's tenant, to confirm.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | PurgeReport]
    """

    kwargs = _get_kwargs(
        confirm=confirm,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    confirm: str,
) -> Problem | PurgeReport | None:
    """Purge the whole tenant

     Delete every row of the caller's tenant, with per-table counts and a verification
    counted after the commit. The tenant's audit trail goes too; the service log keeps the
    record. 422 `CONFIRMATION_MISMATCH` unless `confirm` names the tenant. Admins only.

    Args:
        confirm (str): The id of the caller's tenant, to confirm.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | PurgeReport
    """

    return sync_detailed(
        client=client,
        confirm=confirm,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    confirm: str,
) -> Response[Problem | PurgeReport]:
    """Purge the whole tenant

     Delete every row of the caller's tenant, with per-table counts and a verification
    counted after the commit. The tenant's audit trail goes too; the service log keeps the
    record. 422 `CONFIRMATION_MISMATCH` unless `confirm` names the tenant. Admins only.

    Args:
        confirm (str): The id of the caller's tenant, to confirm.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | PurgeReport]
    """

    kwargs = _get_kwargs(
        confirm=confirm,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    confirm: str,
) -> Problem | PurgeReport | None:
    """Purge the whole tenant

     Delete every row of the caller's tenant, with per-table counts and a verification
    counted after the commit. The tenant's audit trail goes too; the service log keeps the
    record. 422 `CONFIRMATION_MISMATCH` unless `confirm` names the tenant. Admins only.

    Args:
        confirm (str): The id of the caller's tenant, to confirm.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | PurgeReport
    """

    return (
        await asyncio_detailed(
            client=client,
            confirm=confirm,
        )
    ).parsed
