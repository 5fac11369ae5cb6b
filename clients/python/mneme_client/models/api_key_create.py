from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import (
    Any,
    Literal,
    TypeVar,
    cast,
)

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="ApiKeyCreate")


@_attrs_define
class ApiKeyCreate:
    """
    Attributes:
        name (str): What the key is for.
        roles (list[Literal['admin']] | Unset): `admin` lets the key call /v1/admin endpoints.
        expires_at (datetime.datetime | None | Unset): Optional expiry.
    """

    name: str
    roles: list[Literal["admin"]] | Unset = UNSET
    expires_at: datetime.datetime | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        roles: list[Literal["admin"]] | Unset = UNSET
        if not isinstance(self.roles, Unset):
            roles = self.roles

        expires_at: None | str | Unset
        if isinstance(self.expires_at, Unset):
            expires_at = UNSET
        elif isinstance(self.expires_at, datetime.datetime):
            expires_at = self.expires_at.isoformat()
        else:
            expires_at = self.expires_at

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "name": name,
            }
        )
        if roles is not UNSET:
            field_dict["roles"] = roles
        if expires_at is not UNSET:
            field_dict["expires_at"] = expires_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        name = d.pop("name")

        _roles = d.pop("roles", UNSET)
        roles: list[Literal["admin"]] | Unset = UNSET
        if _roles is not UNSET:
            roles = []
            for roles_item_data in _roles:
                roles_item = cast(Literal["admin"], roles_item_data)
                if roles_item != "admin":
                    raise ValueError(
                        f"roles_item must match const 'admin', got '{roles_item}'"
                    )
                roles.append(roles_item)

        def _parse_expires_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                expires_at_type_0 = datetime.datetime.fromisoformat(data)

                return expires_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        expires_at = _parse_expires_at(d.pop("expires_at", UNSET))

        api_key_create = cls(
            name=name,
            roles=roles,
            expires_at=expires_at,
        )

        return api_key_create
