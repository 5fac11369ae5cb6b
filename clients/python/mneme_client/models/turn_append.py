from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.message_in import MessageIn
    from ..models.turn_context_options import TurnContextOptions


T = TypeVar("T", bound="TurnAppend")


@_attrs_define
class TurnAppend:
    """One agent turn: the messages to append and how to build the next context block.

    Attributes:
        messages (list[MessageIn]):
        context (TurnContextOptions | Unset): The context block to return with an append: built for the same thread,
            after it.
    """

    messages: list[MessageIn]
    context: TurnContextOptions | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        messages = []
        for messages_item_data in self.messages:
            messages_item = messages_item_data.to_dict()
            messages.append(messages_item)

        context: dict[str, Any] | Unset = UNSET
        if not isinstance(self.context, Unset):
            context = self.context.to_dict()

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "messages": messages,
            }
        )
        if context is not UNSET:
            field_dict["context"] = context

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.message_in import MessageIn  # noqa: PLC0415
        from ..models.turn_context_options import TurnContextOptions  # noqa: PLC0415

        d = dict(src_dict)
        messages = []
        _messages = d.pop("messages")
        for messages_item_data in _messages:
            messages_item = MessageIn.from_dict(messages_item_data)

            messages.append(messages_item)

        _context = d.pop("context", UNSET)
        context: TurnContextOptions | Unset
        if isinstance(_context, Unset):
            context = UNSET
        else:
            context = TurnContextOptions.from_dict(_context)

        turn_append = cls(
            messages=messages,
            context=context,
        )

        return turn_append
