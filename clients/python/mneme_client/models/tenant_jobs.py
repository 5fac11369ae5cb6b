from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.write_path_mode import WritePathMode

if TYPE_CHECKING:
    from ..models.job_count_read import JobCountRead
    from ..models.job_failure_read import JobFailureRead
    from ..models.pending_job_read import PendingJobRead


T = TypeVar("T", bound="TenantJobs")


@_attrs_define
class TenantJobs:
    """The background jobs of the whole tenant (admins).

    Attributes:
        extraction (WritePathMode):
        strategy (str):
        counts (list[JobCountRead]):
        pending (list[PendingJobRead]):
        failures (list[JobFailureRead]):
    """

    extraction: WritePathMode
    strategy: str
    counts: list[JobCountRead]
    pending: list[PendingJobRead]
    failures: list[JobFailureRead]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        extraction = self.extraction.value

        strategy = self.strategy

        counts = []
        for counts_item_data in self.counts:
            counts_item = counts_item_data.to_dict()
            counts.append(counts_item)

        pending = []
        for pending_item_data in self.pending:
            pending_item = pending_item_data.to_dict()
            pending.append(pending_item)

        failures = []
        for failures_item_data in self.failures:
            failures_item = failures_item_data.to_dict()
            failures.append(failures_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "extraction": extraction,
                "strategy": strategy,
                "counts": counts,
                "pending": pending,
                "failures": failures,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.job_count_read import JobCountRead  # noqa: PLC0415
        from ..models.job_failure_read import JobFailureRead  # noqa: PLC0415
        from ..models.pending_job_read import PendingJobRead  # noqa: PLC0415

        d = dict(src_dict)
        extraction = WritePathMode(d.pop("extraction"))

        strategy = d.pop("strategy")

        counts = []
        _counts = d.pop("counts")
        for counts_item_data in _counts:
            counts_item = JobCountRead.from_dict(counts_item_data)

            counts.append(counts_item)

        pending = []
        _pending = d.pop("pending")
        for pending_item_data in _pending:
            pending_item = PendingJobRead.from_dict(pending_item_data)

            pending.append(pending_item)

        failures = []
        _failures = d.pop("failures")
        for failures_item_data in _failures:
            failures_item = JobFailureRead.from_dict(failures_item_data)

            failures.append(failures_item)

        tenant_jobs = cls(
            extraction=extraction,
            strategy=strategy,
            counts=counts,
            pending=pending,
            failures=failures,
        )

        tenant_jobs.additional_properties = d
        return tenant_jobs

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
