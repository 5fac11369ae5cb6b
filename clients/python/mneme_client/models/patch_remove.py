from __future__ import annotations

from collections.abc import Mapping
from typing import (
    Any,
    Literal,
    TypeVar,
    cast,
)

from attrs import define as _attrs_define

T = TypeVar("T", bound="PatchRemove")


@_attrs_define
class PatchRemove:
    """Remove a stored key.

    Attributes:
        op (Literal['remove']):
        path (str): A JSON Pointer to one top-level key.
    """

    op: Literal["remove"]
    path: str

    def to_dict(self) -> dict[str, Any]:
        op = self.op

        path = self.path

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "op": op,
                "path": path,
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

        patch_remove = cls(
            op=op,
            path=path,
        )

        return patch_remove
