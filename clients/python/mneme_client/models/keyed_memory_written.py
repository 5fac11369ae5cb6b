from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.lifecycle import Lifecycle
from ..models.memory_kind import MemoryKind
from ..models.memory_scope import MemoryScope
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.metadata import Metadata


T = TypeVar("T", bound="KeyedMemoryWritten")


@_attrs_define
class KeyedMemoryWritten:
    """
    Attributes:
        id (UUID):
        scope (MemoryScope):
        user_id (None | str):
        kind (MemoryKind):
        category (None | str):
        text (str):
        confidence (float):
        lifecycle (Lifecycle):
        needs_review (bool):
        superseded_by (None | UUID):
        source_thread_id (None | UUID):
        source_message_ids (list[UUID]):
        evidence (None | str):
        event_at (datetime.datetime | None):
        created_at (datetime.datetime):
        updated_at (datetime.datetime):
        last_confirmed_at (datetime.datetime | None): When the write path last heard this memory stated again (or first
            wrote it confirmed); null if never.
        invalid_at (datetime.datetime | None):
        expires_at (datetime.datetime | None):
        embedding_model (None | str): The model of the memory's vector that its owner's searches compare (of the vector
            column its tenant reads; during a change of embedding model, the old model's until the tenant switches to the
            new one): what its search hits name. Null while it has no vector there (it awaits embedding): searches find it
            by its words alone.
        metadata (Metadata): Free-form JSON object stored with the record and returned as given.
        created (bool): True when the key held no memory and one was added.
        speaker (None | str | Unset): Who said it (a conversation participant's name), if known.
        store_key (None | str | Unset): The client's key, for memories written by key; else null.
    """

    id: UUID
    scope: MemoryScope
    user_id: None | str
    kind: MemoryKind
    category: None | str
    text: str
    confidence: float
    lifecycle: Lifecycle
    needs_review: bool
    superseded_by: None | UUID
    source_thread_id: None | UUID
    source_message_ids: list[UUID]
    evidence: None | str
    event_at: datetime.datetime | None
    created_at: datetime.datetime
    updated_at: datetime.datetime
    last_confirmed_at: datetime.datetime | None
    invalid_at: datetime.datetime | None
    expires_at: datetime.datetime | None
    embedding_model: None | str
    metadata: Metadata
    created: bool
    speaker: None | str | Unset = UNSET
    store_key: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = str(self.id)

        scope = self.scope.value

        user_id: None | str
        user_id = self.user_id

        kind = self.kind.value

        category: None | str
        category = self.category

        text = self.text

        confidence = self.confidence

        lifecycle = self.lifecycle.value

        needs_review = self.needs_review

        superseded_by: None | str
        if isinstance(self.superseded_by, UUID):
            superseded_by = str(self.superseded_by)
        else:
            superseded_by = self.superseded_by

        source_thread_id: None | str
        if isinstance(self.source_thread_id, UUID):
            source_thread_id = str(self.source_thread_id)
        else:
            source_thread_id = self.source_thread_id

        source_message_ids = []
        for source_message_ids_item_data in self.source_message_ids:
            source_message_ids_item = str(source_message_ids_item_data)
            source_message_ids.append(source_message_ids_item)

        evidence: None | str
        evidence = self.evidence

        event_at: None | str
        if isinstance(self.event_at, datetime.datetime):
            event_at = self.event_at.isoformat()
        else:
            event_at = self.event_at

        created_at = self.created_at.isoformat()

        updated_at = self.updated_at.isoformat()

        last_confirmed_at: None | str
        if isinstance(self.last_confirmed_at, datetime.datetime):
            last_confirmed_at = self.last_confirmed_at.isoformat()
        else:
            last_confirmed_at = self.last_confirmed_at

        invalid_at: None | str
        if isinstance(self.invalid_at, datetime.datetime):
            invalid_at = self.invalid_at.isoformat()
        else:
            invalid_at = self.invalid_at

        expires_at: None | str
        if isinstance(self.expires_at, datetime.datetime):
            expires_at = self.expires_at.isoformat()
        else:
            expires_at = self.expires_at

        embedding_model: None | str
        embedding_model = self.embedding_model

        metadata = self.metadata.to_dict()

        created = self.created

        speaker: None | str | Unset
        if isinstance(self.speaker, Unset):
            speaker = UNSET
        else:
            speaker = self.speaker

        store_key: None | str | Unset
        if isinstance(self.store_key, Unset):
            store_key = UNSET
        else:
            store_key = self.store_key

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "scope": scope,
                "user_id": user_id,
                "kind": kind,
                "category": category,
                "text": text,
                "confidence": confidence,
                "lifecycle": lifecycle,
                "needs_review": needs_review,
                "superseded_by": superseded_by,
                "source_thread_id": source_thread_id,
                "source_message_ids": source_message_ids,
                "evidence": evidence,
                "event_at": event_at,
                "created_at": created_at,
                "updated_at": updated_at,
                "last_confirmed_at": last_confirmed_at,
                "invalid_at": invalid_at,
                "expires_at": expires_at,
                "embedding_model": embedding_model,
                "metadata": metadata,
                "created": created,
            }
        )
        if speaker is not UNSET:
            field_dict["speaker"] = speaker
        if store_key is not UNSET:
            field_dict["store_key"] = store_key

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.metadata import Metadata  # noqa: PLC0415

        d = dict(src_dict)
        id = UUID(d.pop("id"))

        scope = MemoryScope(d.pop("scope"))

        def _parse_user_id(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        user_id = _parse_user_id(d.pop("user_id"))

        kind = MemoryKind(d.pop("kind"))

        def _parse_category(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        category = _parse_category(d.pop("category"))

        text = d.pop("text")

        confidence = d.pop("confidence")

        lifecycle = Lifecycle(d.pop("lifecycle"))

        needs_review = d.pop("needs_review")

        def _parse_superseded_by(data: object) -> None | UUID:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                superseded_by_type_0 = UUID(data)

                return superseded_by_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | UUID, data)

        superseded_by = _parse_superseded_by(d.pop("superseded_by"))

        def _parse_source_thread_id(data: object) -> None | UUID:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                source_thread_id_type_0 = UUID(data)

                return source_thread_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | UUID, data)

        source_thread_id = _parse_source_thread_id(d.pop("source_thread_id"))

        source_message_ids = []
        _source_message_ids = d.pop("source_message_ids")
        for source_message_ids_item_data in _source_message_ids:
            source_message_ids_item = UUID(source_message_ids_item_data)

            source_message_ids.append(source_message_ids_item)

        def _parse_evidence(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        evidence = _parse_evidence(d.pop("evidence"))

        def _parse_event_at(data: object) -> datetime.datetime | None:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                event_at_type_0 = datetime.datetime.fromisoformat(data)

                return event_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None, data)

        event_at = _parse_event_at(d.pop("event_at"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        def _parse_last_confirmed_at(data: object) -> datetime.datetime | None:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                last_confirmed_at_type_0 = datetime.datetime.fromisoformat(data)

                return last_confirmed_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None, data)

        last_confirmed_at = _parse_last_confirmed_at(d.pop("last_confirmed_at"))

        def _parse_invalid_at(data: object) -> datetime.datetime | None:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                invalid_at_type_0 = datetime.datetime.fromisoformat(data)

                return invalid_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None, data)

        invalid_at = _parse_invalid_at(d.pop("invalid_at"))

        def _parse_expires_at(data: object) -> datetime.datetime | None:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                expires_at_type_0 = datetime.datetime.fromisoformat(data)

                return expires_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None, data)

        expires_at = _parse_expires_at(d.pop("expires_at"))

        def _parse_embedding_model(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        embedding_model = _parse_embedding_model(d.pop("embedding_model"))

        metadata = Metadata.from_dict(d.pop("metadata"))

        created = d.pop("created")

        def _parse_speaker(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        speaker = _parse_speaker(d.pop("speaker", UNSET))

        def _parse_store_key(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        store_key = _parse_store_key(d.pop("store_key", UNSET))

        keyed_memory_written = cls(
            id=id,
            scope=scope,
            user_id=user_id,
            kind=kind,
            category=category,
            text=text,
            confidence=confidence,
            lifecycle=lifecycle,
            needs_review=needs_review,
            superseded_by=superseded_by,
            source_thread_id=source_thread_id,
            source_message_ids=source_message_ids,
            evidence=evidence,
            event_at=event_at,
            created_at=created_at,
            updated_at=updated_at,
            last_confirmed_at=last_confirmed_at,
            invalid_at=invalid_at,
            expires_at=expires_at,
            embedding_model=embedding_model,
            metadata=metadata,
            created=created,
            speaker=speaker,
            store_key=store_key,
        )

        keyed_memory_written.additional_properties = d
        return keyed_memory_written

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
