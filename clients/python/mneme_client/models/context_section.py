from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.context_section_name import ContextSectionName

if TYPE_CHECKING:
    from ..models.context_item import ContextItem


T = TypeVar("T", bound="ContextSection")


@_attrs_define
class ContextSection:
    """
    Attributes:
        name (ContextSectionName):
        title (str):
        items (list[ContextItem]):
        omitted (int): Candidates left out for budget reasons.
    """

    name: ContextSectionName
    title: str
    items: list[ContextItem]
    omitted: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        name = self.name.value

        title = self.title

        items = []
        for items_item_data in self.items:
            items_item = items_item_data.to_dict()
            items.append(items_item)

        omitted = self.omitted

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "name": name,
                "title": title,
                "items": items,
                "omitted": omitted,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.context_item import ContextItem  # noqa: PLC0415

        d = dict(src_dict)
        name = ContextSectionName(d.pop("name"))

        title = d.pop("title")

        items = []
        _items = d.pop("items")
        for items_item_data in _items:
            items_item = ContextItem.from_dict(items_item_data)

            items.append(items_item)

        omitted = d.pop("omitted")

        context_section = cls(
            name=name,
            title=title,
            items=items,
            omitted=omitted,
        )

        context_section.additional_properties = d
        return context_section

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
