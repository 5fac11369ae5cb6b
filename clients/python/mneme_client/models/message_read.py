from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.stored_role import StoredRole
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.message_read_tool_calls_type_0_item import (
        MessageReadToolCallsType0Item,
    )
    from ..models.metadata import Metadata


T = TypeVar("T", bound="MessageRead")


@_attrs_define
class MessageRead:
    """
    Attributes:
        id (UUID):
        thread_id (UUID):
        seq (int): 0-based position in the thread.
        role (StoredRole):
        content (str):
        tool_calls (list[MessageReadToolCallsType0Item] | None):
        client_message_id (None | str):
        metadata (Metadata): Free-form JSON object stored with the record and returned as given.
        created_at (datetime.datetime):
        name (None | str | Unset): The author's name, if given.
        label (None | str | Unset): `#N` for the N-th human turn (what summary refs cite).
    """

    id: UUID
    thread_id: UUID
    seq: int
    role: StoredRole
    content: str
    tool_calls: list[MessageReadToolCallsType0Item] | None
    client_message_id: None | str
    metadata: Metadata
    created_at: datetime.datetime
    name: None | str | Unset = UNSET
    label: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = str(self.id)

        thread_id = str(self.thread_id)

        seq = self.seq

        role = self.role.value

        content = self.content

        tool_calls: list[dict[str, Any]] | None
        if isinstance(self.tool_calls, list):
            tool_calls = []
            for tool_calls_type_0_item_data in self.tool_calls:
                tool_calls_type_0_item = tool_calls_type_0_item_data.to_dict()
                tool_calls.append(tool_calls_type_0_item)

        else:
            tool_calls = self.tool_calls

        client_message_id: None | str
        client_message_id = self.client_message_id

        metadata = self.metadata.to_dict()

        created_at = self.created_at.isoformat()

        name: None | str | Unset
        if isinstance(self.name, Unset):
            name = UNSET
        else:
            name = self.name

        label: None | str | Unset
        if isinstance(self.label, Unset):
            label = UNSET
        else:
            label = self.label

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "thread_id": thread_id,
                "seq": seq,
                "role": role,
                "content": content,
                "tool_calls": tool_calls,
                "client_message_id": client_message_id,
                "metadata": metadata,
                "created_at": created_at,
            }
        )
        if name is not UNSET:
            field_dict["name"] = name
        if label is not UNSET:
            field_dict["label"] = label

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.message_read_tool_calls_type_0_item import (
            MessageReadToolCallsType0Item,  # noqa: PLC0415
        )
        from ..models.metadata import Metadata  # noqa: PLC0415

        d = dict(src_dict)
        id = UUID(d.pop("id"))

        thread_id = UUID(d.pop("thread_id"))

        seq = d.pop("seq")

        role = StoredRole(d.pop("role"))

        content = d.pop("content")

        def _parse_tool_calls(
            data: object,
        ) -> list[MessageReadToolCallsType0Item] | None:
            if data is None:
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                tool_calls_type_0 = []
                _tool_calls_type_0 = data
                for tool_calls_type_0_item_data in _tool_calls_type_0:
                    tool_calls_type_0_item = MessageReadToolCallsType0Item.from_dict(
                        tool_calls_type_0_item_data
                    )

                    tool_calls_type_0.append(tool_calls_type_0_item)

                return tool_calls_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[MessageReadToolCallsType0Item] | None, data)

        tool_calls = _parse_tool_calls(d.pop("tool_calls"))

        def _parse_client_message_id(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        client_message_id = _parse_client_message_id(d.pop("client_message_id"))

        metadata = Metadata.from_dict(d.pop("metadata"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        def _parse_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        name = _parse_name(d.pop("name", UNSET))

        def _parse_label(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        label = _parse_label(d.pop("label", UNSET))

        message_read = cls(
            id=id,
            thread_id=thread_id,
            seq=seq,
            role=role,
            content=content,
            tool_calls=tool_calls,
            client_message_id=client_message_id,
            metadata=metadata,
            created_at=created_at,
            name=name,
            label=label,
        )

        message_read.additional_properties = d
        return message_read

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
