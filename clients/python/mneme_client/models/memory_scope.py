from enum import StrEnum


class MemoryScope(StrEnum):
    ORG = "org"
    USER = "user"

    def __str__(self) -> str:
        return str(self.value)
