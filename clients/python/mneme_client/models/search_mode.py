from enum import StrEnum


class SearchMode(StrEnum):
    HYBRID = "hybrid"
    LEXICAL = "lexical"
    VECTOR = "vector"

    def __str__(self) -> str:
        return str(self.value)
