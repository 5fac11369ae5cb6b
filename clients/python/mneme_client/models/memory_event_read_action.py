from enum import StrEnum


class MemoryEventReadAction(StrEnum):
    ADD = "add"
    DELETE = "delete"
    SUPERSEDE = "supersede"
    UPDATE = "update"

    def __str__(self) -> str:
        return str(self.value)
