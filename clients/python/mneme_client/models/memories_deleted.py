from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="MemoriesDeleted")


@_attrs_define
class MemoriesDeleted:
    """What a delete by filter removed (or, with `dry_run=true`, would remove).

    Attributes:
        matched (int): Memories the filter selects (what a listing shows).
        deleted (int): Memories removed: `matched`, or 0 on a dry run.
        dry_run (bool):
        ids (list[UUID]): The first (newest) matched ids, at most 20, to show before deleting.
    """

    matched: int
    deleted: int
    dry_run: bool
    ids: list[UUID]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        matched = self.matched

        deleted = self.deleted

        dry_run = self.dry_run

        ids = []
        for ids_item_data in self.ids:
            ids_item = str(ids_item_data)
            ids.append(ids_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "matched": matched,
                "deleted": deleted,
                "dry_run": dry_run,
                "ids": ids,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        matched = d.pop("matched")

        deleted = d.pop("deleted")

        dry_run = d.pop("dry_run")

        ids = []
        _ids = d.pop("ids")
        for ids_item_data in _ids:
            ids_item = UUID(ids_item_data)

            ids.append(ids_item)

        memories_deleted = cls(
            matched=matched,
            deleted=deleted,
            dry_run=dry_run,
            ids=ids,
        )

        memories_deleted.additional_properties = d
        return memories_deleted

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
