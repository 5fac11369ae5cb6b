from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.queued_job_state import QueuedJobState

T = TypeVar("T", bound="JobCountRead")


@_attrs_define
class JobCountRead:
    """
    Attributes:
        kind (str):
        status (QueuedJobState):
        jobs (int):
        retrying (int): Of them, jobs that used at least one attempt already.
        interrupted (int): Of them, the others that failed only for causes outside the job (`uncounted_runs`), with all
            their attempts left.
        oldest_created_at (datetime.datetime):
    """

    kind: str
    status: QueuedJobState
    jobs: int
    retrying: int
    interrupted: int
    oldest_created_at: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        kind = self.kind

        status = self.status.value

        jobs = self.jobs

        retrying = self.retrying

        interrupted = self.interrupted

        oldest_created_at = self.oldest_created_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "kind": kind,
                "status": status,
                "jobs": jobs,
                "retrying": retrying,
                "interrupted": interrupted,
                "oldest_created_at": oldest_created_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        kind = d.pop("kind")

        status = QueuedJobState(d.pop("status"))

        jobs = d.pop("jobs")

        retrying = d.pop("retrying")

        interrupted = d.pop("interrupted")

        oldest_created_at = datetime.datetime.fromisoformat(d.pop("oldest_created_at"))

        job_count_read = cls(
            kind=kind,
            status=status,
            jobs=jobs,
            retrying=retrying,
            interrupted=interrupted,
            oldest_created_at=oldest_created_at,
        )

        job_count_read.additional_properties = d
        return job_count_read

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
