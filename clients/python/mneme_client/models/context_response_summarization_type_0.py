from enum import StrEnum


class ContextResponseSummarizationType0(StrEnum):
    OFF = "off"
    ON = "on"

    def __str__(self) -> str:
        return str(self.value)
