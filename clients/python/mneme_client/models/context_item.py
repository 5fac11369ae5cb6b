from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.component_scores import ComponentScores


T = TypeVar("T", bound="ContextItem")


@_attrs_define
class ContextItem:
    """
    Attributes:
        id (None | str): Memory or message id; null for profile keys.
        kind (str):
        text (str):
        tokens (int):
        scores (ComponentScores | None | Unset):
    """

    id: None | str
    kind: str
    text: str
    tokens: int
    scores: ComponentScores | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.component_scores import ComponentScores  # noqa: PLC0415

        id: None | str
        id = self.id

        kind = self.kind

        text = self.text

        tokens = self.tokens

        scores: dict[str, Any] | None | Unset
        if isinstance(self.scores, Unset):
            scores = UNSET
        elif isinstance(self.scores, ComponentScores):
            scores = self.scores.to_dict()
        else:
            scores = self.scores

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "kind": kind,
                "text": text,
                "tokens": tokens,
            }
        )
        if scores is not UNSET:
            field_dict["scores"] = scores

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.component_scores import ComponentScores  # noqa: PLC0415

        d = dict(src_dict)

        def _parse_id(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        id = _parse_id(d.pop("id"))

        kind = d.pop("kind")

        text = d.pop("text")

        tokens = d.pop("tokens")

        def _parse_scores(data: object) -> ComponentScores | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                scores_type_0 = ComponentScores.from_dict(data)

                return scores_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ComponentScores | None | Unset, data)

        scores = _parse_scores(d.pop("scores", UNSET))

        context_item = cls(
            id=id,
            kind=kind,
            text=text,
            tokens=tokens,
            scores=scores,
        )

        context_item.additional_properties = d
        return context_item

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
