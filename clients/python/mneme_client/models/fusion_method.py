from enum import StrEnum


class FusionMethod(StrEnum):
    LINEAR = "linear"
    RRF = "rrf"

    def __str__(self) -> str:
        return str(self.value)
