"""A stored message as a prompt carries it: one policy for every replay.

Messages are stored as sent: they are the user's record of the conversation. Whatever puts a
message into a prompt reads it through `MessageReplay`: the window endpoint (what a client's
prompt should carry), a context block's summaries and recent turns, the transcript a summary
pass sends to the chat model, and the messages an extraction pass shows the model (and the
search that picks the facts shown beside them). So one setting,
`MNEME_MESSAGE_SECRETS_ON_REPLAY`, decides for all of them: `mask` replaces every detected
secret with `[secret removed]`, in the message's text, its author's name, its tool calls and
its metadata (a string under a credential-named key whole); `keep` replays messages as sent.
The configured chat model is usually a hosted third-party service, so a prompt sent to it is
a replay like any other.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from service.config import Settings
from service.kit.secrets import mask_secrets_in, mask_secrets_memo
from service.threads.schemas import MessageRead


class StoredMessage(Protocol):
    """What a replay reads of a stored message."""

    @property
    def id(self) -> uuid.UUID: ...

    @property
    def seq(self) -> int: ...

    @property
    def role(self) -> str: ...

    @property
    def name(self) -> str | None: ...

    @property
    def content(self) -> str: ...

    @property
    def tool_calls(self) -> Any: ...


@dataclass(frozen=True, slots=True)
class ReplayedMessage:
    """A message as a prompt carries it (`MessageReplay.message`)."""

    id: uuid.UUID
    seq: int
    role: str
    content: str
    name: str | None = None
    tool_calls: Any = None


@dataclass(frozen=True, slots=True)
class MessageReplay:
    """The replay policy: `mask` (secrets replaced by a placeholder) or not (`keep`)."""

    mask: bool

    @classmethod
    def configured(cls, settings: Settings) -> MessageReplay:
        return cls(mask=settings.message_secrets_on_replay == "mask")

    def text(self, text: str) -> str:
        """A message's (or a summary's) text as replayed."""
        return mask_secrets_memo(text) if self.mask else text

    def value(self, value: Any) -> Any:
        """A message's JSON (tool calls, metadata) as replayed."""
        return mask_secrets_in(value) if self.mask else value

    def message(self, message: StoredMessage) -> ReplayedMessage:
        """The message as every prompt carries it: its text, author and tool calls."""
        return ReplayedMessage(
            id=message.id,
            seq=message.seq,
            role=message.role,
            content=self.text(message.content),
            name=None if message.name is None else self.text(message.name),
            tool_calls=self.value(message.tool_calls),
        )

    def read(self, message: MessageRead) -> MessageRead:
        """A message of the window endpoint as replayed: `message`, and its metadata, which
        the window returns too."""
        replayed = self.message(message)
        return message.model_copy(
            update={
                "name": replayed.name,
                "content": replayed.content,
                "tool_calls": replayed.tool_calls,
                "metadata": self.value(message.metadata),
            }
        )

    def summary_entries(self, entries: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """A summary's entries with their text (question, answer) as replayed: a pass that
        ran while replays kept secrets wrote what the model was sent into its entries."""
        return [
            {k: self.text(v) if isinstance(v, str) else v for k, v in entry.items()}
            for entry in entries
        ]
