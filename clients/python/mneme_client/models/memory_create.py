from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define

from ..models.memory_kind import MemoryKind
from ..models.memory_scope import MemoryScope
from ..models.new_lifecycle import NewLifecycle
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.metadata import Metadata


T = TypeVar("T", bound="MemoryCreate")


@_attrs_define
class MemoryCreate:
    """One memory to remember. Identity and tenant come from the token, never from here.

    Attributes:
        text (str):
        kind (MemoryKind | Unset):
        scope (MemoryScope | Unset):
        category (None | str | Unset):
        confidence (float | Unset):  Default: 1.0.
        lifecycle (NewLifecycle | Unset):
        needs_review (bool | Unset):  Default: False.
        event_at (datetime.datetime | None | Unset): When it happened or became true (record time is automatic).
        source_thread_id (None | Unset | UUID):
        source_message_ids (list[UUID] | Unset):
        evidence (None | str | Unset):
        speaker (None | str | Unset): Who said it, for a memory of something said in a conversation (the participant's
            name): a search whose query names this speaker ranks their memories higher.
        metadata (Metadata | Unset): Free-form JSON object stored with the record and returned as given.
        expires_at (datetime.datetime | None | Unset):
    """

    text: str
    kind: MemoryKind | Unset = UNSET
    scope: MemoryScope | Unset = UNSET
    category: None | str | Unset = UNSET
    confidence: float | Unset = 1.0
    lifecycle: NewLifecycle | Unset = UNSET
    needs_review: bool | Unset = False
    event_at: datetime.datetime | None | Unset = UNSET
    source_thread_id: None | Unset | UUID = UNSET
    source_message_ids: list[UUID] | Unset = UNSET
    evidence: None | str | Unset = UNSET
    speaker: None | str | Unset = UNSET
    metadata: Metadata | Unset = UNSET
    expires_at: datetime.datetime | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        text = self.text

        kind: str | Unset = UNSET
        if not isinstance(self.kind, Unset):
            kind = self.kind.value

        scope: str | Unset = UNSET
        if not isinstance(self.scope, Unset):
            scope = self.scope.value

        category: None | str | Unset
        if isinstance(self.category, Unset):
            category = UNSET
        else:
            category = self.category

        confidence = self.confidence

        lifecycle: str | Unset = UNSET
        if not isinstance(self.lifecycle, Unset):
            lifecycle = self.lifecycle.value

        needs_review = self.needs_review

        event_at: None | str | Unset
        if isinstance(self.event_at, Unset):
            event_at = UNSET
        elif isinstance(self.event_at, datetime.datetime):
            event_at = self.event_at.isoformat()
        else:
            event_at = self.event_at

        source_thread_id: None | str | Unset
        if isinstance(self.source_thread_id, Unset):
            source_thread_id = UNSET
        elif isinstance(self.source_thread_id, UUID):
            source_thread_id = str(self.source_thread_id)
        else:
            source_thread_id = self.source_thread_id

        source_message_ids: list[str] | Unset = UNSET
        if not isinstance(self.source_message_ids, Unset):
            source_message_ids = []
            for source_message_ids_item_data in self.source_message_ids:
                source_message_ids_item = str(source_message_ids_item_data)
                source_message_ids.append(source_message_ids_item)

        evidence: None | str | Unset
        if isinstance(self.evidence, Unset):
            evidence = UNSET
        else:
            evidence = self.evidence

        speaker: None | str | Unset
        if isinstance(self.speaker, Unset):
            speaker = UNSET
        else:
            speaker = self.speaker

        metadata: dict[str, Any] | Unset = UNSET
        if not isinstance(self.metadata, Unset):
            metadata = self.metadata.to_dict()

        expires_at: None | str | Unset
        if isinstance(self.expires_at, Unset):
            expires_at = UNSET
        elif isinstance(self.expires_at, datetime.datetime):
            expires_at = self.expires_at.isoformat()
        else:
            expires_at = self.expires_at

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "text": text,
            }
        )
        if kind is not UNSET:
            field_dict["kind"] = kind
        if scope is not UNSET:
            field_dict["scope"] = scope
        if category is not UNSET:
            field_dict["category"] = category
        if confidence is not UNSET:
            field_dict["confidence"] = confidence
        if lifecycle is not UNSET:
            field_dict["lifecycle"] = lifecycle
        if needs_review is not UNSET:
            field_dict["needs_review"] = needs_review
        if event_at is not UNSET:
            field_dict["event_at"] = event_at
        if source_thread_id is not UNSET:
            field_dict["source_thread_id"] = source_thread_id
        if source_message_ids is not UNSET:
            field_dict["source_message_ids"] = source_message_ids
        if evidence is not UNSET:
            field_dict["evidence"] = evidence
        if speaker is not UNSET:
            field_dict["speaker"] = speaker
        if metadata is not UNSET:
            field_dict["metadata"] = metadata
        if expires_at is not UNSET:
            field_dict["expires_at"] = expires_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.metadata import Metadata  # noqa: PLC0415

        d = dict(src_dict)
        text = d.pop("text")

        _kind = d.pop("kind", UNSET)
        kind: MemoryKind | Unset
        if isinstance(_kind, Unset):
            kind = UNSET
        else:
            kind = MemoryKind(_kind)

        _scope = d.pop("scope", UNSET)
        scope: MemoryScope | Unset
        if isinstance(_scope, Unset):
            scope = UNSET
        else:
            scope = MemoryScope(_scope)

        def _parse_category(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        category = _parse_category(d.pop("category", UNSET))

        confidence = d.pop("confidence", UNSET)

        _lifecycle = d.pop("lifecycle", UNSET)
        lifecycle: NewLifecycle | Unset
        if isinstance(_lifecycle, Unset):
            lifecycle = UNSET
        else:
            lifecycle = NewLifecycle(_lifecycle)

        needs_review = d.pop("needs_review", UNSET)

        def _parse_event_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                event_at_type_0 = datetime.datetime.fromisoformat(data)

                return event_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        event_at = _parse_event_at(d.pop("event_at", UNSET))

        def _parse_source_thread_id(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                source_thread_id_type_0 = UUID(data)

                return source_thread_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        source_thread_id = _parse_source_thread_id(d.pop("source_thread_id", UNSET))

        _source_message_ids = d.pop("source_message_ids", UNSET)
        source_message_ids: list[UUID] | Unset = UNSET
        if _source_message_ids is not UNSET:
            source_message_ids = []
            for source_message_ids_item_data in _source_message_ids:
                source_message_ids_item = UUID(source_message_ids_item_data)

                source_message_ids.append(source_message_ids_item)

        def _parse_evidence(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        evidence = _parse_evidence(d.pop("evidence", UNSET))

        def _parse_speaker(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        speaker = _parse_speaker(d.pop("speaker", UNSET))

        _metadata = d.pop("metadata", UNSET)
        metadata: Metadata | Unset
        if isinstance(_metadata, Unset):
            metadata = UNSET
        else:
            metadata = Metadata.from_dict(_metadata)

        def _parse_expires_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                expires_at_type_0 = datetime.datetime.fromisoformat(data)

                return expires_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        expires_at = _parse_expires_at(d.pop("expires_at", UNSET))

        memory_create = cls(
            text=text,
            kind=kind,
            scope=scope,
            category=category,
            confidence=confidence,
            lifecycle=lifecycle,
            needs_review=needs_review,
            event_at=event_at,
            source_thread_id=source_thread_id,
            source_message_ids=source_message_ids,
            evidence=evidence,
            speaker=speaker,
            metadata=metadata,
            expires_at=expires_at,
        )

        return memory_create
