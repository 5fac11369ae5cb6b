"""Request and response models of the context endpoint."""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from service.config import CONTEXT_BUDGET_MIN_TOKENS
from service.kit.token_counting import encoding_for
from service.kit.types import JsonBool, JsonInt, QueryText, UnitInterval
from service.memories.schemas import ComponentScores
from service.threads.schemas import (
    APPEND_MAX,
    MESSAGES_APPENDED_EXAMPLE,
    MessageIn,
    MessagesAppended,
)

ContextFormat = Literal["text", "json", "both"]
SectionName = Literal["org", "profile", "procedures", "facts", "episodes", "thread", "recent"]
ALL_SECTIONS: tuple[SectionName, ...] = (
    "org",
    "profile",
    "procedures",
    "facts",
    "episodes",
    "thread",
    "recent",
)


THREAD_SECTIONS: tuple[SectionName, ...] = ("thread", "recent")
"""The sections built from a thread: a request names one only with its `thread_id`."""


class ContextOptions(BaseModel):
    """How to build a context block: budget, sections and retrieval knobs."""

    model_config = ConfigDict(extra="forbid")

    budget_tokens: JsonInt | None = Field(
        default=None,
        ge=CONTEXT_BUDGET_MIN_TOKENS,
        le=32_000,
        description="Default: MNEME_CONTEXT_BUDGET_TOKENS. At least what the block's preamble "
        "and its newest message, shortened, need.",
    )
    k_user: JsonInt = Field(default=4, ge=0, le=50, description="Relevant user facts to consider.")
    k_episodic: JsonInt = Field(default=4, ge=0, le=50, description="Episodic hints to consider.")
    k_org: JsonInt = Field(default=4, ge=0, le=50, description="Organization memories to consider.")
    include: list[SectionName] = Field(
        default_factory=lambda: list(ALL_SECTIONS),
        min_length=1,
        description="The sections to build (default: all). An empty list would build nothing; "
        "`thread` and `recent` need a thread.",
    )
    format: ContextFormat = "both"
    encoding: str = Field(default="cl100k_base", max_length=64, description="tiktoken encoding.")
    include_proposed: JsonBool = Field(
        default=False, description="Also use facts still awaiting review (lifecycle proposed)."
    )
    mmr_lambda: UnitInterval = Field(
        default=0.7, description="Relevance vs. diversity when picking memories."
    )

    @field_validator("encoding")
    @classmethod
    def _available_offline(cls, name: str) -> str:
        # Counting with another encoding than the one asked for would overrun the model's
        # budget unnoticed: an encoding this server cannot load is refused.
        encoding_for(name)
        return name


class ContextRequest(ContextOptions):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "query": "Where should I book the team dinner?",
                    "thread_id": "0f8fad5b-d9cb-469f-a165-70867728950e",
                    "budget_tokens": 800,
                }
            ]
        },
    )

    query: QueryText = Field(description="Usually the user's latest message.")
    thread_id: uuid.UUID | None = Field(
        default=None,
        description="Adds the thread's summaries (`thread`) and its recent raw turns (`recent`).",
    )

    @model_validator(mode="after")
    def _thread_sections_name_a_thread(self) -> ContextRequest:
        # Sections that are all of a thread, without one, could only build an empty block,
        # with no sign why. A thread's sections beside others are built when a thread is
        # given, as the default (every section) is.
        if self.thread_id is None and set(self.include) <= set(THREAD_SECTIONS):
            raise PydanticCustomError(
                "thread_required",
                "sections {sections} need thread_id",
                {"sections": ", ".join(self.include)},
            )
        return self


class TurnContextOptions(ContextOptions):
    """The context block to return with an append: built for the same thread, after it."""

    query: QueryText | None = Field(
        default=None,
        description="Default: the last appended message from the user that has visible text "
        "(else the last appended message that has any).",
    )


class ContextItem(BaseModel):
    id: str | None = Field(description="Memory or message id; null for profile keys.")
    kind: str
    text: str
    tokens: int
    scores: ComponentScores | None = None


class ContextSection(BaseModel):
    name: SectionName
    title: str
    items: list[ContextItem]
    omitted: int = Field(description="Candidates left out for budget reasons.")


CONTEXT_EXAMPLE: dict[str, Any] = {
    "text": "You have long-term memory about this user and earlier "
    "conversations. …\n\nRelevant facts about the user:\n"
    "• Prefers window seats on long flights.",
    "sections": [
        {
            "name": "facts",
            "title": "Relevant facts about the user",
            "items": [
                {
                    "id": "3f2c8e0a-5b1d-4c7e-9a44-0d6e2b9f1a77",
                    "kind": "semantic",
                    "text": "Prefers window seats on long flights.",
                    "tokens": 9,
                    "scores": None,
                }
            ],
            "omitted": 0,
        }
    ],
    "token_count": 52,
    "budget_tokens": 1200,
    "encoding": "cl100k_base",
    "omitted": {},
    "summarization": None,
}


class ContextResponse(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [CONTEXT_EXAMPLE]})

    text: str | None = Field(
        description="One block ready for a system message; null if format=json."
    )
    sections: list[ContextSection] | None = Field(description="Null if format=text.")
    token_count: int
    budget_tokens: int
    encoding: str
    omitted: dict[str, int] = Field(description="Per section, candidates left out for budget.")
    summarization: Literal["on", "off"] | None = Field(
        default=None, description="With a thread: whether its older turns are being summarised."
    )


class TurnAppend(BaseModel):
    """One agent turn: the messages to append and how to build the next context block."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "messages": [
                        {"role": "assistant", "content": "Which city are you flying to?"},
                        {"role": "user", "content": "Lisbon, and a window seat please."},
                    ],
                    "context": {"budget_tokens": 800},
                }
            ]
        },
    )

    messages: list[MessageIn] = Field(min_length=1, max_length=APPEND_MAX)
    context: TurnContextOptions = Field(default_factory=TurnContextOptions)


class TurnAppended(MessagesAppended):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{**MESSAGES_APPENDED_EXAMPLE, "context": CONTEXT_EXAMPLE}]}
    )

    context: ContextResponse = Field(
        description="The context block for the next model call, built after the append."
    )
