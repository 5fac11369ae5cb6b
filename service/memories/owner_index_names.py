"""The name of an owner's vector index: made from the owner and the kind of memory it holds, so
a search finds it by name (`fusion.sql.OWNER_STATS_SQL` computes the same name in SQL) without a
table of its own."""

from __future__ import annotations

import hashlib

OWNER_INDEX_PREFIX = "ix_memory_owner_"

ALL_KINDS = ""
"""The kind of an index over all of an owner's memories, whatever their kind (as indexes were
built before an owner's graph was split by kind): a search reads it while it exists."""


def owner_index_name(tenant_id: str, owner_key: str, column: str, kind: str = ALL_KINDS) -> str:
    """`ix_memory_owner_` and the first 24 hex digits of the MD5 of `tenant/owner/column/kind`
    (`tenant/owner/column` for `ALL_KINDS`): the owner's identity stays out of the catalog's
    names, and a name fits PostgreSQL's 63 bytes."""
    identity = f"{tenant_id}/{owner_key}/{column}" + (f"/{kind}" if kind else "")
    digest = hashlib.md5(identity.encode(), usedforsecurity=False)
    return OWNER_INDEX_PREFIX + digest.hexdigest()[:24]
