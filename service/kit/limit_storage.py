"""Where `limits` keeps its counters: in process by default, or a shared Redis.

Both the request rate limits and the failed-authentication limit count through this one
store, so with MNEME_RATE_LIMIT_STORAGE_URI=redis://… every replica sees the same counters.
"""

from __future__ import annotations

from limits.aio.storage import Storage
from limits.storage import storage_from_string


def limit_storage(uri: str) -> Storage:
    """An async `limits` storage for `uri` whose connection errors surface as `StorageError`."""
    uri = uri.removeprefix("async+")
    if uri.startswith(("redis://", "rediss://", "redis+unix://")):
        # redis-py rather than limits' default client (coredis): one client library to ship.
        storage = storage_from_string(
            "async+" + uri, implementation="redispy", wrap_exceptions=True
        )
    else:
        storage = storage_from_string("async+" + uri, wrap_exceptions=True)
    assert isinstance(storage, Storage)
    return storage
