from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.import_report_imported import ImportReportImported


T = TypeVar("T", bound="ImportReport")


@_attrs_define
class ImportReport:
    """
    Attributes:
        user_id (str):
        imported (ImportReportImported): Rows inserted per record type.
    """

    user_id: str
    imported: ImportReportImported
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        user_id = self.user_id

        imported = self.imported.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "user_id": user_id,
                "imported": imported,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.import_report_imported import ImportReportImported  # noqa: PLC0415

        d = dict(src_dict)
        user_id = d.pop("user_id")

        imported = ImportReportImported.from_dict(d.pop("imported"))

        import_report = cls(
            user_id=user_id,
            imported=imported,
        )

        import_report.additional_properties = d
        return import_report

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
