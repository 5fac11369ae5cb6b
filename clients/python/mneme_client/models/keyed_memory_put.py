from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.metadata import Metadata


T = TypeVar("T", bound="KeyedMemoryPut")


@_attrs_define
class KeyedMemoryPut:
    """The memory a key holds; `PUT` replaces every field of the memory already there (an
    absent one takes its default: no event time, no expiry).

        Attributes:
            text (str):
            metadata (Metadata | Unset): Free-form JSON object stored with the record and returned as given.
            confidence (float | Unset):  Default: 1.0.
            event_at (datetime.datetime | None | Unset):
            expires_at (datetime.datetime | None | Unset):
    """

    text: str
    metadata: Metadata | Unset = UNSET
    confidence: float | Unset = 1.0
    event_at: datetime.datetime | None | Unset = UNSET
    expires_at: datetime.datetime | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        text = self.text

        metadata: dict[str, Any] | Unset = UNSET
        if not isinstance(self.metadata, Unset):
            metadata = self.metadata.to_dict()

        confidence = self.confidence

        event_at: None | str | Unset
        if isinstance(self.event_at, Unset):
            event_at = UNSET
        elif isinstance(self.event_at, datetime.datetime):
            event_at = self.event_at.isoformat()
        else:
            event_at = self.event_at

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
        if metadata is not UNSET:
            field_dict["metadata"] = metadata
        if confidence is not UNSET:
            field_dict["confidence"] = confidence
        if event_at is not UNSET:
            field_dict["event_at"] = event_at
        if expires_at is not UNSET:
            field_dict["expires_at"] = expires_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.metadata import Metadata  # noqa: PLC0415

        d = dict(src_dict)
        text = d.pop("text")

        _metadata = d.pop("metadata", UNSET)
        metadata: Metadata | Unset
        if isinstance(_metadata, Unset):
            metadata = UNSET
        else:
            metadata = Metadata.from_dict(_metadata)

        confidence = d.pop("confidence", UNSET)

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

        keyed_memory_put = cls(
            text=text,
            metadata=metadata,
            confidence=confidence,
            event_at=event_at,
            expires_at=expires_at,
        )

        return keyed_memory_put
