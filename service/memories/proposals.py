"""What a proposed fact waits for, and what confirming it applies.

The write path keeps, on a fact it writes `proposed`, the facts it would replace
(`metadata.proposed_supersedes`) and, for one proposed because it contradicts a deliberate
fact, why it waits (`metadata.review_reason`). Whoever confirms such a fact — a reviewer's
`PATCH {"lifecycle": "confirmed"}`, or the write path when a confident repeat confirms a fact
proposed for its low confidence alone — reads and clears them by these rules, and supersedes
what they name through `MemoryRecorder.supersede_confirmed`, so both end the same way.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

PROPOSED_SUPERSEDES = "proposed_supersedes"
REVIEW_REASON = "review_reason"


def named_replacements(metadata: Mapping[str, Any] | None, own_id: uuid.UUID) -> list[uuid.UUID]:
    """The ids `metadata.proposed_supersedes` names, in order and once each: not the fact's
    own id, nor a value that is no id (metadata a client wrote may hold anything)."""
    named = (metadata or {}).get(PROPOSED_SUPERSEDES)
    replaced: list[uuid.UUID] = []
    for value in named if isinstance(named, list) else []:
        try:
            memory_id = uuid.UUID(str(value))
        except ValueError:
            continue
        if memory_id != own_id and memory_id not in replaced:
            replaced.append(memory_id)
    return replaced


def reviewed(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """The metadata of a proposed fact once it is confirmed: without what it waited for (the
    review is done)."""
    rest = dict(metadata or {})
    rest.pop(PROPOSED_SUPERSEDES, None)
    rest.pop(REVIEW_REASON, None)
    return rest
