from enum import StrEnum


class ProcedureSlot(StrEnum):
    SAFETY = "safety"
    STYLE = "style"
    TASK_POLICIES = "task_policies"
    WORKFLOW = "workflow"

    def __str__(self) -> str:
        return str(self.value)
