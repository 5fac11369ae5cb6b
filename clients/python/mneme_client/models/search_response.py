from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.fusion_method import FusionMethod
from ..models.search_mode import SearchMode

if TYPE_CHECKING:
    from ..models.search_hit import SearchHit


T = TypeVar("T", bound="SearchResponse")


@_attrs_define
class SearchResponse:
    """
    Attributes:
        hits (list[SearchHit]):
        mode (SearchMode):
        fusion (FusionMethod):
        query_embedded (bool): False when the embedder was unavailable and only lexical search ran.
    """

    hits: list[SearchHit]
    mode: SearchMode
    fusion: FusionMethod
    query_embedded: bool
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        hits = []
        for hits_item_data in self.hits:
            hits_item = hits_item_data.to_dict()
            hits.append(hits_item)

        mode = self.mode.value

        fusion = self.fusion.value

        query_embedded = self.query_embedded

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "hits": hits,
                "mode": mode,
                "fusion": fusion,
                "query_embedded": query_embedded,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.search_hit import SearchHit  # noqa: PLC0415

        d = dict(src_dict)
        hits = []
        _hits = d.pop("hits")
        for hits_item_data in _hits:
            hits_item = SearchHit.from_dict(hits_item_data)

            hits.append(hits_item)

        mode = SearchMode(d.pop("mode"))

        fusion = FusionMethod(d.pop("fusion"))

        query_embedded = d.pop("query_embedded")

        search_response = cls(
            hits=hits,
            mode=mode,
            fusion=fusion,
            query_embedded=query_embedded,
        )

        search_response.additional_properties = d
        return search_response

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
