"""The name of an owner's vector index: made from the owner, so a search finds it by name
(`fusion.sql.OWNER_STATS_SQL` computes the same name in SQL) without a table of its own."""

from __future__ import annotations

import hashlib

OWNER_INDEX_PREFIX = "ix_memory_owner_"


def owner_index_name(tenant_id: str, owner_key: str, column: str) -> str:
    """`ix_memory_owner_` and the first 24 hex digits of the MD5 of `tenant/owner/column`: the
    owner's identity stays out of the catalog's names, and a name fits PostgreSQL's 63 bytes."""
    digest = hashlib.md5(f"{tenant_id}/{owner_key}/{column}".encode(), usedforsecurity=False)
    return OWNER_INDEX_PREFIX + digest.hexdigest()[:24]
