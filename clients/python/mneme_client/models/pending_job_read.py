from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.queued_job_state import QueuedJobState

T = TypeVar("T", bound="PendingJobRead")


@_attrs_define
class PendingJobRead:
    """
    Attributes:
        id (int):
        kind (str):
        status (QueuedJobState):
        attempts (int): Runs that failed so far and count towards the job's attempts (it is retried with backoff, and
            gives up once `MNEME_JOB_MAX_ATTEMPTS` have failed).
        uncounted_runs (int): Runs that failed for a cause outside the job and do not count: a database outage, every
            database connection busy, or the service stopping while it ran. It is retried with backoff all the same.
        thread_id (None | UUID):
        user_id (None | str):
        created_at (datetime.datetime):
        execute_after (datetime.datetime): Not run before this (backoff after failures).
    """

    id: int
    kind: str
    status: QueuedJobState
    attempts: int
    uncounted_runs: int
    thread_id: None | UUID
    user_id: None | str
    created_at: datetime.datetime
    execute_after: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        kind = self.kind

        status = self.status.value

        attempts = self.attempts

        uncounted_runs = self.uncounted_runs

        thread_id: None | str
        if isinstance(self.thread_id, UUID):
            thread_id = str(self.thread_id)
        else:
            thread_id = self.thread_id

        user_id: None | str
        user_id = self.user_id

        created_at = self.created_at.isoformat()

        execute_after = self.execute_after.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "kind": kind,
                "status": status,
                "attempts": attempts,
                "uncounted_runs": uncounted_runs,
                "thread_id": thread_id,
                "user_id": user_id,
                "created_at": created_at,
                "execute_after": execute_after,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        id = d.pop("id")

        kind = d.pop("kind")

        status = QueuedJobState(d.pop("status"))

        attempts = d.pop("attempts")

        uncounted_runs = d.pop("uncounted_runs")

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

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        execute_after = datetime.datetime.fromisoformat(d.pop("execute_after"))

        pending_job_read = cls(
            id=id,
            kind=kind,
            status=status,
            attempts=attempts,
            uncounted_runs=uncounted_runs,
            thread_id=thread_id,
            user_id=user_id,
            created_at=created_at,
            execute_after=execute_after,
        )

        pending_job_read.additional_properties = d
        return pending_job_read

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
