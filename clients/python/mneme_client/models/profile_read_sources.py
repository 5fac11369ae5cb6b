from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.profile_source import ProfileSource

T = TypeVar("T", bound="ProfileReadSources")


@_attrs_define
class ProfileReadSources:
    """Per key: `memory` (stored in the profile) or `account` (from the user's identity provider, read-only here)."""

    additional_properties: dict[str, ProfileSource] = _attrs_field(
        init=False, factory=dict
    )

    def to_dict(self) -> dict[str, Any]:

        field_dict: dict[str, Any] = {}
        for prop_name, prop in self.additional_properties.items():
            field_dict[prop_name] = prop.value

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        profile_read_sources = cls()

        additional_properties = {}
        for prop_name, prop_dict in d.items():
            additional_property = ProfileSource(prop_dict)

            additional_properties[prop_name] = additional_property

        profile_read_sources.additional_properties = additional_properties
        return profile_read_sources

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> ProfileSource:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: ProfileSource) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
