from enum import StrEnum


class Lifecycle(StrEnum):
    CONFIRMED = "confirmed"
    PROPOSED = "proposed"
    SUPERSEDED = "superseded"

    def __str__(self) -> str:
        return str(self.value)
