"""Turn storage, the write path without an LLM: each new human message of a thread becomes an
episodic memory of category `turn`, so search and context work with no API key."""

from __future__ import annotations

import uuid

from service.auth.owner import Owner
from service.extraction.passes import MAX_ROUNDS, TURNS_ACTOR, PassRunner
from service.extraction.record import PassOutcome, PassRecord
from service.extraction.resolver import refusal, remembered_name
from service.extraction.triggers import HUMAN_ROLE
from service.kit.types import visible_text
from service.memories.embedding import embed_or_none
from service.memories.schemas import MEMORY_TEXT_MAX, MemoryCreate
from service.memories.writer import DerivedMemory
from service.threads.models import Message

TURN_CATEGORY = "turn"


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
            # same rules as API writes).
            storable = [m for m in turns if refusal(_turn_text(m.content)) is None]
            texts = [_turn_text(m.content) for m in storable]
            vectors = await embed_or_none(runner.state.embedding_backfill.embedder, texts)
            async with runner.unit(tenant_id, TURNS_ACTOR, org_writes=False) as unit:
                await unit.memories.lock_derived_writes(Owner.user(state.user_id))
                if await unit.cursor_moved(thread_id, state.after):
                    outcomes.append(PassOutcome("superseded", first, last))
                    continue
                written = await unit.memories.record_derived(
                    [
                        _turn(state.user_id, thread_id, message, text, vector)
                        for message, text, vector in zip(
                            storable,
                            texts,
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


def _turn_text(content: str) -> str:
    """A turn as a memory says it: without the whitespace and invisible characters around it,
    cut to the longest memory text."""
    return visible_text(content)[:MEMORY_TEXT_MAX]


def _turn(
    user_id: str,
    thread_id: uuid.UUID,
    message: Message,
    text: str,
    vector: list[float] | None,
) -> DerivedMemory:
    return DerivedMemory(
        Owner.user(user_id),
        MemoryCreate(
            kind="episodic",
            text=text,
            category=TURN_CATEGORY,
            event_at=message.created_at,
            source_thread_id=thread_id,
            source_message_ids=[message.id],
            speaker=remembered_name(message.name),
            metadata={"origin": "turn", "seq": message.seq},
        ),
        vector,
        "turn",
    )
