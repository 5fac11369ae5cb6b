"""Thread use cases: conversations and their ordered, never-lost messages."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from service.accounts.service import AccountService
from service.auth.owner import Owner
from service.auth.principal import Principal
from service.config import Settings
from service.kit.pagination import (
    Page,
    decode_newest_first_cursor,
    decode_position_cursor,
    encode_cursor,
    newest_first_cursor,
)
from service.kit.resource_headers import (
    entity_tag,
    require_preconditions,
)
from service.kit.secrets import refuse_secrets
from service.kit.types import POSITION_MAX
from service.memories.service import MemoryService
from service.providers.llm import ChatModel
from service.threads.errors import ThreadFull, ThreadNotFound
from service.threads.hooks import Appended, AppendListener
from service.threads.models import Message, Thread
from service.threads.replay import MessageReplay, ReplayedMessage
from service.threads.repository import NO_LATER_SEQ, ThreadRepository
from service.threads.schemas import (
    HUMAN_ROLE,
    MessageIn,
    MessagePage,
    MessageRead,
    MessagesAppended,
    SummariesDeleted,
    Summarization,
    SummaryList,
    SummaryRead,
    ThreadCreate,
    ThreadDeleted,
    ThreadRead,
    ThreadUpdate,
    ThreadWindow,
)
from service.threads.summaries import (
    SummaryLike,
    SummaryPassResult,
    format_summaries_for_prompt,
    summarize_thread,
    window_start_index,
)

# A thread's title and metadata are written deliberately, like a memory's metadata, and kept
# as they are: they follow the durable-write policy (422 `SECRET_REFUSED`). So do a message's
# author name (a memory's speaker is refused alike) and metadata: the application sets them,
# as it sets a thread's. A message's text and tool calls do not: they are the conversation
# itself, the user's record, stored as sent and masked when replayed (`MessageReplay`).
THREAD_SECRET_FIELDS = ("title", "metadata")
MESSAGE_SECRET_FIELDS = ("name", "metadata")

CONTEXT_PAGE = 64
"""How many of a thread's messages a context block reads at a time, newest first: more than a
default block's budget shows of a chat's short turns, so one page is usually all it reads."""


def refuse_thread_secrets(values: dict[str, Any]) -> None:
    """Refuse a thread's title or metadata holding a secret; `values` by field name."""
    for field in THREAD_SECRET_FIELDS:
        refuse_secrets(values.get(field), ("body", field))


def refuse_message_secrets(messages: Sequence[MessageIn]) -> None:
    """Refuse an append of which a message's author name or metadata holds a secret."""
    for index, message in enumerate(messages):
        for field in MESSAGE_SECRET_FIELDS:
            refuse_secrets(getattr(message, field), ("body", "messages", index, field))


class Summarizer:
    """Runs a summary pass now (POST …/summarize) with the service's model and settings."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        chat_model: ChatModel | None,
        settings: Settings,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._chat_model = chat_model
        self._settings = settings
        self.status = summarization_status(settings, chat_model)

    async def run(self, tenant_id: str, thread_id: uuid.UUID) -> SummaryPassResult:
        return await summarize_thread(
            self._sessionmaker, self._chat_model, self._settings, tenant_id, thread_id, force=True
        )


def summarization_status(settings: Settings, chat_model: ChatModel | None) -> Summarization:
    if settings.thread_summary_keep_recent < 1:
        return Summarization(enabled=False, reason="MNEME_THREAD_SUMMARY_KEEP_RECENT is below 1")
    if chat_model is None:
        return Summarization(enabled=False, reason="no LLM configured (MNEME_LLM_*)")
    return Summarization(enabled=True)


@dataclass(frozen=True)
class ReplayedSummary:
    sequence: int
    entries: list[dict[str, Any]]


@dataclass(frozen=True)
class ContextWindow:
    """A thread's prompt window as a context block replays it: summaries oldest first, then
    raw messages, as replayed (`MessageReplay`)."""

    summarization_enabled: bool
    summaries: list[ReplayedSummary]
    messages: list[ReplayedMessage]


def thread_etag(thread: Thread | ThreadRead) -> str:
    """A thread's entity tag; appending messages changes it (its `last_message_at` moves)."""
    read = thread if isinstance(thread, ThreadRead) else ThreadRead.model_validate(thread)
    return entity_tag(read)


@dataclass(frozen=True)
class ThreadSetup:
    """What every thread service of a process shares, built once at start-up: the summarizer,
    the listeners an append tells (in its transaction), and how messages are replayed."""

    summarizer: Summarizer
    listeners: tuple[AppendListener, ...]
    # Messages are stored exactly as sent (they are the user's record of the conversation);
    # a prompt window replays them as `MessageReplay` says.
    replay: MessageReplay


class ThreadService:
    def __init__(
        self,
        repository: ThreadRepository,
        accounts: AccountService,
        memories: MemoryService,
        principal: Principal,
        setup: ThreadSetup,
    ) -> None:
        self._repository = repository
        self._accounts = accounts
        self._memories = memories
        self._tenant_id = principal.tenant_id
        # Follow-up work may write org memory only for an append by an admin.
        self._appended_by_admin = principal.is_admin
        self._summarizer = setup.summarizer
        self._listeners = setup.listeners
        self._replay = setup.replay

    async def create(self, user_id: str, request: ThreadCreate) -> ThreadRead:
        refuse_thread_secrets({"title": request.title, "metadata": request.metadata})
        await self._accounts.hold_user_writes(user_id)
        await self._accounts.ensure_user(user_id)
        thread = await self._repository.add(
            Thread(
                tenant_id=self._tenant_id,
                user_id=user_id,
                title=request.title,
                metadata_=request.metadata,
            )
        )
        return ThreadRead.model_validate(thread)

    async def load(
        self, user_id: str, thread_id: uuid.UUID, *, lock: bool = False, exclusive: bool = False
    ) -> Thread:
        """The user's thread (404 otherwise); locked as `ThreadRepository.get` says."""
        thread = await self._repository.get(user_id, thread_id, lock=lock, exclusive=exclusive)
        if thread is None:
            raise ThreadNotFound(f"No thread {thread_id} here.")
        return thread

    async def get(self, user_id: str, thread_id: uuid.UUID) -> ThreadRead:
        return ThreadRead.model_validate(await self.load(user_id, thread_id))

    async def list_page(self, user_id: str, *, cursor: str | None, limit: int) -> Page[ThreadRead]:
        # Most recent activity first: the cursor holds (updated_at, id).
        threads = await self._repository.list_page(
            user_id, after=decode_newest_first_cursor(cursor), limit=limit + 1
        )
        return Page[ThreadRead](
            items=[ThreadRead.model_validate(t) for t in threads[:limit]],
            next_cursor=newest_first_cursor(threads, limit, time_field="updated_at"),
        )

    async def update(
        self,
        user_id: str,
        thread_id: uuid.UUID,
        change: ThreadUpdate,
        *,
        if_match: str | None = None,
        if_none_match: str | None = None,
    ) -> ThreadRead:
        """Rename or re-tag a thread under its row lock; with `if_match`, only if it is still
        in that state, and with `if_none_match`, only if it is not (`*`: never)."""
        refuse_thread_secrets({"title": change.title, "metadata": change.metadata})
        await self._accounts.hold_user_writes(user_id)
        thread = await self.load(user_id, thread_id, lock=True)
        self._require_preconditions(if_match, if_none_match, thread)
        values: dict[str, Any] = {}
        if "title" in change.model_fields_set:
            values["title"] = change.title
        if "metadata" in change.model_fields_set:
            values["metadata_"] = change.metadata or {}
        return ThreadRead.model_validate(await self._repository.update(thread, values))

    async def delete(
        self,
        user_id: str,
        thread_id: uuid.UUID,
        *,
        with_memories: bool,
        if_match: str | None = None,
        if_none_match: str | None = None,
    ) -> ThreadDeleted:
        await self._accounts.hold_user_writes(user_id)
        # Before the memories it forgets are read: a memory citing the thread that is being
        # written commits first, and one written later finds no thread.
        thread = await self.load(user_id, thread_id, exclusive=True)
        self._require_preconditions(if_match, if_none_match, thread)
        forgotten = (
            await self._memories.forget_thread(Owner.user(user_id), thread_id)
            if with_memories
            else 0
        )
        deleted = await self._repository.delete(thread_id)
        if with_memories:
            deleted["memory"] = forgotten
        return ThreadDeleted(deleted=deleted)

    @staticmethod
    def _require_preconditions(
        if_match: str | None, if_none_match: str | None, thread: Thread
    ) -> None:
        require_preconditions(
            if_match,
            if_none_match,
            thread_etag(thread),
            changed="The thread changed since you read it; read it again and retry.",
            unchanged="The thread exists in the state If-None-Match names; nothing changed.",
        )

    async def append(
        self, user_id: str, thread_id: uuid.UUID, messages: list[MessageIn]
    ) -> MessagesAppended:
        """Store messages in order, in this request's transaction, before anything else.

        The thread row lock serialises appends, so positions stay gap-free, and times grow
        with them (`ThreadRepository.append_messages`). A message whose client_message_id is
        already stored is not stored again: the stored one comes back.
        """
        refuse_message_secrets(messages)
        await self._accounts.hold_user_writes(user_id)
        thread = await self.load(user_id, thread_id, lock=True)
        client_ids = [m.client_message_id for m in messages if m.client_message_id]
        known = await self._repository.messages_by_client_ids(thread_id, client_ids)
        next_seq = await self._repository.next_seq(thread_id)
        rows: list[dict[str, Any]] = []
        # Each message's answer: the index of its row among those inserted, or the client id
        # of the message already stored (before, or earlier in this batch) that stands for it.
        answers: list[int | str] = []
        inserted_by_client_id: dict[str, int] = {}
        for message in messages:
            client_id = message.client_message_id
            if client_id is not None and (client_id in known or client_id in inserted_by_client_id):
                answers.append(client_id)
                continue
            if client_id is not None:
                inserted_by_client_id[client_id] = len(rows)
            answers.append(len(rows))
            rows.append(
                {
                    "thread_id": thread_id,
                    "user_id": user_id,
                    "seq": next_seq + len(rows),
                    "role": message.role,
                    "name": message.name,
                    "content": message.content,
                    "tool_calls": message.tool_calls,
                    "client_message_id": client_id,
                    "metadata_": message.metadata,
                }
            )
        if rows and rows[-1]["seq"] > POSITION_MAX:
            raise ThreadFull(
                f"The thread holds positions up to {POSITION_MAX} and its last message is at "
                f"{next_seq - 1}: it takes no more messages. Continue in a new thread."
            )
        inserted = await self._repository.append_messages(thread, rows) if rows else []
        stored = {**known, **{cid: inserted[i] for cid, i in inserted_by_client_id.items()}}
        result = [
            inserted[answer] if isinstance(answer, int) else stored[answer] for answer in answers
        ]
        if inserted:
            appended = Appended(self._tenant_id, thread_id, by_admin=self._appended_by_admin)
            for listener in self._listeners:
                await listener.messages_appended(self._repository.session, appended)
        return MessagesAppended(
            items=await self._with_labels(thread_id, result),
            duplicates=len(messages) - len(inserted),
        )

    async def messages(
        self,
        user_id: str,
        thread_id: uuid.UUID,
        *,
        cursor: str | None,
        limit: int,
        labels: list[int] | None,
    ) -> MessagePage:
        await self.load(user_id, thread_id)
        if labels:
            turns = await self._repository.messages_of_turns(thread_id, labels)
            return MessagePage(items=await self._with_labels(thread_id, turns))
        after_seq = decode_position_cursor(cursor)
        rows = await self._repository.list_messages(thread_id, after_seq=after_seq, limit=limit + 1)
        next_cursor = encode_cursor([rows[limit - 1].seq]) if len(rows) > limit else None
        return MessagePage(
            items=await self._with_labels(thread_id, rows[:limit]), next_cursor=next_cursor
        )

    # --- summaries ------------------------------------------------------------------------------

    async def summaries(self, user_id: str, thread_id: uuid.UUID) -> SummaryList:
        await self.load(user_id, thread_id)
        summaries = await self._repository.summaries(thread_id)
        # The entries are the stored record; `text` is rendered for a prompt, so it is replayed
        # as the window's is.
        return SummaryList(
            items=[SummaryRead.model_validate(s) for s in summaries],
            text=self._replay.text(format_summaries_for_prompt(summaries)),
        )

    async def delete_summaries(self, user_id: str, thread_id: uuid.UUID) -> SummariesDeleted:
        """Forget the summaries; the next pass re-writes them from the messages."""
        await self._accounts.hold_user_writes(user_id)
        # A summary pass writing meanwhile commits first (and its summary goes too), or waits
        # and then finds the summaries it followed gone (superseded).
        await self.load(user_id, thread_id, exclusive=True)
        return SummariesDeleted(deleted=await self._repository.delete_summaries(thread_id))

    async def window(
        self, user_id: str, thread_id: uuid.UUID, buffer_turns: int, *, max_messages: int
    ) -> ThreadWindow:
        """Summaries oldest first, then the raw messages after the last summarised window,
        always keeping the `buffer_turns` most recent human turns raw; of those, the newest
        `max_messages` (read newest first, so a long thread without summaries costs what is
        returned, not its length)."""
        await self.load(user_id, thread_id)
        summaries = await self._repository.summaries(thread_id)
        first_needed = await self._first_needed(thread_id, summaries, buffer_turns)
        newest_first = await self._repository.newest_messages_from(
            thread_id, first_needed, limit=max_messages + 1
        )
        truncated = len(newest_first) > max_messages
        raw = newest_first[:max_messages][::-1]
        # Read whole, the window starts where `window_start_index` says; cut, at the oldest
        # message kept (every message from `first_needed` on is in the window).
        start = raw[0].seq if truncated else window_start_index(summaries, raw, buffer_turns)
        replay = self._replay
        return ThreadWindow(
            summarization=self._summarizer.status,
            summaries=[
                SummaryRead.model_validate(s).model_copy(
                    update={"entries": replay.summary_entries(s.entries)}
                )
                for s in summaries
            ],
            summary_text=replay.text(format_summaries_for_prompt(summaries)),
            start_index=start,
            messages=[
                replay.read(m)
                for m in await self._with_labels(thread_id, [m for m in raw if m.seq >= start])
            ],
            truncated=truncated,
        )

    async def context_window(
        self,
        user_id: str,
        thread_id: uuid.UUID,
        buffer_turns: int,
        *,
        enough: Callable[[Sequence[ReplayedMessage]], bool] = lambda newest_first: False,
    ) -> ContextWindow:
        """The same window, as the context block needs it: no turn labels, no rendered text.

        Its raw messages are read newest first, `CONTEXT_PAGE` at a time, until `enough` holds
        for those read (newest first) or the window's start is reached: a block that can show
        only the latest turns of a long conversation does not read, mask and count all of it.
        With summaries, reading also goes on until the last `buffer_turns` human turns are
        read, which decide where the window starts."""
        if not await self._repository.is_users(user_id, thread_id):
            raise ThreadNotFound(f"No thread {thread_id} here.")
        summaries = await self._repository.summary_rows(thread_id)
        first_needed = await self._first_needed(thread_id, summaries, buffer_turns)
        replay = self._replay
        newest_first: list[ReplayedMessage] = []
        humans = 0
        before = NO_LATER_SEQ
        while True:
            page = await self._repository.newest_messages(
                thread_id, from_seq=first_needed, before_seq=before, page=CONTEXT_PAGE
            )
            for row in page:
                # A block carries a message's role and text only.
                newest_first.append(
                    ReplayedMessage(
                        id=row["id"],
                        seq=row["seq"],
                        role=row["role"],
                        content=replay.text(row["content"]),
                    )
                )
                humans += row["role"] == HUMAN_ROLE
            if len(page) < CONTEXT_PAGE:
                break
            if enough(newest_first) and (not summaries or humans >= buffer_turns):
                break
            before = page[-1]["seq"]
        messages = newest_first[::-1]
        start = window_start_index(summaries, messages, buffer_turns)
        return ContextWindow(
            summarization_enabled=self._summarizer.status.enabled,
            summaries=[
                ReplayedSummary(s.sequence, replay.summary_entries(s.entries)) for s in summaries
            ],
            messages=[message for message in messages if message.seq >= start],
        )

    async def _first_needed(
        self, thread_id: uuid.UUID, summaries: Sequence[SummaryLike], buffer_turns: int
    ) -> int:
        """The first position a window of the thread may start at: after its last summarised
        window, but no later than its `buffer_turns`-th most recent human turn; 0 without
        summaries (`window_start_index` decides within the messages from there)."""
        if not summaries:
            return 0
        first_needed = max(s.end_index for s in summaries)
        if buffer_turns > 0:
            nth_human = await self._repository.nth_latest_human_seq(thread_id, buffer_turns)
            first_needed = min(first_needed, 0 if nth_human is None else nth_human)
        return first_needed

    async def _with_labels(
        self, thread_id: uuid.UUID, messages: list[Message]
    ) -> list[MessageRead]:
        labels = await self._repository.labels_for(
            thread_id, [m.seq for m in messages if m.role == "user"]
        )
        return [
            MessageRead.model_validate(m).model_copy(
                update={"label": f"#{labels[m.id]}" if m.id in labels else None}
            )
            for m in messages
        ]
