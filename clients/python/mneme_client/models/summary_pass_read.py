from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="SummaryPassRead")


@_attrs_define
class SummaryPassRead:
    """One summary pass that wrote a summary of a window of a thread's messages.

    Attributes:
        thread_id (UUID):
        start_index (int): The first message (`seq`) the summary covers.
        end_index (int): The message after the last one it covers.
        model (None | str):
        finished_at (datetime.datetime):
    """

    thread_id: UUID
    start_index: int
    end_index: int
    model: None | str
    finished_at: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        thread_id = str(self.thread_id)

        start_index = self.start_index

        end_index = self.end_index

        model: None | str
        model = self.model

        finished_at = self.finished_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "thread_id": thread_id,
                "start_index": start_index,
                "end_index": end_index,
                "model": model,
                "finished_at": finished_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        thread_id = UUID(d.pop("thread_id"))

        start_index = d.pop("start_index")

        end_index = d.pop("end_index")

        def _parse_model(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        model = _parse_model(d.pop("model"))

        finished_at = datetime.datetime.fromisoformat(d.pop("finished_at"))

        summary_pass_read = cls(
            thread_id=thread_id,
            start_index=start_index,
            end_index=end_index,
            model=model,
            finished_at=finished_at,
        )

        summary_pass_read.additional_properties = d
        return summary_pass_read

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
