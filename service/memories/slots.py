"""Procedural slots: each owner's standing instructions, one per slot (the procedural memory's
category: `style`, `workflow`, `safety`, `task_policies`).

A slot holds one live memory of its owner. Every write that makes a procedural memory live in a
slot — the procedures PUT, a keyed put, a POST or batch, a PATCH that restores one or moves it
into the slot — supersedes the slot's other live memories with it, each with a `supersede`
event naming the slot, under the owner's slot lock. So what the slot says is never a choice
between two instructions, and the memory it replaced is kept, not lost.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar
from uuid import UUID

from service.auth.owner import Owner
from service.memories.models import Memory
from service.memories.recording import MemoryRecorder, invalid_from

PROCEDURE_SLOTS = ("style", "workflow", "safety", "task_policies")


def slot_of(kind: str, category: str | None) -> str | None:
    """The slot a live memory of this kind and category fills, or None."""
    return category if kind == "procedural" and category in PROCEDURE_SLOTS else None


def slot_filled_by(memory: Memory) -> str | None:
    """The slot `memory` fills as it is now (None while superseded)."""
    return None if memory.lifecycle == "superseded" else slot_of(memory.kind, memory.category)


class SlotEntry(Protocol):
    """What the slots' readers know of a live procedural memory (a `Memory`, a
    `ProcedureRow`)."""

    @property
    def id(self) -> UUID: ...
    @property
    def category(self) -> str | None: ...
    @property
    def updated_at(self) -> datetime: ...


EntryT = TypeVar("EntryT", bound=SlotEntry)


def shown_in_slots(entries: Iterable[EntryT]) -> dict[str, EntryT]:
    """The memory each slot shows, of one owner's live procedural memories: the one changed
    last (then the greatest id). Writes keep a slot to one, but a slot restored with two
    (an import keeps what its export holds) keeps both until its next procedures PUT, and
    every reader (the procedures, the context block, the procedures PUT's `If-Match`) shows
    the same one of them meanwhile."""
    shown: dict[str, EntryT] = {}
    for entry in entries:
        slot = entry.category
        if slot not in PROCEDURE_SLOTS:
            continue
        held = shown.get(slot)
        if held is None or (entry.updated_at, entry.id) > (held.updated_at, held.id):
            shown[slot] = entry
    return shown


class SlotHolders:
    """Who holds the owner's slots, kept to one live memory each."""

    def __init__(self, recorder: MemoryRecorder) -> None:
        self._recorder = recorder
        self._repository = recorder.repository

    async def hold(self, owner: Owner) -> None:
        """Provision the owner's rows, then hold the lock of its slots until the transaction
        ends: every write that may fill a slot takes it in this order, before it locks any
        memory (a write to a slot locks the memories it supersedes), so two such writes never
        wait for each other."""
        await self._recorder.provision([owner])
        await self._repository.lock_procedures(owner)

    async def live(self, owner: Owner) -> list[Memory]:
        """The owner's live procedural memories that fill a slot, locked until the transaction
        ends (a slot's memory may also be changed by id, a PATCH) and as they are now."""
        return await self._repository.live_procedures(owner, slots=PROCEDURE_SLOTS, for_update=True)

    async def take(self, owner: Owner, holder: Memory) -> list[Memory]:
        """`holder` became live in its slot (new, restored, or moved there): the slot's other
        live memories are superseded by it; returns them as written. The caller holds the
        slot lock (`hold`)."""
        slot = slot_filled_by(holder)
        if slot is None:
            return []
        others = [
            memory
            for memory in await self._repository.live_procedures(
                owner, slots=[slot], for_update=True
            )
            if memory.id != holder.id
        ]
        return await self.supersede(others, slot, by=holder, new_text=holder.text)

    async def retire(self, memories: list[Memory]) -> None:
        """Mark these live memories superseded, true no longer from now (never before they
        began, `invalid_from`): before a memory of the same words takes their place (one live
        memory says each text)."""
        now = datetime.now(UTC)
        for memory in memories:
            await self._repository.update(
                memory, {"lifecycle": "superseded", "invalid_at": invalid_from(memory, now)}
            )

    async def supersede(
        self, memories: list[Memory], slot: str, *, by: Memory | None, new_text: str | None
    ) -> list[Memory]:
        """Supersede these memories of `slot` (`retire`d already, or live) by `by` (None: the
        slot was cleared), each with a `supersede` event naming the slot and `by`; returns
        them as written."""
        if not memories:
            return []
        now = datetime.now(UTC)
        written: list[Memory] = []
        for memory in memories:
            if memory.lifecycle != "superseded":
                values: dict[str, Any] = {
                    "lifecycle": "superseded",
                    "invalid_at": invalid_from(memory, now),
                }
                if by is not None:
                    values["superseded_by"] = by.id
                memory = await self._repository.update(memory, values)
            elif by is not None:
                # The rest of the change `retire` made and timed.
                memory = await self._repository.update_by_id(memory.id, {"superseded_by": by.id})
            written.append(memory)
        await self._repository.add_events(
            [
                self._recorder.event(
                    memory,
                    "supersede",
                    old_text=memory.text,
                    new_text=new_text,
                    changes={"slot": slot, "superseded_by": None if by is None else str(by.id)},
                )
                for memory in written
            ]
        )
        return written
