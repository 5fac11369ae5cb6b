from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.message_role import MessageRole
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.message_in_tool_calls_type_0_item import MessageInToolCallsType0Item
    from ..models.metadata import Metadata


T = TypeVar("T", bound="MessageIn")


@_attrs_define
class MessageIn:
    """
    Attributes:
        role (MessageRole):
        content (str): Stored as sent. A user's message must hold something besides whitespace and invisible characters;
            an assistant's, a tool's or a system message may be empty (a tool call, an empty tool result, a model's empty
            answer).
        name (None | str | Unset): The author's name, when a thread has named participants: memories derived from this
            message record it as their speaker. Like a memory's speaker, one that looks like a secret is refused (422
            SECRET_REFUSED).
        tool_calls (list[MessageInToolCallsType0Item] | None | Unset):
        client_message_id (None | str | Unset): Your id for this message; appending it again returns the stored one.
        metadata (Metadata | Unset): Free-form JSON object stored with the record and returned as given.
    """

    role: MessageRole
    content: str
    name: None | str | Unset = UNSET
    tool_calls: list[MessageInToolCallsType0Item] | None | Unset = UNSET
    client_message_id: None | str | Unset = UNSET
    metadata: Metadata | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        role = self.role.value

        content = self.content

        name: None | str | Unset
        if isinstance(self.name, Unset):
            name = UNSET
        else:
            name = self.name

        tool_calls: list[dict[str, Any]] | None | Unset
        if isinstance(self.tool_calls, Unset):
            tool_calls = UNSET
        elif isinstance(self.tool_calls, list):
            tool_calls = []
            for tool_calls_type_0_item_data in self.tool_calls:
                tool_calls_type_0_item = tool_calls_type_0_item_data.to_dict()
                tool_calls.append(tool_calls_type_0_item)

        else:
            tool_calls = self.tool_calls

        client_message_id: None | str | Unset
        if isinstance(self.client_message_id, Unset):
            client_message_id = UNSET
        else:
            client_message_id = self.client_message_id

        metadata: dict[str, Any] | Unset = UNSET
        if not isinstance(self.metadata, Unset):
            metadata = self.metadata.to_dict()

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "role": role,
                "content": content,
            }
        )
        if name is not UNSET:
            field_dict["name"] = name
        if tool_calls is not UNSET:
            field_dict["tool_calls"] = tool_calls
        if client_message_id is not UNSET:
            field_dict["client_message_id"] = client_message_id
        if metadata is not UNSET:
            field_dict["metadata"] = metadata

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.message_in_tool_calls_type_0_item import (
            MessageInToolCallsType0Item,  # noqa: PLC0415
        )
        from ..models.metadata import Metadata  # noqa: PLC0415

        d = dict(src_dict)
        role = MessageRole(d.pop("role"))

        content = d.pop("content")

        def _parse_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        name = _parse_name(d.pop("name", UNSET))

        def _parse_tool_calls(
            data: object,
        ) -> list[MessageInToolCallsType0Item] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                tool_calls_type_0 = []
                _tool_calls_type_0 = data
                for tool_calls_type_0_item_data in _tool_calls_type_0:
                    tool_calls_type_0_item = MessageInToolCallsType0Item.from_dict(
                        tool_calls_type_0_item_data
                    )

                    tool_calls_type_0.append(tool_calls_type_0_item)

                return tool_calls_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[MessageInToolCallsType0Item] | None | Unset, data)

        tool_calls = _parse_tool_calls(d.pop("tool_calls", UNSET))

        def _parse_client_message_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        client_message_id = _parse_client_message_id(d.pop("client_message_id", UNSET))

        _metadata = d.pop("metadata", UNSET)
        metadata: Metadata | Unset
        if isinstance(_metadata, Unset):
            metadata = UNSET
        else:
            metadata = Metadata.from_dict(_metadata)

        message_in = cls(
            role=role,
            content=content,
            name=name,
            tool_calls=tool_calls,
            client_message_id=client_message_id,
            metadata=metadata,
        )

        return message_in
