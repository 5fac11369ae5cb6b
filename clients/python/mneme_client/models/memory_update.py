from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.lifecycle import Lifecycle
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.metadata import Metadata


T = TypeVar("T", bound="MemoryUpdate")


@_attrs_define
class MemoryUpdate:
    """Fields to change; absent fields stay as they are. `null` clears a field that may be
    empty (category, event time, speaker, metadata, expiry); a memory always has a text,
    confidence, lifecycle and review flag, so `null` for one of them is refused as any other
    invalid value is (leave the field out to keep it).

        Attributes:
            text (str | Unset):
            category (None | str | Unset):
            confidence (float | Unset):
            lifecycle (Lifecycle | Unset):
            needs_review (bool | Unset):
            event_at (datetime.datetime | None | Unset):
            speaker (None | str | Unset): Who said it; `null` removes a speaker that was wrong.
            metadata (Metadata | None | Unset):
            expires_at (datetime.datetime | None | Unset):
    """

    text: str | Unset = UNSET
    category: None | str | Unset = UNSET
    confidence: float | Unset = UNSET
    lifecycle: Lifecycle | Unset = UNSET
    needs_review: bool | Unset = UNSET
    event_at: datetime.datetime | None | Unset = UNSET
    speaker: None | str | Unset = UNSET
    metadata: Metadata | None | Unset = UNSET
    expires_at: datetime.datetime | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.metadata import Metadata  # noqa: PLC0415

        text = self.text

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

        speaker: None | str | Unset
        if isinstance(self.speaker, Unset):
            speaker = UNSET
        else:
            speaker = self.speaker

        metadata: dict[str, Any] | None | Unset
        if isinstance(self.metadata, Unset):
            metadata = UNSET
        elif isinstance(self.metadata, Metadata):
            metadata = self.metadata.to_dict()
        else:
            metadata = self.metadata

        expires_at: None | str | Unset
        if isinstance(self.expires_at, Unset):
            expires_at = UNSET
        elif isinstance(self.expires_at, datetime.datetime):
            expires_at = self.expires_at.isoformat()
        else:
            expires_at = self.expires_at

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if text is not UNSET:
            field_dict["text"] = text
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
        text = d.pop("text", UNSET)

        def _parse_category(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        category = _parse_category(d.pop("category", UNSET))

        confidence = d.pop("confidence", UNSET)

        _lifecycle = d.pop("lifecycle", UNSET)
        lifecycle: Lifecycle | Unset
        if isinstance(_lifecycle, Unset):
            lifecycle = UNSET
        else:
            lifecycle = Lifecycle(_lifecycle)

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

        def _parse_speaker(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        speaker = _parse_speaker(d.pop("speaker", UNSET))

        def _parse_metadata(data: object) -> Metadata | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                metadata_type_0 = Metadata.from_dict(data)

                return metadata_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Metadata | None | Unset, data)

        metadata = _parse_metadata(d.pop("metadata", UNSET))

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

        memory_update = cls(
            text=text,
            category=category,
            confidence=confidence,
            lifecycle=lifecycle,
            needs_review=needs_review,
            event_at=event_at,
            speaker=speaker,
            metadata=metadata,
            expires_at=expires_at,
        )

        return memory_update
