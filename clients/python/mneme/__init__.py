"""Mneme for agents: typed calls over the generated `mneme_client`.

async with Mneme("http://localhost:8000", token) as mneme:
    await mneme.remember("Prefers window seats.", metadata={"source": "onboarding"})
    block = await mneme.context("Book me a flight")
    turn = await mneme.turn(thread_id, user="Book me a flight", assistant=last_reply)
"""

from mneme.calls import jsonable, model, pages, unwrap
from mneme.client import Mneme, connect
from mneme.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    MnemeError,
    NotFound,
    PreconditionFailed,
    RateLimited,
    ServerError,
    ServiceUnavailable,
    Unauthenticated,
    ValidationFailed,
)
from mneme.retry import AsyncRetryingTransport, RetryingTransport, RetryPolicy
from mneme.version import __version__

__all__ = [
    "AsyncRetryingTransport",
    "BadRequest",
    "Conflict",
    "Forbidden",
    "Mneme",
    "MnemeError",
    "NotFound",
    "PreconditionFailed",
    "RateLimited",
    "RetryPolicy",
    "RetryingTransport",
    "ServerError",
    "ServiceUnavailable",
    "Unauthenticated",
    "ValidationFailed",
    "__version__",
    "connect",
    "jsonable",
    "model",
    "pages",
    "unwrap",
]
