from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.audit_entry_read_detail import AuditEntryReadDetail


T = TypeVar("T", bound="AuditEntryRead")


@_attrs_define
class AuditEntryRead:
    """
    Attributes:
        id (UUID):
        actor_kind (str):
        actor_id (str):
        action (str):
        target_type (str):
        target_id (None | str):
        detail (AuditEntryReadDetail):
        created_at (datetime.datetime):
        request_id (None | str | Unset): The `X-Request-ID` of the request that caused the entry.
    """

    id: UUID
    actor_kind: str
    actor_id: str
    action: str
    target_type: str
    target_id: None | str
    detail: AuditEntryReadDetail
    created_at: datetime.datetime
    request_id: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = str(self.id)

        actor_kind = self.actor_kind

        actor_id = self.actor_id

        action = self.action

        target_type = self.target_type

        target_id: None | str
        target_id = self.target_id

        detail = self.detail.to_dict()

        created_at = self.created_at.isoformat()

        request_id: None | str | Unset
        if isinstance(self.request_id, Unset):
            request_id = UNSET
        else:
            request_id = self.request_id

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "actor_kind": actor_kind,
                "actor_id": actor_id,
                "action": action,
                "target_type": target_type,
                "target_id": target_id,
                "detail": detail,
                "created_at": created_at,
            }
        )
        if request_id is not UNSET:
            field_dict["request_id"] = request_id

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.audit_entry_read_detail import AuditEntryReadDetail  # noqa: PLC0415

        d = dict(src_dict)
        id = UUID(d.pop("id"))

        actor_kind = d.pop("actor_kind")

        actor_id = d.pop("actor_id")

        action = d.pop("action")

        target_type = d.pop("target_type")

        def _parse_target_id(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        target_id = _parse_target_id(d.pop("target_id"))

        detail = AuditEntryReadDetail.from_dict(d.pop("detail"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        def _parse_request_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        request_id = _parse_request_id(d.pop("request_id", UNSET))

        audit_entry_read = cls(
            id=id,
            actor_kind=actor_kind,
            actor_id=actor_id,
            action=action,
            target_type=target_type,
            target_id=target_id,
            detail=detail,
            created_at=created_at,
            request_id=request_id,
        )

        audit_entry_read.additional_properties = d
        return audit_entry_read

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
