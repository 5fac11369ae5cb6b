from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="ProcedureSlotRead")


@_attrs_define
class ProcedureSlotRead:
    """
    Attributes:
        text (str):
        memory_id (UUID):
        updated_at (datetime.datetime):
    """

    text: str
    memory_id: UUID
    updated_at: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        text = self.text

        memory_id = str(self.memory_id)

        updated_at = self.updated_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "text": text,
                "memory_id": memory_id,
                "updated_at": updated_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        text = d.pop("text")

        memory_id = UUID(d.pop("memory_id"))

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        procedure_slot_read = cls(
            text=text,
            memory_id=memory_id,
            updated_at=updated_at,
        )

        procedure_slot_read.additional_properties = d
        return procedure_slot_read

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
