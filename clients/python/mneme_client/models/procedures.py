from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.procedure_slot_read import ProcedureSlotRead


T = TypeVar("T", bound="Procedures")


@_attrs_define
class Procedures:
    """Standing instructions for the agent, as typed slots.

    Attributes:
        style (None | ProcedureSlotRead | Unset):
        workflow (None | ProcedureSlotRead | Unset):
        safety (None | ProcedureSlotRead | Unset):
        task_policies (None | ProcedureSlotRead | Unset):
    """

    style: None | ProcedureSlotRead | Unset = UNSET
    workflow: None | ProcedureSlotRead | Unset = UNSET
    safety: None | ProcedureSlotRead | Unset = UNSET
    task_policies: None | ProcedureSlotRead | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.procedure_slot_read import ProcedureSlotRead  # noqa: PLC0415

        style: dict[str, Any] | None | Unset
        if isinstance(self.style, Unset):
            style = UNSET
        elif isinstance(self.style, ProcedureSlotRead):
            style = self.style.to_dict()
        else:
            style = self.style

        workflow: dict[str, Any] | None | Unset
        if isinstance(self.workflow, Unset):
            workflow = UNSET
        elif isinstance(self.workflow, ProcedureSlotRead):
            workflow = self.workflow.to_dict()
        else:
            workflow = self.workflow

        safety: dict[str, Any] | None | Unset
        if isinstance(self.safety, Unset):
            safety = UNSET
        elif isinstance(self.safety, ProcedureSlotRead):
            safety = self.safety.to_dict()
        else:
            safety = self.safety

        task_policies: dict[str, Any] | None | Unset
        if isinstance(self.task_policies, Unset):
            task_policies = UNSET
        elif isinstance(self.task_policies, ProcedureSlotRead):
            task_policies = self.task_policies.to_dict()
        else:
            task_policies = self.task_policies

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
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
        from ..models.procedure_slot_read import ProcedureSlotRead  # noqa: PLC0415

        d = dict(src_dict)

        def _parse_style(data: object) -> None | ProcedureSlotRead | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                style_type_0 = ProcedureSlotRead.from_dict(data)

                return style_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | ProcedureSlotRead | Unset, data)

        style = _parse_style(d.pop("style", UNSET))

        def _parse_workflow(data: object) -> None | ProcedureSlotRead | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                workflow_type_0 = ProcedureSlotRead.from_dict(data)

                return workflow_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | ProcedureSlotRead | Unset, data)

        workflow = _parse_workflow(d.pop("workflow", UNSET))

        def _parse_safety(data: object) -> None | ProcedureSlotRead | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                safety_type_0 = ProcedureSlotRead.from_dict(data)

                return safety_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | ProcedureSlotRead | Unset, data)

        safety = _parse_safety(d.pop("safety", UNSET))

        def _parse_task_policies(data: object) -> None | ProcedureSlotRead | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                task_policies_type_0 = ProcedureSlotRead.from_dict(data)

                return task_policies_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | ProcedureSlotRead | Unset, data)

        task_policies = _parse_task_policies(d.pop("task_policies", UNSET))

        procedures = cls(
            style=style,
            workflow=workflow,
            safety=safety,
            task_policies=task_policies,
        )

        procedures.additional_properties = d
        return procedures

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
