"""Memories addressed by a client's own key: `put` by key adds once, then updates in place.

Key-value clients (the LangGraph store adapter) name their items; a memory's owner, kind and
category plus that key find it again. Writes to one key are serialised, so concurrent puts of a
new key add one memory, never two. Updates go through `MemoryService.update` (re-embedding,
history), so a keyed memory is an ordinary memory to search, context and the REST routes.
"""

from __future__ import annotations

from service.auth.owner import Owner
from service.kit.resource_headers import require_none_match
from service.kit.secrets import refuse_secrets
from service.memories.embedding import TextVectors, vectors_for
from service.memories.errors import MemoryNotFound
from service.memories.models import Memory
from service.memories.recording import MemoryRecorder, OwnedCreate
from service.memories.schemas import (
    KeyedMemoryPut,
    KeyedMemoryWritten,
    MemoryCreate,
    MemoryRead,
    MemoryUpdate,
)
from service.memories.service import (
    MemoryService,
    changed_text,
    memory_etag,
    require_memory_match,
    require_memory_none_match,
)
from service.memories.slots import SlotHolders, slot_of
from service.memories.store_key import StoreKey


class KeyedMemoryService:
    def __init__(self, recorder: MemoryRecorder, memories: MemoryService) -> None:
        self._recorder = recorder
        self._repository = recorder.repository
        self._memories = memories
        self._slots = SlotHolders(recorder)

    async def get(self, owner: Owner, address: StoreKey) -> MemoryRead:
        return MemoryRead.model_validate(await self._load(owner, address))

    async def put(
        self,
        owner: Owner,
        address: StoreKey,
        body: KeyedMemoryPut,
        *,
        if_match: str | None = None,
        if_none_match: str | None = None,
        ahead: TextVectors | None = None,
    ) -> KeyedMemoryWritten:
        """Add or replace the key's memory, serialised per key. `if_match` writes only over
        that state (`*`: only if the key holds a memory); `if_none_match="*"` only adds.
        `ahead` holds the text's vector made before the transaction (`put_texts`). A put
        that makes a procedural memory live in a slot (a new key, or one superseded
        meanwhile) supersedes the slot's memory (`SlotHolders.take`)."""
        self._recorder.authorize(owner)
        await self._recorder.hold_writes(owner)
        if slot_of(address.kind, address.category) is not None:
            # Before the key's row lock, as every write to a slot takes them.
            await self._slots.hold(owner)
        await self._repository.lock_store_key(owner, address.kind, address.category, address.key)
        seen = await self._repository.find_by_store_key(
            owner, address.kind, address.category, address.key
        )
        if seen is not None and seen.lifecycle == "superseded":
            # A put that brings the key's memory back confirms it, which takes the derived
            # writers' lock (`MemoryService.update`): before the memory's row lock, in the order
            # a confirming PATCH takes them, or the two, each holding what the other waits for,
            # deadlock. (A memory superseded between this read and the row lock still does;
            # PostgreSQL then ends one of them, a 503 the client retries.)
            await self._repository.lock_writers(owner)
        existing = await self._repository.find_by_store_key(
            owner, address.kind, address.category, address.key, for_update=True
        )
        require_memory_match(
            if_match,
            existing,
            absent=f"The key {address.key!r} holds no memory, and If-Match (`*` too) writes "
            "only over one it holds; nothing changed. Without If-Match, the put adds it.",
        )
        require_none_match(
            if_none_match,
            None if existing is None else memory_etag(existing),
            detail=f"The key {address.key!r} already holds a memory in that state.",
        )
        if existing is None:
            # An expired memory is gone for every reader, but its row still holds the key.
            await self._recorder.forget_expired_key_holder(owner, address)
            created = await self._create(owner, address, body, ahead)
            return KeyedMemoryWritten.model_validate({**_fields(created), "created": True})
        # A put replaces every field it carries; one that changes nothing writes nothing.
        change = MemoryUpdate(
            text=body.text,
            metadata=body.metadata,
            confidence=body.confidence,
            event_at=body.event_at,
            expires_at=body.expires_at,
        )
        if existing.lifecycle == "superseded":
            # The key now holds what the put says: a memory superseded meanwhile (a procedure
            # slot written over it, say) is live again.
            change.lifecycle = "confirmed"
        updated = await self._memories.update(owner, existing.id, change, ahead=ahead)
        return KeyedMemoryWritten(**updated.model_dump(), created=False)

    async def delete(
        self,
        owner: Owner,
        address: StoreKey,
        *,
        if_match: str | None = None,
        if_none_match: str | None = None,
    ) -> None:
        self._recorder.authorize(owner)
        await self._recorder.hold_writes(owner)
        memory = await self._load(owner, address, for_update=True)
        require_memory_match(if_match, memory)
        require_memory_none_match(if_none_match, memory)
        await self._recorder.forget([memory])

    async def _load(self, owner: Owner, address: StoreKey, *, for_update: bool = False) -> Memory:
        memory = await self._repository.find_by_store_key(
            owner, address.kind, address.category, address.key, for_update=for_update
        )
        if memory is None:
            raise MemoryNotFound(f"No memory under key {address.key!r} here.")
        return memory

    async def _create(
        self, owner: Owner, address: StoreKey, body: KeyedMemoryPut, ahead: TextVectors | None
    ) -> Memory:
        # The key is stored (and exported) with the memory: the same policy as its text.
        refuse_secrets(address.key, ("query", "key"))
        item = MemoryCreate(
            kind=address.kind,
            category=address.category,
            text=body.text,
            metadata=body.metadata,
            confidence=body.confidence,
            event_at=body.event_at,
            expires_at=body.expires_at,
        )
        entry = OwnedCreate(owner, item)
        self._recorder.validate_new([entry])
        await self._recorder.provision([owner])
        vectors = await vectors_for(self._recorder.embedder, [item.text], ahead)
        vector = vectors[0] if vectors is not None else None
        memory = await self._repository.insert_keyed(
            {**self._recorder.insert_values(entry, vector), "store_key": address.key}
        )
        await self._repository.add_events(
            [self._recorder.event(memory, "add", old_text=None, new_text=memory.text)]
        )
        await self._slots.take(owner, memory)
        self._recorder.schedule_backfill([memory])
        self._recorder.count_added([memory])
        return memory


def put_texts(body: KeyedMemoryPut) -> list[str]:
    """The texts `KeyedMemoryService.put` may embed for `body`: a new memory's text, or the
    text that replaces the key's memory (`changed_text`)."""
    return list(dict.fromkeys([body.text, changed_text(body.text)]))


def _fields(memory: Memory) -> dict[str, object]:
    return MemoryRead.model_validate(memory).model_dump()
