from __future__ import annotations

from collections.abc import Mapping
from typing import (
    Any,
    Literal,
    TypeVar,
    cast,
)

from attrs import define as _attrs_define

T = TypeVar("T", bound="PatchReplace")


@_attrs_define
class PatchReplace:
    """Change a key the merged view has (a key from the account included).

    Attributes:
        op (Literal['replace']):
        path (str): A JSON Pointer to one top-level key.
        value (Any):
    """

    op: Literal["replace"]
    path: str
    value: Any

    def to_dict(self) -> dict[str, Any]:
        op = self.op

        path = self.path

        value = self.value

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "op": op,
                "path": path,
                "value": value,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        op = cast(Literal["replace"], d.pop("op"))
        if op != "replace":
            raise ValueError(f"op must match const 'replace', got '{op}'")

        path = d.pop("path")

        value = d.pop("value")

        patch_replace = cls(
            op=op,
            path=path,
            value=value,
        )

        return patch_replace
