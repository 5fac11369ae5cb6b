"""Request and response models of the threads API."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from service.kit.types import JsonObject, SpeakerName, has_visible_character

StoredRole = Literal["user", "assistant", "tool", "system"]
MessageRole = Literal["user", "human", "assistant", "ai", "tool", "system"]
# Clients speak both vocabularies (OpenAI's and LangChain's); we store one.
ROLE_ALIASES: dict[str, StoredRole] = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "tool": "tool",
    "system": "system",
}
HUMAN_ROLE: StoredRole = "user"
"""The role of a human turn, the messages labelled `#N`."""
MESSAGE_CONTENT_MAX = 100_000
APPEND_MAX = 100


class ThreadCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"title": "Trip planning", "metadata": {"channel": "web"}}]
        },
    )

    title: str | None = Field(default=None, max_length=500)
    metadata: JsonObject = Field(default_factory=dict)


class ThreadUpdate(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"title": "Lisbon trip planning"}]}
    )

    title: str | None = Field(default=None, max_length=500)
    metadata: JsonObject | None = None


class ThreadRead(BaseModel):
    model_config = ConfigDict(
        from_attributes=True,
        json_schema_extra={
            "examples": [
                {
                    "id": "0f8fad5b-d9cb-469f-a165-70867728950e",
                    "user_id": "ada",
                    "title": "Trip planning",
                    "metadata": {},
                    "created_at": "2026-11-30T09:00:00Z",
                    "updated_at": "2026-11-30T09:12:44Z",
                    "last_message_at": "2026-11-30T09:12:44Z",
                }
            ]
        },
    )

    id: uuid.UUID
    user_id: str
    title: str | None
    metadata: dict[str, Any] = Field(validation_alias=AliasChoices("metadata_", "metadata"))
    created_at: datetime
    updated_at: datetime
    last_message_at: datetime | None


class MessageIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: MessageRole
    name: SpeakerName | None = Field(
        default=None,
        description="The author's name, when a thread has named participants: memories "
        "derived from this message record it as their speaker. Like a memory's speaker, one "
        "that looks like a secret is refused (422 SECRET_REFUSED).",
        examples=["Ada"],
    )
    content: str = Field(
        max_length=MESSAGE_CONTENT_MAX,
        description="Stored as sent. A user's message must hold something besides whitespace "
        "and invisible characters; an assistant's, a tool's or a system message may be empty "
        "(a tool call, an empty tool result, a model's empty answer).",
    )
    tool_calls: list[JsonObject] | None = Field(default=None, max_length=128)
    client_message_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Your id for this message; appending it again returns the stored one.",
    )
    metadata: JsonObject = Field(
        default_factory=dict,
        description="Yours to set; like a thread's metadata, a secret in it (or a non-blank "
        "value under a credential-named key) is refused (422 SECRET_REFUSED).",
    )

    @field_validator("role")
    @classmethod
    def _normalise_role(cls, value: str) -> str:
        return ROLE_ALIASES[value]

    @field_validator("content")
    @classmethod
    def _a_human_turn_says_something(cls, value: str, info: ValidationInfo) -> str:
        # A user's message is a human turn: it takes a `#N` label, is replayed in the context
        # block, summarised as a question and is a turn's default query, so one of only
        # whitespace or invisible characters is refused as every other text people read is.
        # Other roles legitimately say nothing: an assistant's tool call carries its content in
        # `tool_calls`, a tool may return nothing, a model may answer nothing, and a mirrored
        # conversation must not lose its user's turn over such a reply in the same batch.
        if info.data.get("role") == HUMAN_ROLE:
            return has_visible_character(value)
        return value


class MessagesAppend(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "messages": [
                        {"role": "user", "content": "I moved to Lisbon last month."},
                        {"role": "assistant", "content": "Welcome to Lisbon! How is it going?"},
                    ],
                }
            ]
        },
    )

    messages: list[MessageIn] = Field(min_length=1, max_length=APPEND_MAX)


class MessageRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    thread_id: uuid.UUID
    seq: int = Field(description="0-based position in the thread.")
    role: StoredRole
    name: str | None = Field(default=None, description="The author's name, if given.")
    content: str
    tool_calls: list[dict[str, Any]] | None
    client_message_id: str | None
    metadata: dict[str, Any] = Field(validation_alias=AliasChoices("metadata_", "metadata"))
    created_at: datetime
    label: str | None = Field(
        default=None, description="`#N` for the N-th human turn (what summary refs cite)."
    )


MESSAGES_APPENDED_EXAMPLE: dict[str, Any] = {
    "items": [
        {
            "id": "7c9e6679-7425-40de-944b-e07fc1f90ae7",
            "thread_id": "0f8fad5b-d9cb-469f-a165-70867728950e",
            "seq": 0,
            "role": "user",
            "content": "I'm flying to Lisbon next week.",
            "tool_calls": None,
            "client_message_id": "m-1",
            "metadata": {},
            "created_at": "2026-11-30T09:12:44Z",
            "label": "#1",
        }
    ],
    "duplicates": 0,
}


class MessagesAppended(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [MESSAGES_APPENDED_EXAMPLE]})

    items: list[MessageRead]
    duplicates: int = Field(description="Messages whose client_message_id was already stored.")


class MessagePage(BaseModel):
    items: list[MessageRead]
    next_cursor: str | None = None


class SummaryRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    sequence: int
    start_index: int = Field(description="First message position (seq) the pass compressed.")
    end_index: int = Field(description="Position after the last message it compressed.")
    message_ids: list[uuid.UUID]
    entries: list[dict[str, Any]] = Field(description="{question, answer, refs, message_ids}")
    tokens_before: int | None
    tokens_after: int | None
    model: str | None
    created_at: datetime


class SummaryList(BaseModel):
    items: list[SummaryRead]
    text: str = Field(description="All passes formatted for a prompt, oldest first.")


class SummariesDeleted(BaseModel):
    deleted: int


class ThreadDeleted(BaseModel):
    deleted: dict[str, int] = Field(
        description="Rows deleted per table: the thread, its messages, summaries and "
        "extraction cursor, and with `cascade=memories` the memories taken from it."
    )


class Summarization(BaseModel):
    enabled: bool
    reason: str | None = Field(default=None, description="Why summarization is off.")


class SummarizeResult(BaseModel):
    status: Literal["written", "not_due", "empty", "superseded"]
    summary: SummaryRead | None = None


class ThreadWindow(BaseModel):
    """What a prompt should carry for this thread: the summaries, then the raw recent turns."""

    summarization: Summarization
    summaries: list[SummaryRead]
    summary_text: str = Field(
        description="Formatted summaries for an <earlier_conversation> block."
    )
    start_index: int = Field(description="Position of the first raw message returned.")
    messages: list[MessageRead]
    truncated: bool = Field(
        default=False,
        description="Whether older raw messages of the window were left out to keep to "
        "`max_messages` (the newest are returned; GET …/messages pages through all of them).",
    )
