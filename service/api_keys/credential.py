"""The API key wire format: `mneme.<tenant, base64url>.<key id>.<secret>`.

The tenant travels in the key because the key table is under row-level security like every
other table: the lookup must know its tenant before it can see any row. The tenant part is
not a secret, and forging it only makes the lookup miss. Only a SHA-256 of the 256-bit random
secret is stored; a slow password hash buys nothing for secrets of that entropy.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass

from service.auth.principal import TENANT_ID_MAX
from service.kit.types import is_valid_identifier

PREFIX = "mneme"


@dataclass(frozen=True)
class ParsedApiKey:
    tenant_id: str
    key_id: uuid.UUID
    secret: str


def looks_like_api_key(token: str) -> bool:
    return token.startswith(PREFIX + ".") and token.count(".") == 3


def new_api_key(tenant_id: str, key_id: uuid.UUID) -> tuple[str, bytes]:
    """A fresh key's full text (shown once) and the hash to store."""
    secret = secrets.token_urlsafe(32)
    tenant_part = base64.urlsafe_b64encode(tenant_id.encode()).decode().rstrip("=")
    return f"{PREFIX}.{tenant_part}.{key_id.hex}.{secret}", hash_secret(secret)


def parse_api_key(token: str) -> ParsedApiKey | None:
    try:
        prefix, tenant_part, key_hex, secret = token.split(".")
        if prefix != PREFIX or not secret:
            return None
        padded = tenant_part + "=" * (-len(tenant_part) % 4)
        tenant_id = base64.urlsafe_b64decode(padded.encode()).decode()
        # The tenant part scopes the lookup's transaction before anything is verified: a
        # forged one must be refused here, not reach the database.
        if not is_valid_identifier(tenant_id, TENANT_ID_MAX):
            return None
        return ParsedApiKey(tenant_id=tenant_id, key_id=uuid.UUID(hex=key_hex), secret=secret)
    except (ValueError, UnicodeDecodeError):
        return None


def hash_secret(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


def secret_matches(secret: str, stored_hash: bytes) -> bool:
    return hmac.compare_digest(hash_secret(secret), stored_hash)


def display_prefix(full_key: str) -> str:
    """What listings show so a human can tell keys apart without seeing the secret."""
    return full_key.rsplit(".", 1)[0][:24] + "…" + full_key[-4:]
