from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="JobFailureRead")


@_attrs_define
class JobFailureRead:
    """
    Attributes:
        kind (str):
        thread_id (None | UUID):
        user_id (None | str):
        attempt (int):
        final (bool): No retry follows; the next append's pass catches up.
        error (str): The error's type and, for model errors, what went wrong.
        failed_at (datetime.datetime):
    """

    kind: str
    thread_id: None | UUID
    user_id: None | str
    attempt: int
    final: bool
    error: str
    failed_at: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        kind = self.kind

        thread_id: None | str
        if isinstance(self.thread_id, UUID):
            thread_id = str(self.thread_id)
        else:
            thread_id = self.thread_id

        user_id: None | str
        user_id = self.user_id

        attempt = self.attempt

        final = self.final

        error = self.error

        failed_at = self.failed_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "kind": kind,
                "thread_id": thread_id,
                "user_id": user_id,
                "attempt": attempt,
                "final": final,
                "error": error,
                "failed_at": failed_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        kind = d.pop("kind")

        def _parse_thread_id(data: object) -> None | UUID:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                thread_id_type_0 = UUID(data)

                return thread_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | UUID, data)

        thread_id = _parse_thread_id(d.pop("thread_id"))

        def _parse_user_id(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        user_id = _parse_user_id(d.pop("user_id"))

        attempt = d.pop("attempt")

        final = d.pop("final")

        error = d.pop("error")

        failed_at = datetime.datetime.fromisoformat(d.pop("failed_at"))

        job_failure_read = cls(
            kind=kind,
            thread_id=thread_id,
            user_id=user_id,
            attempt=attempt,
            final=final,
            error=error,
            failed_at=failed_at,
        )

        job_failure_read.additional_properties = d
        return job_failure_read

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
