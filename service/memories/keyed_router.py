"""HTTP routes for memories a client addresses by its own key (kind, category, key)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response, status

from service.dependencies import UserOwner
from service.errors import problem_responses
from service.memories.dependencies import KeyedMemorySvc
from service.memories.keyed import StoreKey
from service.memories.schemas import (
    CATEGORY_PATTERN,
    STORE_KEY_MAX,
    KeyedMemoryPut,
    KeyedMemoryWritten,
    MemoryKind,
    MemoryRead,
)

router = APIRouter(prefix="/v1/users/{user_id}/keyed-memories", tags=["memories"])


async def store_key(
    kind: Annotated[MemoryKind, Query(description="The memory's kind.")],
    key: Annotated[
        str, Query(min_length=1, max_length=STORE_KEY_MAX, description="The client's key.")
    ],
    category: Annotated[
        str | None, Query(pattern=CATEGORY_PATTERN, description="The memory's category, if any.")
    ] = None,
) -> StoreKey:
    return StoreKey(kind=kind, category=category, key=key)


Address = Annotated[StoreKey, Depends(store_key)]


@router.get(
    "",
    response_model=MemoryRead,
    summary="Get the memory a key holds",
    responses=problem_responses(401, 404, 422, 429),
)
async def get_keyed_memory(owner: UserOwner, address: Address, keyed: KeyedMemorySvc) -> MemoryRead:
    return await keyed.get(owner, address)


@router.put(
    "",
    response_model=KeyedMemoryWritten,
    summary="Put a memory under a key",
    responses={
        201: {"model": KeyedMemoryWritten, "description": "The key held nothing; added."},
        **problem_responses(401, 404, 413, 422, 429),
    },
)
async def put_keyed_memory(
    owner: UserOwner,
    address: Address,
    body: KeyedMemoryPut,
    keyed: KeyedMemorySvc,
    response: Response,
) -> KeyedMemoryWritten:
    """The first put of a key adds a memory (201); later ones replace its text and metadata
    (200, re-embedded, recorded in its history). Two keys may hold the same text. Refuses
    secrets and PII-like text (422 `SECRET_REFUSED`)."""
    written = await keyed.put(owner, address, body)
    if written.created:
        response.status_code = status.HTTP_201_CREATED
    return written


@router.delete(
    "",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    summary="Forget the memory a key holds",
    responses=problem_responses(401, 404, 422, 429),
)
async def delete_keyed_memory(owner: UserOwner, address: Address, keyed: KeyedMemorySvc) -> None:
    await keyed.delete(owner, address)
