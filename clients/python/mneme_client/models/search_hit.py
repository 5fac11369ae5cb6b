from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.component_scores import ComponentScores
    from ..models.memory_read import MemoryRead


T = TypeVar("T", bound="SearchHit")


@_attrs_define
class SearchHit:
    """
    Attributes:
        memory (MemoryRead):
        scores (ComponentScores): Why a memory ranked where it did, exactly as the fusion query computed it.
    """

    memory: MemoryRead
    scores: ComponentScores
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        memory = self.memory.to_dict()

        scores = self.scores.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "memory": memory,
                "scores": scores,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.component_scores import ComponentScores  # noqa: PLC0415
        from ..models.memory_read import MemoryRead  # noqa: PLC0415

        d = dict(src_dict)
        memory = MemoryRead.from_dict(d.pop("memory"))

        scores = ComponentScores.from_dict(d.pop("scores"))

        search_hit = cls(
            memory=memory,
            scores=scores,
        )

        search_hit.additional_properties = d
        return search_hit

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
