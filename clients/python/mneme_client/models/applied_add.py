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

T = TypeVar("T", bound="AppliedAdd")


@_attrs_define
class AppliedAdd:
    """
    Attributes:
        op (Literal['add']):
        path (str):
        value (Any):
        old_value (Any):
    """

    op: Literal["add"]
    path: str
    value: Any
    old_value: Any
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        op = self.op

        path = self.path

        value = self.value

        old_value = self.old_value

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "op": op,
                "path": path,
                "value": value,
                "old_value": old_value,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        op = cast(Literal["add"], d.pop("op"))
        if op != "add":
            raise ValueError(f"op must match const 'add', got '{op}'")

        path = d.pop("path")

        value = d.pop("value")

        old_value = d.pop("old_value")

        applied_add = cls(
            op=op,
            path=path,
            value=value,
            old_value=old_value,
        )

        applied_add.additional_properties = d
        return applied_add

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
