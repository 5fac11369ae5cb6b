"""Turn storage, the write path without an LLM: each new human message of a thread becomes an
episodic memory of category `turn` (a message longer than a part, several), so search and
context work with no API key."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

from service.auth.owner import Owner
from service.extraction.passes import MAX_ROUNDS, TURNS_ACTOR, PassRunner
from service.extraction.record import PassOutcome, PassRecord
from service.extraction.resolver import refusal, remembered_name
from service.kit.token_counting import DEFAULT_ENCODING, encoding_for
from service.kit.types import visible_text
from service.memories.embedding import embed_or_none
from service.memories.schemas import MEMORY_TEXT_MAX, MemoryCreate
from service.memories.writer import DerivedMemory
from service.threads.models import Message
from service.threads.schemas import HUMAN_ROLE

TURN_CATEGORY = "turn"
# The most tokens (cl100k_base) a turn memory holds; a longer message is stored in parts. A
# context block shows a memory whole or not at all, and Earlier episodes gets about 150 tokens
# of the default budget (1,200) in a block with every section: a part fits that share, so a
# long message's parts can be shown beside other episodes, where parts of a memory's 4,000
# characters (over 1,000 tokens of a log) fit no share. The packaged embedder reads 256 word
# pieces of a text: a part of prose or of a log is embedded whole.
TURN_PART_TOKENS = 150


class TurnStorage:
    def __init__(self, runner: PassRunner) -> None:
        self._runner = runner

    async def store_turns(self, tenant_id: str, thread_id: uuid.UUID) -> list[PassOutcome]:
        """Store each new human message of the thread as an episodic `turn` memory."""
        runner = self._runner
        outcomes: list[PassOutcome] = []
        for _ in range(MAX_ROUNDS):
            state = await runner.read(tenant_id, thread_id)
            if state is None or not state.pending:
                return outcomes
            first, last = state.after + 1, state.pending[-1].seq
            turns = [m for m in state.pending if m.role == HUMAN_ROLE]
            # A turn that looks like a secret, or holds nothing visible, is not stored (the
            # same rules as API writes), in none of its parts.
            storable = [
                (message, parts)
                for message in turns
                if (parts := _turn_parts(message.content))
                and all(refusal(part) is None for part in parts)
            ]
            stored = [
                (message, index, parts)
                for message, parts in storable
                for index in range(len(parts))
            ]
            texts = [parts[index] for _, index, parts in stored]
            vectors = await embed_or_none(runner.state.embedding_backfill.embedder, texts)
            async with runner.unit(tenant_id, TURNS_ACTOR, org_writes=False) as unit:
                await unit.memories.lock_derived_writes(Owner.user(state.user_id))
                if await unit.cursor_moved(thread_id, state.after):
                    outcomes.append(PassOutcome("superseded", first, last))
                    continue
                written = await unit.memories.record_derived(
                    [
                        _turn(state.user_id, thread_id, message, index, parts, vector)
                        for (message, index, parts), vector in zip(
                            stored,
                            vectors if vectors is not None else [None] * len(texts),
                            strict=True,
                        )
                    ]
                )
                record = PassRecord(
                    user_id=state.user_id,
                    mode="turns",
                    trigger="turn",
                    from_seq=first,
                    through_seq=last,
                    written=[m.id for m in written if not m.duplicate],
                    reconfirmed=sum(m.duplicate for m in written),
                    dropped={"secret": len(turns) - len(storable)}
                    if len(storable) < len(turns)
                    else {},
                )
                await unit.repository.finish_pass(TURNS_ACTOR, thread_id, record)
            outcomes.append(PassOutcome("written", first, last, record))
            if not state.truncated:
                return outcomes
        return outcomes


def _turn_parts(content: str) -> list[str]:
    """A turn as memories say it: without the whitespace and invisible characters around it,
    in parts of at most `TURN_PART_TOKENS` and the longest memory text (one part for all but
    long messages; none for a message of nothing visible).

    A long message is cut at the last sentence end in the second half of each part's room,
    else at the last space there, else (a text without either, such as one long token) at
    the room's end: a part ends where the text itself pauses, so its words stay whole and
    searchable, and each part is at least half the room."""
    parts: list[str] = []
    text = visible_text(content)
    while (room := _room(text)) is not None:
        cut = _cut(text, room)
        part, text = visible_text(text[:cut]), visible_text(text[cut:])
        if part:
            parts.append(part)
    if text:
        parts.append(text)
    return parts


def _room(text: str) -> int | None:
    """How many characters of `text` its first part may hold: those of its first
    `TURN_PART_TOKENS` tokens, at most a memory's longest text; None when all of it fits."""
    coder = encoding_for(DEFAULT_ENCODING)
    # The first part lies within a memory's longest text: only that much is counted.
    tokens = coder.encode(text[: MEMORY_TEXT_MAX + 1], disallowed_special=())
    if len(tokens) <= TURN_PART_TOKENS and len(text) <= MEMORY_TEXT_MAX:
        return None
    # A token may end inside a character (decoded as U+FFFD): the room ends before it.
    head = coder.decode(tokens[:TURN_PART_TOKENS]).rstrip("\ufffd")
    return max(min(len(head), MEMORY_TEXT_MAX), 1)


# A sentence's end: its mark and any closing quotes or brackets, then a space; an ideographic
# full stop, exclamation or question mark needs no space after it.
_CLOSING = "\"')\\]}\u201d\u2019\u00bb\u300d\u300f"
_SENTENCE_END = re.compile(f"[.!?\u2026][{_CLOSING}]*(?=\\s)|[\u3002\uff01\uff1f][{_CLOSING}]*")


def _cut(text: str, room: int) -> int:
    """Where the first part of `text` ends, which may hold `room` characters of it: see
    `_turn_parts`."""
    window = text[: room + 1]
    ends = [m.end() for m in _SENTENCE_END.finditer(window, room // 2) if m.end() <= room]
    if ends:
        return ends[-1]
    return next((end for end in range(room, room // 2, -1) if window[end].isspace()), room)


def _turn(
    user_id: str,
    thread_id: uuid.UUID,
    message: Message,
    index: int,
    parts: list[str],
    vector: list[float] | None,
) -> DerivedMemory:
    """The memory of part `index` of a message: each part cites the message, and is dated a
    microsecond after the one before, so a thread's turns read in time order read them in
    order (`event_at` is otherwise the message's time)."""
    metadata: dict[str, object] = {"origin": "turn", "seq": message.seq}
    if len(parts) > 1:
        metadata.update(part=index + 1, parts=len(parts))
    return DerivedMemory(
        Owner.user(user_id),
        MemoryCreate(
            kind="episodic",
            text=parts[index],
            category=TURN_CATEGORY,
            event_at=message.created_at + timedelta(microseconds=index),
            source_thread_id=thread_id,
            source_message_ids=[message.id],
            speaker=remembered_name(message.name),
            metadata=metadata,
        ),
        vector,
        "turn",
    )
