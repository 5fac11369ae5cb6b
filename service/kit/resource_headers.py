"""The headers that name a resource and its version: `Location` and `ETag`.

A `201 Created` answer says where the new resource lives (`Location`), so a client never has to
build the address itself.

Every mutable resource answers reads and writes with an `ETag`, so that no update is lost to a
concurrent one. A client that sends it back in `If-Match` writes only if nobody changed the
resource meanwhile (else 412 with the current tag, and nothing changed); a client that sends it
in `If-None-Match` on a read gets 304 with no body while its copy is current.

A resource's tag is a digest of its representation (`entity_tag`, RFC 9110 §8.8.3): it changes
whenever any field a client can read changes, whichever path wrote it (the API, the write path,
a background job), and two reads of the same state always agree. (A profile's tag is its stored
version instead, with a digest of the account details.) Services check `If-Match` against the
row they hold locked, so of two writers holding the same tag only the first passes.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final, Generic, TypeVar
from urllib.parse import quote

from fastapi import Header, Response, status
from pydantic import BaseModel

from service.errors import PreconditionFailed

BodyT = TypeVar("BodyT")

# An entity tag is an opaque quoted string, optionally marked weak (`W/`).
_ENTITY_TAG: Final = re.compile(r'(?:W/)?"([^"]*)"')
# 128 bits of the digest: collisions between two states of one resource are out of reach.
_DIGEST_HEX_CHARS: Final = 32


@dataclass(frozen=True)
class Tagged(Generic[BodyT]):
    """A response body and the entity tag of the resource state it describes."""

    body: BodyT
    etag: str


def entity_tag(representation: BaseModel, shape: type[BaseModel] | None = None) -> str:
    """The strong tag of a representation: a digest of its canonical JSON.

    `shape` names the resource's own model when `representation` extends it with fields about
    the request (e.g. `created`), so a write's answer carries the tag a later read computes.
    """
    fields = set((shape or type(representation)).model_fields)
    document = representation.model_dump(mode="json", include=fields)
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return f'"{hashlib.sha256(canonical.encode()).hexdigest()[:_DIGEST_HEX_CHARS]}"'


def _listed(header: str) -> list[str]:
    return _ENTITY_TAG.findall(header)


def if_match_allows(if_match: str | None, current: str | None) -> bool:
    """RFC 9110 §13.1.1 `If-Match`: absent always passes; `*` passes when the resource exists
    (`current` is its tag, None when there is none); otherwise one listed tag must equal the
    current one. A `W/` prefix is tolerated: proxies that compress weaken strong tags. A header
    that lists no well-formed tag (e.g. `bogus`) never passes."""
    if if_match is None:
        return True
    if current is None:
        return False
    if if_match.strip() == "*":
        return True
    return current.strip('"') in _listed(if_match)


def if_none_match_hits(if_none_match: str | None, current: str) -> bool:
    """RFC 9110 §13.1.2 `If-None-Match` on a read: true when the client's copy is current
    (`*`, or one listed tag equals the current one, weakly compared)."""
    if if_none_match is None:
        return False
    if if_none_match.strip() == "*":
        return True
    return current.strip('"') in _listed(if_none_match)


NOTHING_TO_MATCH = "There is nothing here for If-Match to name, so nothing changed."


def require_match(
    if_match: str | None, current: str | None, *, detail: str, absent: str = NOTHING_TO_MATCH
) -> None:
    """Raise 412 `PRECONDITION_FAILED` unless `If-Match` allows: with `detail` and the current
    tag, or with `absent` when there is no resource (`current` is None). Nothing was there to
    change since the client read it, so the detail says what is missing, not that it
    changed."""
    if if_match_allows(if_match, current):
        return
    if current is None:
        raise PreconditionFailed(absent)
    raise PreconditionFailed(detail, headers={"ETag": current}, current_etag=current)


def require_none_match(if_none_match: str | None, current: str | None, *, detail: str) -> None:
    """For a write, RFC 9110 §13.1.2: 412 when `If-None-Match` names the current state, or is
    `*` and the resource exists (`*` thus means "only create")."""
    if current is not None and if_none_match_hits(if_none_match, current):
        raise PreconditionFailed(detail, headers={"ETag": current}, current_etag=current)


def require_preconditions(
    if_match: str | None,
    if_none_match: str | None,
    current: str | None,
    *,
    changed: str,
    unchanged: str,
    absent: str = NOTHING_TO_MATCH,
) -> None:
    """A conditional write's two preconditions on the resource's `current` tag (None: there
    is none): `If-Match` (`require_match`: `changed`, or `absent`), then `If-None-Match`
    (`require_none_match`: `unchanged`)."""
    require_match(if_match, current, detail=changed, absent=absent)
    require_none_match(if_none_match, current, detail=unchanged)


# --- HTTP: request headers, response shaping, OpenAPI ------------------------------------------

IfMatch = Annotated[
    str | None,
    Header(
        description="An ETag from a previous read or write: the change happens only if the "
        "resource is still in that state (412 `PRECONDITION_FAILED` otherwise, with the "
        "current ETag, and nothing changed).",
    ),
]
IfNoneMatch = Annotated[
    str | None,
    Header(
        description="An ETag from a previous read: 304 with no body when the resource is "
        "still in that state.",
    ),
]

IfNoneMatchOnWrite = Annotated[
    str | None,
    Header(
        description="`*`, or an ETag: 412 `PRECONDITION_FAILED` (with the current ETag, and "
        "nothing changed) when the resource exists, or is in that state.",
    ),
]

ETAG_HEADER: Final[Mapping[str, Any]] = {
    "ETag": {
        "description": "The version of the resource in this response; send it back in "
        "`If-Match` to change the resource only if nobody changed it meanwhile, or in "
        "`If-None-Match` to read it only if it changed.",
        "schema": {"type": "string"},
    }
}
LOCATION_HEADER: Final[Mapping[str, Any]] = {
    "Location": {
        "description": "Where to read what the request created: the new resource, or the "
        "collection that several new ones joined.",
        "schema": {"type": "string"},
    }
}


def location(*segments: object) -> str:
    """An absolute path from path segments, each percent-encoded as one segment (an
    identifier may hold characters a path cannot, such as `|`)."""
    return "/" + "/".join(quote(str(segment), safe=":@+=") for segment in segments)


def tagged_response(description: str) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entry for a 200 that carries its resource's ETag."""
    return {status.HTTP_200_OK: {"description": description, "headers": dict(ETAG_HEADER)}}


def created_response(
    description: str, *, tagged: bool = True, model: type[BaseModel] | None = None
) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entry for a 201 that names what it created (and its ETag, when one resource).
    `model` is its body where the route's own status is another one."""
    headers = {**LOCATION_HEADER, **(ETAG_HEADER if tagged else {})}
    entry: dict[str, Any] = {"description": description, "headers": headers}
    if model is not None:
        entry["model"] = model
    return {status.HTTP_201_CREATED: entry}


NOT_MODIFIED_RESPONSE: Final[dict[int | str, dict[str, Any]]] = {
    status.HTTP_304_NOT_MODIFIED: {
        "description": "The resource still has the ETag sent in `If-None-Match`; no body.",
        "headers": dict(ETAG_HEADER),
    }
}


def with_etag(response: Response, tagged: Tagged[BodyT]) -> BodyT:
    """The tagged body, its entity tag set on the response."""
    response.headers["ETag"] = tagged.etag
    return tagged.body


def conditional_read(
    response: Response, tagged: Tagged[BodyT], if_none_match: str | None
) -> BodyT | Response:
    """The body with its ETag, or 304 Not Modified when the client's copy is current."""
    if if_none_match_hits(if_none_match, tagged.etag):
        return Response(status_code=status.HTTP_304_NOT_MODIFIED, headers={"ETag": tagged.etag})
    return with_etag(response, tagged)
