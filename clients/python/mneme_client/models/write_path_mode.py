from enum import StrEnum


class WritePathMode(StrEnum):
    LLM = "llm"
    OFF = "off"
    TURNS = "turns"

    def __str__(self) -> str:
        return str(self.value)
