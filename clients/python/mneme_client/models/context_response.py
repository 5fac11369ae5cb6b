from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.context_response_summarization_type_0 import (
    ContextResponseSummarizationType0,
)
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.context_response_omitted import ContextResponseOmitted
    from ..models.context_section import ContextSection


T = TypeVar("T", bound="ContextResponse")


@_attrs_define
class ContextResponse:
    """
    Attributes:
        text (None | str): One block ready for a system message; null if format=json.
        sections (list[ContextSection] | None): Null if format=text.
        token_count (int):
        budget_tokens (int):
        encoding (str):
        omitted (ContextResponseOmitted): Per section, candidates left out for budget.
        summarization (ContextResponseSummarizationType0 | None | Unset): With a thread: whether its older turns are
            being summarised.
    """

    text: None | str
    sections: list[ContextSection] | None
    token_count: int
    budget_tokens: int
    encoding: str
    omitted: ContextResponseOmitted
    summarization: ContextResponseSummarizationType0 | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        text: None | str
        text = self.text

        sections: list[dict[str, Any]] | None
        if isinstance(self.sections, list):
            sections = []
            for sections_type_0_item_data in self.sections:
                sections_type_0_item = sections_type_0_item_data.to_dict()
                sections.append(sections_type_0_item)

        else:
            sections = self.sections

        token_count = self.token_count

        budget_tokens = self.budget_tokens

        encoding = self.encoding

        omitted = self.omitted.to_dict()

        summarization: None | str | Unset
        if isinstance(self.summarization, Unset):
            summarization = UNSET
        elif isinstance(self.summarization, ContextResponseSummarizationType0):
            summarization = self.summarization.value
        else:
            summarization = self.summarization

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "text": text,
                "sections": sections,
                "token_count": token_count,
                "budget_tokens": budget_tokens,
                "encoding": encoding,
                "omitted": omitted,
            }
        )
        if summarization is not UNSET:
            field_dict["summarization"] = summarization

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.context_response_omitted import ContextResponseOmitted  # noqa: PLC0415
        from ..models.context_section import ContextSection  # noqa: PLC0415

        d = dict(src_dict)

        def _parse_text(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        text = _parse_text(d.pop("text"))

        def _parse_sections(data: object) -> list[ContextSection] | None:
            if data is None:
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                sections_type_0 = []
                _sections_type_0 = data
                for sections_type_0_item_data in _sections_type_0:
                    sections_type_0_item = ContextSection.from_dict(
                        sections_type_0_item_data
                    )

                    sections_type_0.append(sections_type_0_item)

                return sections_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[ContextSection] | None, data)

        sections = _parse_sections(d.pop("sections"))

        token_count = d.pop("token_count")

        budget_tokens = d.pop("budget_tokens")

        encoding = d.pop("encoding")

        omitted = ContextResponseOmitted.from_dict(d.pop("omitted"))

        def _parse_summarization(
            data: object,
        ) -> ContextResponseSummarizationType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                summarization_type_0 = ContextResponseSummarizationType0(data)

                return summarization_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ContextResponseSummarizationType0 | None | Unset, data)

        summarization = _parse_summarization(d.pop("summarization", UNSET))

        context_response = cls(
            text=text,
            sections=sections,
            token_count=token_count,
            budget_tokens=budget_tokens,
            encoding=encoding,
            omitted=omitted,
            summarization=summarization,
        )

        context_response.additional_properties = d
        return context_response

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
