from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.summary_read_entries_item import SummaryReadEntriesItem


T = TypeVar("T", bound="SummaryRead")


@_attrs_define
class SummaryRead:
    """
    Attributes:
        id (UUID):
        sequence (int):
        start_index (int): First message position (seq) the pass compressed.
        end_index (int): Position after the last message it compressed.
        message_ids (list[UUID]):
        entries (list[SummaryReadEntriesItem]): {question, answer, refs, message_ids}
        tokens_before (int | None):
        tokens_after (int | None):
        model (None | str):
        created_at (datetime.datetime):
    """

    id: UUID
    sequence: int
    start_index: int
    end_index: int
    message_ids: list[UUID]
    entries: list[SummaryReadEntriesItem]
    tokens_before: int | None
    tokens_after: int | None
    model: None | str
    created_at: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = str(self.id)

        sequence = self.sequence

        start_index = self.start_index

        end_index = self.end_index

        message_ids = []
        for message_ids_item_data in self.message_ids:
            message_ids_item = str(message_ids_item_data)
            message_ids.append(message_ids_item)

        entries = []
        for entries_item_data in self.entries:
            entries_item = entries_item_data.to_dict()
            entries.append(entries_item)

        tokens_before: int | None
        tokens_before = self.tokens_before

        tokens_after: int | None
        tokens_after = self.tokens_after

        model: None | str
        model = self.model

        created_at = self.created_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "sequence": sequence,
                "start_index": start_index,
                "end_index": end_index,
                "message_ids": message_ids,
                "entries": entries,
                "tokens_before": tokens_before,
                "tokens_after": tokens_after,
                "model": model,
                "created_at": created_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.summary_read_entries_item import SummaryReadEntriesItem  # noqa: PLC0415

        d = dict(src_dict)
        id = UUID(d.pop("id"))

        sequence = d.pop("sequence")

        start_index = d.pop("start_index")

        end_index = d.pop("end_index")

        message_ids = []
        _message_ids = d.pop("message_ids")
        for message_ids_item_data in _message_ids:
            message_ids_item = UUID(message_ids_item_data)

            message_ids.append(message_ids_item)

        entries = []
        _entries = d.pop("entries")
        for entries_item_data in _entries:
            entries_item = SummaryReadEntriesItem.from_dict(entries_item_data)

            entries.append(entries_item)

        def _parse_tokens_before(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        tokens_before = _parse_tokens_before(d.pop("tokens_before"))

        def _parse_tokens_after(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        tokens_after = _parse_tokens_after(d.pop("tokens_after"))

        def _parse_model(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        model = _parse_model(d.pop("model"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        summary_read = cls(
            id=id,
            sequence=sequence,
            start_index=start_index,
            end_index=end_index,
            message_ids=message_ids,
            entries=entries,
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            model=model,
            created_at=created_at,
        )

        summary_read.additional_properties = d
        return summary_read

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
