from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.write_path_mode import WritePathMode

if TYPE_CHECKING:
    from ..models.job_failure_read import JobFailureRead
    from ..models.pass_read import PassRead
    from ..models.pending_job_read import PendingJobRead
    from ..models.summary_pass_read import SummaryPassRead


T = TypeVar("T", bound="UserJobs")


@_attrs_define
class UserJobs:
    """The write path's health for one user: what waits, what failed, what ran.

    Attributes:
        extraction (WritePathMode):
        strategy (str):
        pending (list[PendingJobRead]):
        failures (list[JobFailureRead]):
        passes (list[PassRead]):
        summaries (list[SummaryPassRead]):
    """

    extraction: WritePathMode
    strategy: str
    pending: list[PendingJobRead]
    failures: list[JobFailureRead]
    passes: list[PassRead]
    summaries: list[SummaryPassRead]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        extraction = self.extraction.value

        strategy = self.strategy

        pending = []
        for pending_item_data in self.pending:
            pending_item = pending_item_data.to_dict()
            pending.append(pending_item)

        failures = []
        for failures_item_data in self.failures:
            failures_item = failures_item_data.to_dict()
            failures.append(failures_item)

        passes = []
        for passes_item_data in self.passes:
            passes_item = passes_item_data.to_dict()
            passes.append(passes_item)

        summaries = []
        for summaries_item_data in self.summaries:
            summaries_item = summaries_item_data.to_dict()
            summaries.append(summaries_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "extraction": extraction,
                "strategy": strategy,
                "pending": pending,
                "failures": failures,
                "passes": passes,
                "summaries": summaries,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.job_failure_read import JobFailureRead  # noqa: PLC0415
        from ..models.pass_read import PassRead  # noqa: PLC0415
        from ..models.pending_job_read import PendingJobRead  # noqa: PLC0415
        from ..models.summary_pass_read import SummaryPassRead  # noqa: PLC0415

        d = dict(src_dict)
        extraction = WritePathMode(d.pop("extraction"))

        strategy = d.pop("strategy")

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

        passes = []
        _passes = d.pop("passes")
        for passes_item_data in _passes:
            passes_item = PassRead.from_dict(passes_item_data)

            passes.append(passes_item)

        summaries = []
        _summaries = d.pop("summaries")
        for summaries_item_data in _summaries:
            summaries_item = SummaryPassRead.from_dict(summaries_item_data)

            summaries.append(summaries_item)

        user_jobs = cls(
            extraction=extraction,
            strategy=strategy,
            pending=pending,
            failures=failures,
            passes=passes,
            summaries=summaries,
        )

        user_jobs.additional_properties = d
        return user_jobs

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
