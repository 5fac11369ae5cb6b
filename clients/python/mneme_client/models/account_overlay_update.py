from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="AccountOverlayUpdate")


@_attrs_define
class AccountOverlayUpdate:
    """The account details a service sets for a user. It replaces the whole overlay: an
    omitted field is cleared.

        Attributes:
            name (None | str | Unset):
            email (None | str | Unset):
            avatar (None | str | Unset): A picture URL.
            socials (list[str] | Unset): Linked OAuth providers (e.g. `github`); the password `credential` provider is
                dropped.
    """

    name: None | str | Unset = UNSET
    email: None | str | Unset = UNSET
    avatar: None | str | Unset = UNSET
    socials: list[str] | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        name: None | str | Unset
        if isinstance(self.name, Unset):
            name = UNSET
        else:
            name = self.name

        email: None | str | Unset
        if isinstance(self.email, Unset):
            email = UNSET
        else:
            email = self.email

        avatar: None | str | Unset
        if isinstance(self.avatar, Unset):
            avatar = UNSET
        else:
            avatar = self.avatar

        socials: list[str] | Unset = UNSET
        if not isinstance(self.socials, Unset):
            socials = self.socials

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if name is not UNSET:
            field_dict["name"] = name
        if email is not UNSET:
            field_dict["email"] = email
        if avatar is not UNSET:
            field_dict["avatar"] = avatar
        if socials is not UNSET:
            field_dict["socials"] = socials

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

        def _parse_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        name = _parse_name(d.pop("name", UNSET))

        def _parse_email(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        email = _parse_email(d.pop("email", UNSET))

        def _parse_avatar(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        avatar = _parse_avatar(d.pop("avatar", UNSET))

        socials = cast(list[str], d.pop("socials", UNSET))

        account_overlay_update = cls(
            name=name,
            email=email,
            avatar=avatar,
            socials=socials,
        )

        return account_overlay_update
