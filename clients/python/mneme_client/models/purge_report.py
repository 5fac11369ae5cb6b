from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.purge_report_deleted import PurgeReportDeleted
    from ..models.purge_report_redacted import PurgeReportRedacted
    from ..models.purge_report_remaining import PurgeReportRemaining


T = TypeVar("T", bound="PurgeReport")


@_attrs_define
class PurgeReport:
    """What a purge removed, and proof that nothing is left.

    Attributes:
        tenant_id (str):
        deleted (PurgeReportDeleted): Rows deleted per table.
        remaining (PurgeReportRemaining): Counted after the commit, in a new transaction: the rows each table still
            holds for the user (or tenant). All zero.
        verified (bool): True when every `remaining` count is zero.
        purged_at (datetime.datetime):
        user_id (None | str | Unset): Null for a tenant purge.
        redacted (PurgeReportRedacted | Unset): Rows kept but stripped of the user's content (organization memories
            written from the user's conversations lose their provenance and evidence).
        audit_id (None | Unset | UUID): The audit entry recording the purge (none for a tenant).
    """

    tenant_id: str
    deleted: PurgeReportDeleted
    remaining: PurgeReportRemaining
    verified: bool
    purged_at: datetime.datetime
    user_id: None | str | Unset = UNSET
    redacted: PurgeReportRedacted | Unset = UNSET
    audit_id: None | Unset | UUID = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        tenant_id = self.tenant_id

        deleted = self.deleted.to_dict()

        remaining = self.remaining.to_dict()

        verified = self.verified

        purged_at = self.purged_at.isoformat()

        user_id: None | str | Unset
        if isinstance(self.user_id, Unset):
            user_id = UNSET
        else:
            user_id = self.user_id

        redacted: dict[str, Any] | Unset = UNSET
        if not isinstance(self.redacted, Unset):
            redacted = self.redacted.to_dict()

        audit_id: None | str | Unset
        if isinstance(self.audit_id, Unset):
            audit_id = UNSET
        elif isinstance(self.audit_id, UUID):
            audit_id = str(self.audit_id)
        else:
            audit_id = self.audit_id

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "tenant_id": tenant_id,
                "deleted": deleted,
                "remaining": remaining,
                "verified": verified,
                "purged_at": purged_at,
            }
        )
        if user_id is not UNSET:
            field_dict["user_id"] = user_id
        if redacted is not UNSET:
            field_dict["redacted"] = redacted
        if audit_id is not UNSET:
            field_dict["audit_id"] = audit_id

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.purge_report_deleted import PurgeReportDeleted  # noqa: PLC0415
        from ..models.purge_report_redacted import PurgeReportRedacted  # noqa: PLC0415
        from ..models.purge_report_remaining import PurgeReportRemaining  # noqa: PLC0415

        d = dict(src_dict)
        tenant_id = d.pop("tenant_id")

        deleted = PurgeReportDeleted.from_dict(d.pop("deleted"))

        remaining = PurgeReportRemaining.from_dict(d.pop("remaining"))

        verified = d.pop("verified")

        purged_at = datetime.datetime.fromisoformat(d.pop("purged_at"))

        def _parse_user_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        user_id = _parse_user_id(d.pop("user_id", UNSET))

        _redacted = d.pop("redacted", UNSET)
        redacted: PurgeReportRedacted | Unset
        if isinstance(_redacted, Unset):
            redacted = UNSET
        else:
            redacted = PurgeReportRedacted.from_dict(_redacted)

        def _parse_audit_id(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                audit_id_type_0 = UUID(data)

                return audit_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        audit_id = _parse_audit_id(d.pop("audit_id", UNSET))

        purge_report = cls(
            tenant_id=tenant_id,
            deleted=deleted,
            remaining=remaining,
            verified=verified,
            purged_at=purged_at,
            user_id=user_id,
            redacted=redacted,
            audit_id=audit_id,
        )

        purge_report.additional_properties = d
        return purge_report

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
