from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.compact_result_status import CompactResultStatus

if TYPE_CHECKING:
    from ..models.compact_result_dropped import CompactResultDropped
    from ..models.memory_read import MemoryRead


T = TypeVar("T", bound="CompactResult")


@_attrs_define
class CompactResult:
    """
    Attributes:
        status (CompactResultStatus):
        read (int): How many live facts the model was shown.
        written (list[MemoryRead]): The consolidated facts written.
        superseded (list[UUID]): Facts folded into a consolidated one: superseded (with history), not deleted.
        dropped (CompactResultDropped): Proposed facts not written, by reason (e.g. `no_sources`, `secret`).
    """

    status: CompactResultStatus
    read: int
    written: list[MemoryRead]
    superseded: list[UUID]
    dropped: CompactResultDropped
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        status = self.status.value

        read = self.read

        written = []
        for written_item_data in self.written:
            written_item = written_item_data.to_dict()
            written.append(written_item)

        superseded = []
        for superseded_item_data in self.superseded:
            superseded_item = str(superseded_item_data)
            superseded.append(superseded_item)

        dropped = self.dropped.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "status": status,
                "read": read,
                "written": written,
                "superseded": superseded,
                "dropped": dropped,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.compact_result_dropped import CompactResultDropped  # noqa: PLC0415
        from ..models.memory_read import MemoryRead  # noqa: PLC0415

        d = dict(src_dict)
        status = CompactResultStatus(d.pop("status"))

        read = d.pop("read")

        written = []
        _written = d.pop("written")
        for written_item_data in _written:
            written_item = MemoryRead.from_dict(written_item_data)

            written.append(written_item)

        superseded = []
        _superseded = d.pop("superseded")
        for superseded_item_data in _superseded:
            superseded_item = UUID(superseded_item_data)

            superseded.append(superseded_item)

        dropped = CompactResultDropped.from_dict(d.pop("dropped"))

        compact_result = cls(
            status=status,
            read=read,
            written=written,
            superseded=superseded,
            dropped=dropped,
        )

        compact_result.additional_properties = d
        return compact_result

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
