from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.context_response import ContextResponse
    from ..models.message_read import MessageRead


T = TypeVar("T", bound="MessagesAppended")


@_attrs_define
class MessagesAppended:
    """
    Attributes:
        items (list[MessageRead]):
        duplicates (int): Messages whose client_message_id was already stored.
        context (ContextResponse | None | Unset): The next context block, when the request asked for one.
    """

    items: list[MessageRead]
    duplicates: int
    context: ContextResponse | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.context_response import ContextResponse

        items = []
        for items_item_data in self.items:
            items_item = items_item_data.to_dict()
            items.append(items_item)

        duplicates = self.duplicates

        context: dict[str, Any] | None | Unset
        if isinstance(self.context, Unset):
            context = UNSET
        elif isinstance(self.context, ContextResponse):
            context = self.context.to_dict()
        else:
            context = self.context

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "items": items,
                "duplicates": duplicates,
            }
        )
        if context is not UNSET:
            field_dict["context"] = context

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.context_response import ContextResponse
        from ..models.message_read import MessageRead

        d = dict(src_dict)
        items = []
        _items = d.pop("items")
        for items_item_data in _items:
            items_item = MessageRead.from_dict(items_item_data)

            items.append(items_item)

        duplicates = d.pop("duplicates")

        def _parse_context(data: object) -> ContextResponse | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                context_type_0 = ContextResponse.from_dict(data)

                return context_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ContextResponse | None | Unset, data)

        context = _parse_context(d.pop("context", UNSET))

        messages_appended = cls(
            items=items,
            duplicates=duplicates,
            context=context,
        )

        messages_appended.additional_properties = d
        return messages_appended

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
