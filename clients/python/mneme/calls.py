"""Generated operations called with plain values: dict bodies in, the success model or an
exception out, pages followed to their end."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import typing
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeVar, overload

from mneme_client.models.problem import Problem
from mneme_client.types import Response

from mneme.errors import error_from_response

T = TypeVar("T")
M = TypeVar("M")
P = TypeVar("P")


def jsonable(value: Any) -> Any:
    """`value` as the API's JSON: datetimes as ISO 8601, UUIDs as strings, enums as values."""
    if isinstance(value, Mapping):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if callable(getattr(value, "to_dict", None)) and not isinstance(value, type):
        return jsonable(value.to_dict())  # a generated model inside a plain body
    return value


def model(cls: type[M], value: M | Mapping[str, Any]) -> M:
    """`value` as an instance of the generated model `cls`; a mapping (with plain dicts, lists,
    datetimes, UUIDs or enums anywhere inside) is converted the way the API would read it."""
    if isinstance(value, cls):
        return value
    from_dict: Callable[[Mapping[str, Any]], M] = getattr(cls, "from_dict")  # noqa: B009
    return from_dict(jsonable(value))


@dataclasses.dataclass(frozen=True)
class Verbatim:
    """A value sent to the API as the caller wrote it, for the API to read and refuse (a 422
    `ValidationFailed`, as the TypeScript layer gets) rather than the generated models refusing
    it here with a bare `ValueError`: the generated code sends a body's `to_dict()` and an enum
    parameter's `value`, and both are the value itself."""

    json: Any

    def to_dict(self) -> Any:
        return self.json

    @property
    def value(self) -> Any:
        return self.json


def verbatim(value: Any) -> Verbatim:
    """`value` as the API's JSON (see `jsonable`), to be sent as it is."""
    return Verbatim(jsonable(value))


@overload
def unwrap(response: Response[T | Problem | None]) -> T | None: ...
@overload
def unwrap(response: Response[T | Problem]) -> T: ...
def unwrap(response: Response[Any]) -> Any:
    """The parsed success of a generated `*_detailed` call; a problem is raised as the
    `MnemeError` subclass for its status."""
    if response.status_code >= 400:
        raise error_from_response(int(response.status_code), response.headers, response.content)
    return response.parsed


def _body_type(operation: Callable[..., Any]) -> type[Any] | None:
    """The model class an operation's `body` parameter expects, if it takes one."""
    hints = typing.get_type_hints(operation)
    body = hints.get("body")
    return body if isinstance(body, type) and hasattr(body, "from_dict") else None


def coerce_body(operation: Callable[..., Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """`kwargs` with a plain `body` made ready to send as written: a mapping, or a list (a JSON
    Patch), with plain values anywhere inside; the generated models in it are sent as they are."""
    body = kwargs.get("body")
    if isinstance(body, Mapping):
        # An operation whose body is one model sends its `to_dict()`; one whose body is a union
        # (or optional) sends the value itself.
        sent = verbatim(body) if _body_type(operation) is not None else jsonable(body)
        return {**kwargs, "body": sent}
    if isinstance(body, list | tuple):
        return {
            **kwargs,
            "body": [item if hasattr(item, "to_dict") else verbatim(item) for item in body],
        }
    return kwargs


async def pages(
    operation: Callable[..., Awaitable[Response[P | Problem]]], *args: Any, **kwargs: Any
) -> AsyncIterator[P]:
    """Every page of a list operation (a generated `asyncio_detailed` whose answer has
    `next_cursor`), following the cursor from the first page to the last."""
    cursor: str | None = kwargs.pop("cursor", None)
    while True:
        page = unwrap(await operation(*args, cursor=cursor, **kwargs))
        yield page
        next_cursor = getattr(page, "next_cursor", None)
        if not isinstance(next_cursor, str) or not next_cursor:
            return
        cursor = next_cursor
