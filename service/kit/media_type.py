"""415 for JSON bodies sent under another media type (or none).

FastAPI parses a body as JSON only when its `Content-Type` says JSON; anything else reaches
validation as raw bytes and fails with a 422 ("Input should be a valid dictionary") that
hides the real mistake. This dependency, installed on the whole app, answers those requests
with a 415 problem naming the media type to send instead.
"""

from __future__ import annotations

from email.message import Message

from fastapi import Request
from fastapi.routing import APIRoute

from service.errors import DomainError

JSON_MEDIA_TYPE = "application/json"
# RFC 5789 and the W3C LDP spec name the header that advertises what a method accepts.
_ACCEPT_HEADERS = {"PATCH": "Accept-Patch", "POST": "Accept-Post"}


class UnsupportedMediaType(DomainError):
    status = 415
    title = "Unsupported media type"
    code = "UNSUPPORTED_MEDIA_TYPE"


def media_type_of(content_type: str) -> str:
    """The media type a `Content-Type` value names (`type/subtype`, lowercase), parameters
    left out; `text/plain` when it names none."""
    message = Message()
    message["content-type"] = content_type
    return message.get_content_type()


def is_json_media_type(content_type: str) -> bool:
    """`application/json` or any `application/*+json`, parameters ignored."""
    maintype, _, subtype = media_type_of(content_type).partition("/")
    return maintype == "application" and (subtype == "json" or subtype.endswith("+json"))


async def require_json_body(request: Request) -> None:
    """Refuse a non-empty body that is not JSON on a route whose body is JSON."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute) or route.body_field is None:
        return
    declared = getattr(route.body_field.field_info, "media_type", JSON_MEDIA_TYPE)
    if not is_json_media_type(declared) or not await request.body():
        return
    if not is_json_media_type(request.headers.get("content-type", "")):
        accept = _ACCEPT_HEADERS.get(request.method)
        raise UnsupportedMediaType(
            f"Send this body as JSON with `Content-Type: {declared}`.",
            headers={accept: declared} if accept else None,
        )
