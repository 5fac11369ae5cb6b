"""Conversation sessions as memories, for the search tests: each session its own source thread."""

from __future__ import annotations

import uuid
from typing import Any


def session_items(turns: list[str], *, day: int) -> list[dict[str, Any]]:
    """A batch's items for one session: episodic turns of a new source thread, one second apart
    on 2023-05-0`day`, in order."""
    thread = str(uuid.uuid4())
    return [
        {
            "text": turn,
            "kind": "episodic",
            "source_thread_id": thread,
            "event_at": f"2023-05-0{day}T10:00:{position:02d}Z",
        }
        for position, turn in enumerate(turns)
    ]
