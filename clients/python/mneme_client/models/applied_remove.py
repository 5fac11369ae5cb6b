from __future__ import annotations

from collections.abc import Mapping
from typing import (
    Any,
    Literal,
    TypeVar,
    cast,
)

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="AppliedRemove")


@_attrs_define
class AppliedRemove:
    """
    Attributes:
        op (Literal['remove']):
        path (str):
        old_value (Any):
    """

    op: Literal["remove"]
    path: str
    old_value: Any
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        op = self.op

        path = self.path

        old_value = self.old_value

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "op": op,
                "path": path,
                "old_value": old_value,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        op = cast(Literal["remove"], d.pop("op"))
        if op != "remove":
            raise ValueError(f"op must match const 'remove', got '{op}'")

        path = d.pop("path")

        old_value = d.pop("old_value")

        applied_remove = cls(
            op=op,
            path=path,
            old_value=old_value,
        )

        applied_remove.additional_properties = d
        return applied_remove

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
