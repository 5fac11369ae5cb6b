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
    return value


def model(cls: type[M], value: M | Mapping[str, Any]) -> M:
    """`value` as an instance of the generated model `cls`; a mapping (with plain dicts, lists,
    datetimes, UUIDs or enums anywhere inside) is converted the way the API would read it."""
    if isinstance(value, cls):
        return value
    from_dict: Callable[[Mapping[str, Any]], M] = getattr(cls, "from_dict")  # noqa: B009
    return from_dict(jsonable(value))


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
    """`kwargs` with a mapping `body` converted to the model `operation` expects."""
    body = kwargs.get("body")
    if isinstance(body, Mapping):
        body_type = _body_type(operation)
        if body_type is not None:
            return {**kwargs, "body": model(body_type, body)}
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
