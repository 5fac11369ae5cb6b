from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.memory_event_read_action import MemoryEventReadAction

if TYPE_CHECKING:
    from ..models.memory_event_read_changes import MemoryEventReadChanges


T = TypeVar("T", bound="MemoryEventRead")


@_attrs_define
class MemoryEventRead:
    """
    Attributes:
        id (UUID):
        memory_id (UUID):
        action (MemoryEventReadAction):
        old_text (None | str):
        new_text (None | str):
        changes (MemoryEventReadChanges):
        actor (str):
        created_at (datetime.datetime):
    """

    id: UUID
    memory_id: UUID
    action: MemoryEventReadAction
    old_text: None | str
    new_text: None | str
    changes: MemoryEventReadChanges
    actor: str
    created_at: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = str(self.id)

        memory_id = str(self.memory_id)

        action = self.action.value

        old_text: None | str
        old_text = self.old_text

        new_text: None | str
        new_text = self.new_text

        changes = self.changes.to_dict()

        actor = self.actor

        created_at = self.created_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "memory_id": memory_id,
                "action": action,
                "old_text": old_text,
                "new_text": new_text,
                "changes": changes,
                "actor": actor,
                "created_at": created_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.memory_event_read_changes import MemoryEventReadChanges  # noqa: PLC0415

        d = dict(src_dict)
        id = UUID(d.pop("id"))

        memory_id = UUID(d.pop("memory_id"))

        action = MemoryEventReadAction(d.pop("action"))

        def _parse_old_text(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        old_text = _parse_old_text(d.pop("old_text"))

        def _parse_new_text(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        new_text = _parse_new_text(d.pop("new_text"))

        changes = MemoryEventReadChanges.from_dict(d.pop("changes"))

        actor = d.pop("actor")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        memory_event_read = cls(
            id=id,
            memory_id=memory_id,
            action=action,
            old_text=old_text,
            new_text=new_text,
            changes=changes,
            actor=actor,
            created_at=created_at,
        )

        memory_event_read.additional_properties = d
        return memory_event_read

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
