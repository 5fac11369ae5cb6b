from enum import StrEnum


class NewLifecycle(StrEnum):
    CONFIRMED = "confirmed"
    PROPOSED = "proposed"

    def __str__(self) -> str:
        return str(self.value)
