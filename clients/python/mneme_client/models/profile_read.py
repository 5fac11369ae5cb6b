from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.profile_read_profile import ProfileReadProfile
    from ..models.profile_read_sources import ProfileReadSources


T = TypeVar("T", bound="ProfileRead")


@_attrs_define
class ProfileRead:
    """A profile as the Memory page shows it: the merged view and where each key comes from.

    Attributes:
        profile (ProfileReadProfile): The merged view: the stored document, plus account details (name, email, avatar,
            socials) for keys the document lacks. Account keys come first, then stored keys alphabetically.
        sources (ProfileReadSources): Per key: `memory` (stored in the profile) or `account` (from the user's identity
            provider, read-only here).
        stored_keys (list[str]): The keys of the stored document, sorted.
        extracted_keys (list[str]): The stored keys whose current value the write path's extraction set, sorted. Every
            other stored key was set through the API (by the user, an admin or a service), and extraction does not overwrite
            it.
        key_count (int): How many keys the stored document has.
        bytes_ (int): Size of the stored document as compact UTF-8 JSON.
        max_bytes (int): The largest stored document a write may produce.
        version (int): Grows by one with each change; 0 before the first.
        updated_at (datetime.datetime | None | Unset):
    """

    profile: ProfileReadProfile
    sources: ProfileReadSources
    stored_keys: list[str]
    extracted_keys: list[str]
    key_count: int
    bytes_: int
    max_bytes: int
    version: int
    updated_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        profile = self.profile.to_dict()

        sources = self.sources.to_dict()

        stored_keys = self.stored_keys

        extracted_keys = self.extracted_keys

        key_count = self.key_count

        bytes_ = self.bytes_

        max_bytes = self.max_bytes

        version = self.version

        updated_at: None | str | Unset
        if isinstance(self.updated_at, Unset):
            updated_at = UNSET
        elif isinstance(self.updated_at, datetime.datetime):
            updated_at = self.updated_at.isoformat()
        else:
            updated_at = self.updated_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "profile": profile,
                "sources": sources,
                "stored_keys": stored_keys,
                "extracted_keys": extracted_keys,
                "key_count": key_count,
                "bytes": bytes_,
                "max_bytes": max_bytes,
                "version": version,
            }
        )
        if updated_at is not UNSET:
            field_dict["updated_at"] = updated_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.profile_read_profile import ProfileReadProfile  # noqa: PLC0415
        from ..models.profile_read_sources import ProfileReadSources  # noqa: PLC0415

        d = dict(src_dict)
        profile = ProfileReadProfile.from_dict(d.pop("profile"))

        sources = ProfileReadSources.from_dict(d.pop("sources"))

        stored_keys = cast(list[str], d.pop("stored_keys"))

        extracted_keys = cast(list[str], d.pop("extracted_keys"))

        key_count = d.pop("key_count")

        bytes_ = d.pop("bytes")

        max_bytes = d.pop("max_bytes")

        version = d.pop("version")

        def _parse_updated_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                updated_at_type_0 = datetime.datetime.fromisoformat(data)

                return updated_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        updated_at = _parse_updated_at(d.pop("updated_at", UNSET))

        profile_read = cls(
            profile=profile,
            sources=sources,
            stored_keys=stored_keys,
            extracted_keys=extracted_keys,
            key_count=key_count,
            bytes_=bytes_,
            max_bytes=max_bytes,
            version=version,
            updated_at=updated_at,
        )

        profile_read.additional_properties = d
        return profile_read

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
