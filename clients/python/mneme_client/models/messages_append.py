from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.message_in import MessageIn
    from ..models.turn_context_options import TurnContextOptions


T = TypeVar("T", bound="MessagesAppend")


@_attrs_define
class MessagesAppend:
    """
    Attributes:
        messages (list[MessageIn]):
        context (None | TurnContextOptions | Unset): Also return the context block for the next model call, built after
            the append in the same transaction: one round trip per agent turn.
    """

    messages: list[MessageIn]
    context: None | TurnContextOptions | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.turn_context_options import TurnContextOptions

        messages = []
        for messages_item_data in self.messages:
            messages_item = messages_item_data.to_dict()
            messages.append(messages_item)

        context: dict[str, Any] | None | Unset
        if isinstance(self.context, Unset):
            context = UNSET
        elif isinstance(self.context, TurnContextOptions):
            context = self.context.to_dict()
        else:
            context = self.context

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
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.message_in import MessageIn
        from ..models.turn_context_options import TurnContextOptions

        d = dict(src_dict)
        messages = []
        _messages = d.pop("messages")
        for messages_item_data in _messages:
            messages_item = MessageIn.from_dict(messages_item_data)

            messages.append(messages_item)

        def _parse_context(data: object) -> None | TurnContextOptions | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                context_type_0 = TurnContextOptions.from_dict(data)

                return context_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | TurnContextOptions | Unset, data)

        context = _parse_context(d.pop("context", UNSET))

        messages_append = cls(
            messages=messages,
            context=context,
        )

        return messages_append
