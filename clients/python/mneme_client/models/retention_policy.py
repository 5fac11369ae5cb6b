from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="RetentionPolicy")


@_attrs_define
class RetentionPolicy:
    """How long the tenant keeps what it stores, in days; null keeps it forever. Memories
    with their own `expires_at` go at that time whatever the policy says.

        Attributes:
            episodic_days (int | None | Unset): Episodic memories older than this go.
            messages_days (int | None | Unset): Raw messages older than this go (each thread keeps its newest message).
            summaries_days (int | None | Unset): Thread summaries older than this go.
    """

    episodic_days: int | None | Unset = UNSET
    messages_days: int | None | Unset = UNSET
    summaries_days: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        episodic_days: int | None | Unset
        if isinstance(self.episodic_days, Unset):
            episodic_days = UNSET
        else:
            episodic_days = self.episodic_days

        messages_days: int | None | Unset
        if isinstance(self.messages_days, Unset):
            messages_days = UNSET
        else:
            messages_days = self.messages_days

        summaries_days: int | None | Unset
        if isinstance(self.summaries_days, Unset):
            summaries_days = UNSET
        else:
            summaries_days = self.summaries_days

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if episodic_days is not UNSET:
            field_dict["episodic_days"] = episodic_days
        if messages_days is not UNSET:
            field_dict["messages_days"] = messages_days
        if summaries_days is not UNSET:
            field_dict["summaries_days"] = summaries_days

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

        def _parse_episodic_days(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        episodic_days = _parse_episodic_days(d.pop("episodic_days", UNSET))

        def _parse_messages_days(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        messages_days = _parse_messages_days(d.pop("messages_days", UNSET))

        def _parse_summaries_days(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        summaries_days = _parse_summaries_days(d.pop("summaries_days", UNSET))

        retention_policy = cls(
            episodic_days=episodic_days,
            messages_days=messages_days,
            summaries_days=summaries_days,
        )

        return retention_policy
