from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.fusion_method import FusionMethod
from ..models.lifecycle import Lifecycle
from ..models.memory_kind import MemoryKind
from ..models.memory_scope import MemoryScope
from ..models.search_mode import SearchMode
from ..types import UNSET, Unset

T = TypeVar("T", bound="SearchRequest")


@_attrs_define
class SearchRequest:
    """
    Attributes:
        query (str):
        kinds (list[MemoryKind] | None | Unset):
        scopes (list[MemoryScope] | Unset):
        categories (list[str] | None | Unset):
        lifecycles (list[Lifecycle] | Unset): Superseded memories are excluded unless asked for.
        event_after (datetime.datetime | None | Unset): Memories that happened at or after this time (`event_at`, else
            when stored).
        event_before (datetime.datetime | None | Unset): … and before this one (later than `event_after`).
        limit (int | Unset):  Default: 10.
        mode (SearchMode | Unset):
        fusion (FusionMethod | None | Unset): `rrf` or `linear`; absent = the service's setting.
        rrf_k (int | None | Unset):
        linear_lexical_weight (float | None | Unset): Linear fusion's share of BM25 (relative to the best lexical hit)
            against the cosine, when both sides run; absent = the service's setting. A search with one side (mode `lexical`
            or `vector`) takes that side's score whole.
        recency_weight (float | None | Unset):
        confidence_weight (float | None | Unset):
        mmr_lambda (float | None | Unset): Set to diversify the results: each pick weighs relevance (the hit's
            `final_score` relative to the best candidate's) against redundancy (its highest cosine to the hits picked before
            it, from their stored vectors: in every mode). 1 = relevance only, the order without MMR.
    """

    query: str
    kinds: list[MemoryKind] | None | Unset = UNSET
    scopes: list[MemoryScope] | Unset = UNSET
    categories: list[str] | None | Unset = UNSET
    lifecycles: list[Lifecycle] | Unset = UNSET
    event_after: datetime.datetime | None | Unset = UNSET
    event_before: datetime.datetime | None | Unset = UNSET
    limit: int | Unset = 10
    mode: SearchMode | Unset = UNSET
    fusion: FusionMethod | None | Unset = UNSET
    rrf_k: int | None | Unset = UNSET
    linear_lexical_weight: float | None | Unset = UNSET
    recency_weight: float | None | Unset = UNSET
    confidence_weight: float | None | Unset = UNSET
    mmr_lambda: float | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        query = self.query

        kinds: list[str] | None | Unset
        if isinstance(self.kinds, Unset):
            kinds = UNSET
        elif isinstance(self.kinds, list):
            kinds = []
            for kinds_type_0_item_data in self.kinds:
                kinds_type_0_item = kinds_type_0_item_data.value
                kinds.append(kinds_type_0_item)

        else:
            kinds = self.kinds

        scopes: list[str] | Unset = UNSET
        if not isinstance(self.scopes, Unset):
            scopes = []
            for scopes_item_data in self.scopes:
                scopes_item = scopes_item_data.value
                scopes.append(scopes_item)

        categories: list[str] | None | Unset
        if isinstance(self.categories, Unset):
            categories = UNSET
        elif isinstance(self.categories, list):
            categories = self.categories

        else:
            categories = self.categories

        lifecycles: list[str] | Unset = UNSET
        if not isinstance(self.lifecycles, Unset):
            lifecycles = []
            for lifecycles_item_data in self.lifecycles:
                lifecycles_item = lifecycles_item_data.value
                lifecycles.append(lifecycles_item)

        event_after: None | str | Unset
        if isinstance(self.event_after, Unset):
            event_after = UNSET
        elif isinstance(self.event_after, datetime.datetime):
            event_after = self.event_after.isoformat()
        else:
            event_after = self.event_after

        event_before: None | str | Unset
        if isinstance(self.event_before, Unset):
            event_before = UNSET
        elif isinstance(self.event_before, datetime.datetime):
            event_before = self.event_before.isoformat()
        else:
            event_before = self.event_before

        limit = self.limit

        mode: str | Unset = UNSET
        if not isinstance(self.mode, Unset):
            mode = self.mode.value

        fusion: None | str | Unset
        if isinstance(self.fusion, Unset):
            fusion = UNSET
        elif isinstance(self.fusion, FusionMethod):
            fusion = self.fusion.value
        else:
            fusion = self.fusion

        rrf_k: int | None | Unset
        if isinstance(self.rrf_k, Unset):
            rrf_k = UNSET
        else:
            rrf_k = self.rrf_k

        linear_lexical_weight: float | None | Unset
        if isinstance(self.linear_lexical_weight, Unset):
            linear_lexical_weight = UNSET
        else:
            linear_lexical_weight = self.linear_lexical_weight

        recency_weight: float | None | Unset
        if isinstance(self.recency_weight, Unset):
            recency_weight = UNSET
        else:
            recency_weight = self.recency_weight

        confidence_weight: float | None | Unset
        if isinstance(self.confidence_weight, Unset):
            confidence_weight = UNSET
        else:
            confidence_weight = self.confidence_weight

        mmr_lambda: float | None | Unset
        if isinstance(self.mmr_lambda, Unset):
            mmr_lambda = UNSET
        else:
            mmr_lambda = self.mmr_lambda

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "query": query,
            }
        )
        if kinds is not UNSET:
            field_dict["kinds"] = kinds
        if scopes is not UNSET:
            field_dict["scopes"] = scopes
        if categories is not UNSET:
            field_dict["categories"] = categories
        if lifecycles is not UNSET:
            field_dict["lifecycles"] = lifecycles
        if event_after is not UNSET:
            field_dict["event_after"] = event_after
        if event_before is not UNSET:
            field_dict["event_before"] = event_before
        if limit is not UNSET:
            field_dict["limit"] = limit
        if mode is not UNSET:
            field_dict["mode"] = mode
        if fusion is not UNSET:
            field_dict["fusion"] = fusion
        if rrf_k is not UNSET:
            field_dict["rrf_k"] = rrf_k
        if linear_lexical_weight is not UNSET:
            field_dict["linear_lexical_weight"] = linear_lexical_weight
        if recency_weight is not UNSET:
            field_dict["recency_weight"] = recency_weight
        if confidence_weight is not UNSET:
            field_dict["confidence_weight"] = confidence_weight
        if mmr_lambda is not UNSET:
            field_dict["mmr_lambda"] = mmr_lambda

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        query = d.pop("query")

        def _parse_kinds(data: object) -> list[MemoryKind] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                kinds_type_0 = []
                _kinds_type_0 = data
                for kinds_type_0_item_data in _kinds_type_0:
                    kinds_type_0_item = MemoryKind(kinds_type_0_item_data)

                    kinds_type_0.append(kinds_type_0_item)

                return kinds_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[MemoryKind] | None | Unset, data)

        kinds = _parse_kinds(d.pop("kinds", UNSET))

        _scopes = d.pop("scopes", UNSET)
        scopes: list[MemoryScope] | Unset = UNSET
        if _scopes is not UNSET:
            scopes = []
            for scopes_item_data in _scopes:
                scopes_item = MemoryScope(scopes_item_data)

                scopes.append(scopes_item)

        def _parse_categories(data: object) -> list[str] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                categories_type_0 = cast(list[str], data)

                return categories_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[str] | None | Unset, data)

        categories = _parse_categories(d.pop("categories", UNSET))

        _lifecycles = d.pop("lifecycles", UNSET)
        lifecycles: list[Lifecycle] | Unset = UNSET
        if _lifecycles is not UNSET:
            lifecycles = []
            for lifecycles_item_data in _lifecycles:
                lifecycles_item = Lifecycle(lifecycles_item_data)

                lifecycles.append(lifecycles_item)

        def _parse_event_after(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                event_after_type_0 = datetime.datetime.fromisoformat(data)

                return event_after_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        event_after = _parse_event_after(d.pop("event_after", UNSET))

        def _parse_event_before(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                event_before_type_0 = datetime.datetime.fromisoformat(data)

                return event_before_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        event_before = _parse_event_before(d.pop("event_before", UNSET))

        limit = d.pop("limit", UNSET)

        _mode = d.pop("mode", UNSET)
        mode: SearchMode | Unset
        if isinstance(_mode, Unset):
            mode = UNSET
        else:
            mode = SearchMode(_mode)

        def _parse_fusion(data: object) -> FusionMethod | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                fusion_type_0 = FusionMethod(data)

                return fusion_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(FusionMethod | None | Unset, data)

        fusion = _parse_fusion(d.pop("fusion", UNSET))

        def _parse_rrf_k(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        rrf_k = _parse_rrf_k(d.pop("rrf_k", UNSET))

        def _parse_linear_lexical_weight(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        linear_lexical_weight = _parse_linear_lexical_weight(
            d.pop("linear_lexical_weight", UNSET)
        )

        def _parse_recency_weight(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        recency_weight = _parse_recency_weight(d.pop("recency_weight", UNSET))

        def _parse_confidence_weight(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        confidence_weight = _parse_confidence_weight(d.pop("confidence_weight", UNSET))

        def _parse_mmr_lambda(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        mmr_lambda = _parse_mmr_lambda(d.pop("mmr_lambda", UNSET))

        search_request = cls(
            query=query,
            kinds=kinds,
            scopes=scopes,
            categories=categories,
            lifecycles=lifecycles,
            event_after=event_after,
            event_before=event_before,
            limit=limit,
            mode=mode,
            fusion=fusion,
            rrf_k=rrf_k,
            linear_lexical_weight=linear_lexical_weight,
            recency_weight=recency_weight,
            confidence_weight=confidence_weight,
            mmr_lambda=mmr_lambda,
        )

        return search_request
