from enum import StrEnum


class ProfileSource(StrEnum):
    ACCOUNT = "account"
    MEMORY = "memory"

    def __str__(self) -> str:
        return str(self.value)
