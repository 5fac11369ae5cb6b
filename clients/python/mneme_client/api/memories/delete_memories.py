import datetime
from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...models.lifecycle import Lifecycle
from ...models.memories_deleted import MemoriesDeleted
from ...models.memory_kind import MemoryKind
from ...models.memory_scope import MemoryScope
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    user_id: str,
    *,
    all_: bool | Unset = False,
    dry_run: bool | Unset = False,
    scope: list[MemoryScope] | None | Unset = UNSET,
    kind: list[MemoryKind] | None | Unset = UNSET,
    category: list[str] | None | Unset = UNSET,
    lifecycle: list[Lifecycle] | None | Unset = UNSET,
    created_after: datetime.datetime | None | Unset = UNSET,
    created_before: datetime.datetime | None | Unset = UNSET,
    event_after: datetime.datetime | None | Unset = UNSET,
    event_before: datetime.datetime | None | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["all"] = all_

    params["dry_run"] = dry_run

    json_scope: list[str] | None | Unset
    if isinstance(scope, Unset):
        json_scope = UNSET
    elif isinstance(scope, list):
        json_scope = []
        for scope_type_0_item_data in scope:
            scope_type_0_item = scope_type_0_item_data.value
            json_scope.append(scope_type_0_item)

    else:
        json_scope = scope
    params["scope"] = json_scope

    json_kind: list[str] | None | Unset
    if isinstance(kind, Unset):
        json_kind = UNSET
    elif isinstance(kind, list):
        json_kind = []
        for kind_type_0_item_data in kind:
            kind_type_0_item = kind_type_0_item_data.value
            json_kind.append(kind_type_0_item)

    else:
        json_kind = kind
    params["kind"] = json_kind

    json_category: list[str] | None | Unset
    if isinstance(category, Unset):
        json_category = UNSET
    elif isinstance(category, list):
        json_category = category

    else:
        json_category = category
    params["category"] = json_category

    json_lifecycle: list[str] | None | Unset
    if isinstance(lifecycle, Unset):
        json_lifecycle = UNSET
    elif isinstance(lifecycle, list):
        json_lifecycle = []
        for lifecycle_type_0_item_data in lifecycle:
            lifecycle_type_0_item = lifecycle_type_0_item_data.value
            json_lifecycle.append(lifecycle_type_0_item)

    else:
        json_lifecycle = lifecycle
    params["lifecycle"] = json_lifecycle

    json_created_after: None | str | Unset
    if isinstance(created_after, Unset):
        json_created_after = UNSET
    elif isinstance(created_after, datetime.datetime):
        json_created_after = created_after.isoformat()
    else:
        json_created_after = created_after
    params["created_after"] = json_created_after

    json_created_before: None | str | Unset
    if isinstance(created_before, Unset):
        json_created_before = UNSET
    elif isinstance(created_before, datetime.datetime):
        json_created_before = created_before.isoformat()
    else:
        json_created_before = created_before
    params["created_before"] = json_created_before

    json_event_after: None | str | Unset
    if isinstance(event_after, Unset):
        json_event_after = UNSET
    elif isinstance(event_after, datetime.datetime):
        json_event_after = event_after.isoformat()
    else:
        json_event_after = event_after
    params["event_after"] = json_event_after

    json_event_before: None | str | Unset
    if isinstance(event_before, Unset):
        json_event_before = UNSET
    elif isinstance(event_before, datetime.datetime):
        json_event_before = event_before.isoformat()
    else:
        json_event_before = event_before
    params["event_before"] = json_event_before

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "delete",
        "url": "/v1/users/{user_id}/memories".format(
            user_id=quote(str(user_id), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> MemoriesDeleted | Problem:
    if response.status_code == 200:
        response_200 = MemoriesDeleted.from_dict(response.json())

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
) -> Response[MemoriesDeleted | Problem]:
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
    all_: bool | Unset = False,
    dry_run: bool | Unset = False,
    scope: list[MemoryScope] | None | Unset = UNSET,
    kind: list[MemoryKind] | None | Unset = UNSET,
    category: list[str] | None | Unset = UNSET,
    lifecycle: list[Lifecycle] | None | Unset = UNSET,
    created_after: datetime.datetime | None | Unset = UNSET,
    created_before: datetime.datetime | None | Unset = UNSET,
    event_after: datetime.datetime | None | Unset = UNSET,
    event_before: datetime.datetime | None | Unset = UNSET,
) -> Response[MemoriesDeleted | Problem]:
    """Forget memories matching a filter

     Delete exactly the memories the same filters list (e.g. `kind=episodic`; live ones
    unless `lifecycle` says otherwise), every one of them: `limit` and `cursor` are refused
    (422). `all=true` with no filter forgets everything. The answer counts what was removed;
    `dry_run=true` only counts. Each deletion is kept in the history.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        all_ (bool | Unset): Required to delete without any filter; then superseded memories go
            too. Default: False.
        dry_run (bool | Unset): Only count what would be deleted (and name the first ids); change
            nothing. Default: False.
        scope (list[MemoryScope] | None | Unset): On a user's route: `user` (default), `org`, or
            both.
        kind (list[MemoryKind] | None | Unset):
        category (list[str] | None | Unset):
        lifecycle (list[Lifecycle] | None | Unset): Default: proposed and confirmed (not
            superseded).
        created_after (datetime.datetime | None | Unset):
        created_before (datetime.datetime | None | Unset):
        event_after (datetime.datetime | None | Unset):
        event_before (datetime.datetime | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[MemoriesDeleted | Problem]
    """

    kwargs = _get_kwargs(
        user_id=user_id,
        all_=all_,
        dry_run=dry_run,
        scope=scope,
        kind=kind,
        category=category,
        lifecycle=lifecycle,
        created_after=created_after,
        created_before=created_before,
        event_after=event_after,
        event_before=event_before,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    user_id: str,
    *,
    client: AuthenticatedClient,
    all_: bool | Unset = False,
    dry_run: bool | Unset = False,
    scope: list[MemoryScope] | None | Unset = UNSET,
    kind: list[MemoryKind] | None | Unset = UNSET,
    category: list[str] | None | Unset = UNSET,
    lifecycle: list[Lifecycle] | None | Unset = UNSET,
    created_after: datetime.datetime | None | Unset = UNSET,
    created_before: datetime.datetime | None | Unset = UNSET,
    event_after: datetime.datetime | None | Unset = UNSET,
    event_before: datetime.datetime | None | Unset = UNSET,
) -> MemoriesDeleted | Problem | None:
    """Forget memories matching a filter

     Delete exactly the memories the same filters list (e.g. `kind=episodic`; live ones
    unless `lifecycle` says otherwise), every one of them: `limit` and `cursor` are refused
    (422). `all=true` with no filter forgets everything. The answer counts what was removed;
    `dry_run=true` only counts. Each deletion is kept in the history.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        all_ (bool | Unset): Required to delete without any filter; then superseded memories go
            too. Default: False.
        dry_run (bool | Unset): Only count what would be deleted (and name the first ids); change
            nothing. Default: False.
        scope (list[MemoryScope] | None | Unset): On a user's route: `user` (default), `org`, or
            both.
        kind (list[MemoryKind] | None | Unset):
        category (list[str] | None | Unset):
        lifecycle (list[Lifecycle] | None | Unset): Default: proposed and confirmed (not
            superseded).
        created_after (datetime.datetime | None | Unset):
        created_before (datetime.datetime | None | Unset):
        event_after (datetime.datetime | None | Unset):
        event_before (datetime.datetime | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        MemoriesDeleted | Problem
    """

    return sync_detailed(
        user_id=user_id,
        client=client,
        all_=all_,
        dry_run=dry_run,
        scope=scope,
        kind=kind,
        category=category,
        lifecycle=lifecycle,
        created_after=created_after,
        created_before=created_before,
        event_after=event_after,
        event_before=event_before,
    ).parsed


async def asyncio_detailed(
    user_id: str,
    *,
    client: AuthenticatedClient,
    all_: bool | Unset = False,
    dry_run: bool | Unset = False,
    scope: list[MemoryScope] | None | Unset = UNSET,
    kind: list[MemoryKind] | None | Unset = UNSET,
    category: list[str] | None | Unset = UNSET,
    lifecycle: list[Lifecycle] | None | Unset = UNSET,
    created_after: datetime.datetime | None | Unset = UNSET,
    created_before: datetime.datetime | None | Unset = UNSET,
    event_after: datetime.datetime | None | Unset = UNSET,
    event_before: datetime.datetime | None | Unset = UNSET,
) -> Response[MemoriesDeleted | Problem]:
    """Forget memories matching a filter

     Delete exactly the memories the same filters list (e.g. `kind=episodic`; live ones
    unless `lifecycle` says otherwise), every one of them: `limit` and `cursor` are refused
    (422). `all=true` with no filter forgets everything. The answer counts what was removed;
    `dry_run=true` only counts. Each deletion is kept in the history.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        all_ (bool | Unset): Required to delete without any filter; then superseded memories go
            too. Default: False.
        dry_run (bool | Unset): Only count what would be deleted (and name the first ids); change
            nothing. Default: False.
        scope (list[MemoryScope] | None | Unset): On a user's route: `user` (default), `org`, or
            both.
        kind (list[MemoryKind] | None | Unset):
        category (list[str] | None | Unset):
        lifecycle (list[Lifecycle] | None | Unset): Default: proposed and confirmed (not
            superseded).
        created_after (datetime.datetime | None | Unset):
        created_before (datetime.datetime | None | Unset):
        event_after (datetime.datetime | None | Unset):
        event_before (datetime.datetime | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[MemoriesDeleted | Problem]
    """

    kwargs = _get_kwargs(
        user_id=user_id,
        all_=all_,
        dry_run=dry_run,
        scope=scope,
        kind=kind,
        category=category,
        lifecycle=lifecycle,
        created_after=created_after,
        created_before=created_before,
        event_after=event_after,
        event_before=event_before,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    user_id: str,
    *,
    client: AuthenticatedClient,
    all_: bool | Unset = False,
    dry_run: bool | Unset = False,
    scope: list[MemoryScope] | None | Unset = UNSET,
    kind: list[MemoryKind] | None | Unset = UNSET,
    category: list[str] | None | Unset = UNSET,
    lifecycle: list[Lifecycle] | None | Unset = UNSET,
    created_after: datetime.datetime | None | Unset = UNSET,
    created_before: datetime.datetime | None | Unset = UNSET,
    event_after: datetime.datetime | None | Unset = UNSET,
    event_before: datetime.datetime | None | Unset = UNSET,
) -> MemoriesDeleted | Problem | None:
    """Forget memories matching a filter

     Delete exactly the memories the same filters list (e.g. `kind=episodic`; live ones
    unless `lifecycle` says otherwise), every one of them: `limit` and `cursor` are refused
    (422). `all=true` with no filter forgets everything. The answer counts what was removed;
    `dry_run=true` only counts. Each deletion is kept in the history.

    Args:
        user_id (str): A user id of the caller's tenant, or `me` for the caller itself.
        all_ (bool | Unset): Required to delete without any filter; then superseded memories go
            too. Default: False.
        dry_run (bool | Unset): Only count what would be deleted (and name the first ids); change
            nothing. Default: False.
        scope (list[MemoryScope] | None | Unset): On a user's route: `user` (default), `org`, or
            both.
        kind (list[MemoryKind] | None | Unset):
        category (list[str] | None | Unset):
        lifecycle (list[Lifecycle] | None | Unset): Default: proposed and confirmed (not
            superseded).
        created_after (datetime.datetime | None | Unset):
        created_before (datetime.datetime | None | Unset):
        event_after (datetime.datetime | None | Unset):
        event_before (datetime.datetime | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        MemoriesDeleted | Problem
    """

    return (
        await asyncio_detailed(
            user_id=user_id,
            client=client,
            all_=all_,
            dry_run=dry_run,
            scope=scope,
            kind=kind,
            category=category,
            lifecycle=lifecycle,
            created_after=created_after,
            created_before=created_before,
            event_after=event_after,
            event_before=event_before,
        )
    ).parsed
