"""HTTP routes for memories a client addresses by its own key (kind, category, key)."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Header, Query, Response, status

from service.dependencies import AddressedUserId, UserOwner
from service.errors import problem_responses
from service.kit.resource_headers import (
    NOT_MODIFIED_RESPONSE,
    IfMatch,
    IfNoneMatch,
    IfNoneMatchOnWrite,
    Tagged,
    conditional_read,
    created_response,
    location,
    tagged_response,
    with_etag,
)
from service.kit.routing import ApiRoute
from service.memories.dependencies import KeyedMemorySvc, PutTextAhead
from service.memories.schemas import (
    CATEGORY_PATTERN,
    KeyedMemoryPut,
    KeyedMemoryWritten,
    MemoryKind,
    MemoryRead,
    StoreKeyText,
)
from service.memories.service import memory_etag
from service.memories.store_key import StoreKey

router = APIRouter(
    route_class=ApiRoute, prefix="/v1/users/{user_id}/keyed-memories", tags=["memories"]
)


async def store_key(
    kind: Annotated[MemoryKind, Query(description="The memory's kind.")],
    key: Annotated[
        StoreKeyText,
        Query(
            description="The client's key: something visible, not only whitespace or "
            "invisible characters (kept as given).",
        ),
    ],
    category: Annotated[
        str | None, Query(pattern=CATEGORY_PATTERN, description="The memory's category, if any.")
    ] = None,
) -> StoreKey:
    return StoreKey(kind=kind, category=category, key=key)


Address = Annotated[StoreKey, Depends(store_key)]


def keyed_location(user_id: str, address: StoreKey) -> str:
    """The address a keyed memory is read at: this route with its key as the query."""
    query = {"kind": address.kind, "key": address.key}
    if address.category is not None:
        query["category"] = address.category
    return f"{location('v1', 'users', user_id, 'keyed-memories')}?{urlencode(query)}"


@router.get(
    "",
    response_model=MemoryRead,
    summary="Get the memory a key holds",
    responses={
        **tagged_response("The memory."),
        **NOT_MODIFIED_RESPONSE,
        **problem_responses(401, 404, 422, 429),
    },
)
async def get_keyed_memory(
    owner: UserOwner,
    address: Address,
    keyed: KeyedMemorySvc,
    response: Response,
    if_none_match: IfNoneMatch = None,
) -> MemoryRead | Response:
    """The memory with its ETag, the same as on `GET …/memories/{id}`."""
    memory = await keyed.get(owner, address)
    return conditional_read(response, Tagged(memory, memory_etag(memory)), if_none_match)


@router.put(
    "",
    response_model=KeyedMemoryWritten,
    summary="Put a memory under a key",
    responses={
        **tagged_response("The key's memory was replaced (or already said this)."),
        **created_response("The key held nothing; added.", model=KeyedMemoryWritten),
        **problem_responses(401, 404, 412, 413, 422, 429),
    },
)
async def put_keyed_memory(
    user_id: AddressedUserId,
    owner: UserOwner,
    address: Address,
    body: KeyedMemoryPut,
    ahead: PutTextAhead,
    keyed: KeyedMemorySvc,
    response: Response,
    if_match: IfMatch = None,
    if_none_match: Annotated[
        str | None,
        Header(
            description="`*`: only add; 412 if the key already holds a memory. An ETag: 412 "
            "if the key's memory is in that state.",
        ),
    ] = None,
) -> KeyedMemoryWritten:
    """The first put of a key adds a memory (201); later ones replace its text, metadata,
    confidence, event time and expiry (200, recorded in its history, re-embedded when the text
    changed); a put of what the key's memory already holds writes nothing and keeps its ETag.
    The memory a put answers with is live: one superseded since (by a procedure slot written
    over it, say) is confirmed again. A procedural memory of a slot's category that a put makes
    live supersedes the slot's other memory. Two keys may hold the same text. Refuses
    secrets and PII-like text (422 `SECRET_REFUSED`). `If-Match` with the ETag replaces only
    that state (`*`: only if the key holds a memory); else 412 and nothing changes."""
    written = await keyed.put(
        owner, address, body, if_match=if_match, if_none_match=if_none_match, ahead=ahead
    )
    if written.created:
        response.status_code = status.HTTP_201_CREATED
        response.headers["Location"] = keyed_location(user_id, address)
    return with_etag(response, Tagged(written, memory_etag(written)))


@router.delete(
    "",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    summary="Forget the memory a key holds",
    responses=problem_responses(401, 404, 412, 422, 429),
)
async def delete_keyed_memory(
    owner: UserOwner,
    address: Address,
    keyed: KeyedMemorySvc,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatchOnWrite = None,
) -> None:
    """Delete the memory the key holds (recorded in its history); the key is free for a later
    put. `If-Match` with the ETag deletes only that state; else 412 and nothing changes.
    `If-None-Match: *` (or the memory's ETag): 412, since the key holds it (in that state)."""
    await keyed.delete(owner, address, if_match=if_match, if_none_match=if_none_match)
