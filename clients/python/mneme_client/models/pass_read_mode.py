from enum import StrEnum


class PassReadMode(StrEnum):
    LLM = "llm"
    TURNS = "turns"

    def __str__(self) -> str:
        return str(self.value)
