from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="ProceduresUpdate")


@_attrs_define
class ProceduresUpdate:
    """Slots to set; an empty string clears a slot, an absent slot is left alone.

    Attributes:
        style (None | str | Unset):
        workflow (None | str | Unset):
        safety (None | str | Unset):
        task_policies (None | str | Unset):
    """

    style: None | str | Unset = UNSET
    workflow: None | str | Unset = UNSET
    safety: None | str | Unset = UNSET
    task_policies: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        style: None | str | Unset
        if isinstance(self.style, Unset):
            style = UNSET
        else:
            style = self.style

        workflow: None | str | Unset
        if isinstance(self.workflow, Unset):
            workflow = UNSET
        else:
            workflow = self.workflow

        safety: None | str | Unset
        if isinstance(self.safety, Unset):
            safety = UNSET
        else:
            safety = self.safety

        task_policies: None | str | Unset
        if isinstance(self.task_policies, Unset):
            task_policies = UNSET
        else:
            task_policies = self.task_policies

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if style is not UNSET:
            field_dict["style"] = style
        if workflow is not UNSET:
            field_dict["workflow"] = workflow
        if safety is not UNSET:
            field_dict["safety"] = safety
        if task_policies is not UNSET:
            field_dict["task_policies"] = task_policies

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

        def _parse_style(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        style = _parse_style(d.pop("style", UNSET))

        def _parse_workflow(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        workflow = _parse_workflow(d.pop("workflow", UNSET))

        def _parse_safety(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        safety = _parse_safety(d.pop("safety", UNSET))

        def _parse_task_policies(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        task_policies = _parse_task_policies(d.pop("task_policies", UNSET))

        procedures_update = cls(
            style=style,
            workflow=workflow,
            safety=safety,
            task_policies=task_policies,
        )

        return procedures_update
