from enum import StrEnum


class ContextFormat(StrEnum):
    BOTH = "both"
    JSON = "json"
    TEXT = "text"

    def __str__(self) -> str:
        return str(self.value)
