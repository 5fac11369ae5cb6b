from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="RerunQueued")


@_attrs_define
class RerunQueued:
    """
    Attributes:
        threads (list[UUID]): The threads fresh jobs were queued for.
        kinds (list[str]): The kinds of job queued per thread; empty when background work is off.
    """

    threads: list[UUID]
    kinds: list[str]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        threads = []
        for threads_item_data in self.threads:
            threads_item = str(threads_item_data)
            threads.append(threads_item)

        kinds = self.kinds

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "threads": threads,
                "kinds": kinds,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        threads = []
        _threads = d.pop("threads")
        for threads_item_data in _threads:
            threads_item = UUID(threads_item_data)

            threads.append(threads_item)

        kinds = cast(list[str], d.pop("kinds"))

        rerun_queued = cls(
            threads=threads,
            kinds=kinds,
        )

        rerun_queued.additional_properties = d
        return rerun_queued

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
