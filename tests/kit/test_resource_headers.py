"""The rules under every resource's `ETag`, `If-Match`, `If-None-Match` and `Location`."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from service.errors import PreconditionFailed
from service.kit.resource_headers import (
    entity_tag,
    if_match_allows,
    if_none_match_hits,
    location,
    require_match,
    require_none_match,
)


class Note(BaseModel):
    id: int
    text: str
    tags: dict[str, int]


class NoteWritten(Note):
    created: bool


@pytest.mark.parametrize(
    ("header", "allowed"),
    [
        (None, True),
        ("*", True),
        ('"7"', True),
        ('W/"7"', True),
        ('"6", "7"', True),
        ('"6"', False),
        ("7", False),
        ("bogus", False),
        ("", False),
        ('""', False),
    ],
)
def test_if_match(header: str | None, allowed: bool) -> None:
    assert if_match_allows(header, '"7"') is allowed


def test_if_match_on_a_missing_resource_passes_only_without_the_header() -> None:
    assert if_match_allows(None, None) is True
    assert if_match_allows("*", None) is False
    assert if_match_allows('"7"', None) is False


@pytest.mark.parametrize(
    ("header", "hit"),
    [
        (None, False),
        ("*", True),
        ('"7"', True),
        ('W/"7"', True),
        ('"6", "7"', True),
        ('"6"', False),
    ],
)
def test_if_none_match(header: str | None, hit: bool) -> None:
    assert if_none_match_hits(header, '"7"') is hit


def test_a_refused_precondition_carries_the_current_tag() -> None:
    with pytest.raises(PreconditionFailed) as refused:
        require_match('"6"', '"7"', detail="changed")
    assert refused.value.status == 412 and refused.value.code == "PRECONDITION_FAILED"
    assert refused.value.headers == {"ETag": '"7"'}
    assert refused.value.extensions == {"current_etag": '"7"'}
    with pytest.raises(PreconditionFailed) as missing:
        require_match("*", None, detail="nothing there")
    assert missing.value.headers == {}
    require_match('"7"', '"7"', detail="unused")


def test_if_none_match_star_on_a_write_means_only_create() -> None:
    require_none_match("*", None, detail="unused")
    require_none_match(None, '"7"', detail="unused")
    require_none_match('"6"', '"7"', detail="unused")
    with pytest.raises(PreconditionFailed):
        require_none_match("*", '"7"', detail="exists")
    with pytest.raises(PreconditionFailed):
        require_none_match('"7"', '"7"', detail="same state")


def test_the_tag_is_a_quoted_digest_of_every_field_and_only_of_the_resource() -> None:
    note = Note(id=1, text="a", tags={"x": 1, "y": 2})
    tag = entity_tag(note)
    assert tag.startswith('"') and tag.endswith('"') and len(tag) == 34
    assert entity_tag(Note(id=1, text="a", tags={"y": 2, "x": 1})) == tag
    assert entity_tag(note.model_copy(update={"text": "b"})) != tag
    assert entity_tag(note.model_copy(update={"tags": {"x": 1, "y": 3}})) != tag
    written = NoteWritten(**note.model_dump(), created=True)
    # A write's answer, with fields about the request, carries the resource's own tag.
    assert entity_tag(written, Note) == tag
    assert entity_tag(written) != tag


def test_location_encodes_each_segment() -> None:
    assert location("v1", "users", "ada", "memories", 7) == "/v1/users/ada/memories/7"
    assert location("v1", "users", "a|b/c d@x") == "/v1/users/a%7Cb%2Fc%20d@x"
