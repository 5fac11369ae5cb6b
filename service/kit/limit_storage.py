"""Where `limits` keeps its counters: in process by default, or a shared Redis.

Both the request rate limits and the failed-authentication limit count through this one
store, so with MNEME_RATE_LIMIT_STORAGE_URI=redis://… every replica sees the same counters.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from limits.aio.storage import Storage
from limits.errors import ConfigurationError
from limits.storage import storage_from_string

SCHEMES = ("memory", "redis", "rediss", "redis+unix")
"""The stores the service ships a client for: in process, or Redis through redis-py (limits'
other stores need packages the service does not install)."""

_REDIS_SCHEMES = tuple(f"{scheme}://" for scheme in SCHEMES if scheme != "memory")


def limit_storage(uri: str) -> Storage:
    """An async `limits` storage for `uri` whose connection errors surface as `StorageError`."""
    uri = uri.removeprefix("async+")
    if uri.startswith(_REDIS_SCHEMES):
        # redis-py rather than limits' default client (coredis): one client library to ship.
        storage = storage_from_string(
            "async+" + uri, implementation="redispy", wrap_exceptions=True
        )
    else:
        storage = storage_from_string("async+" + uri, wrap_exceptions=True)
    assert isinstance(storage, Storage)
    return storage


def unusable_storage(uri: str) -> str | None:
    """Why `limit_storage` cannot open `uri` (None: it can), found by opening it (nothing
    connects until a limit is counted), in words that do not repeat it: a Redis URI may hold
    a password, which `limits`' own errors quote."""
    if urlsplit(uri.removeprefix("async+")).scheme not in SCHEMES:
        return (
            "names no store the rate limits can use: memory://, or Redis as "
            "redis://[:password@]host:port/db (rediss:// with TLS, redis+unix:// on a socket)"
        )
    try:
        limit_storage(uri)
    except (ConfigurationError, ValueError):
        return (
            "is not a Redis URI the rate limits can read: redis://[:password@]host:port/db, "
            "with a numeric port and only options redis-py knows"
        )
    return None
