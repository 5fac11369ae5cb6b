from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.summarize_result_status import SummarizeResultStatus
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.summary_read import SummaryRead


T = TypeVar("T", bound="SummarizeResult")


@_attrs_define
class SummarizeResult:
    """
    Attributes:
        status (SummarizeResultStatus):
        summary (None | SummaryRead | Unset):
    """

    status: SummarizeResultStatus
    summary: None | SummaryRead | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.summary_read import SummaryRead  # noqa: PLC0415

        status = self.status.value

        summary: dict[str, Any] | None | Unset
        if isinstance(self.summary, Unset):
            summary = UNSET
        elif isinstance(self.summary, SummaryRead):
            summary = self.summary.to_dict()
        else:
            summary = self.summary

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "status": status,
            }
        )
        if summary is not UNSET:
            field_dict["summary"] = summary

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.summary_read import SummaryRead  # noqa: PLC0415

        d = dict(src_dict)
        status = SummarizeResultStatus(d.pop("status"))

        def _parse_summary(data: object) -> None | SummaryRead | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                summary_type_0 = SummaryRead.from_dict(data)

                return summary_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | SummaryRead | Unset, data)

        summary = _parse_summary(d.pop("summary", UNSET))

        summarize_result = cls(
            status=status,
            summary=summary,
        )

        summarize_result.additional_properties = d
        return summarize_result

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
