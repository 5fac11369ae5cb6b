from enum import StrEnum


class MessageRole(StrEnum):
    AI = "ai"
    ASSISTANT = "assistant"
    HUMAN = "human"
    SYSTEM = "system"
    TOOL = "tool"
    USER = "user"

    def __str__(self) -> str:
        return str(self.value)
