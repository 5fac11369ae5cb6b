from enum import StrEnum


class ContextSectionName(StrEnum):
    EPISODES = "episodes"
    FACTS = "facts"
    ORG = "org"
    PROCEDURES = "procedures"
    PROFILE = "profile"
    RECENT = "recent"
    THREAD = "thread"

    def __str__(self) -> str:
        return str(self.value)
