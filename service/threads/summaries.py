"""Rolling thread summaries: store-anchored compression of older turns.

Vocabulary. A *human turn* is a `user` message plus every message after it up to the next
`user` message. Turns carry global labels `#1, #2, …` counted over the whole thread
(`human_turn_labels`); messages before the first user message carry none. A summary covers the
message window `[start_index, end_index)` (by `seq`) and stores the model's entries
`{question, answer, refs}`, where `refs` are the `#N` labels of the turns the entry comes from.
Every message of the thread is either in a summary's window or after the last one (raw, in the
prompt window): the first window starts at the thread's start, and a window's excerpt holds all
of its messages, whatever their role.

One pass (`summary_pass`; `summarize_thread` starts it again when another pass overtook it):

1. Read back the largest `end_index` of the thread's summaries (`last_end`; none yet → the
   thread's start). Turns starting at or after it are uncompressed.
2. Count the *complete* uncompressed turns: all of them, except a trailing turn that nobody has
   answered yet (no assistant or tool message after it). Appends arrive one request at a
   time, and summarising a question before its answer arrives would leave the entry without
   an answer.
3. Window = the largest multiple of K (`thread_summary_keep_recent`) of them, rounded down; none
   below K. K < 1 switches summaries off.
4. Excerpt: from the thread's start (or from `last_end`, so that replies appended after the
   previous pass are not skipped) up to the next human message after the window (or the end of
   the thread), every message: what comes before the first human turn (a greeting, an order
   confirmation the assistant opened with) and the system notes an application adds are part of
   the conversation too, and a summary that skipped them would lose them from the prompt.
5. Render it as JSON Lines, one line per turn: `{"id": "#N", "messages": [...]}` with tool calls
   as a field of their message, the messages before the thread's first human turn on the first
   turn's line, each message as replayed (`MessageReplay`: secrets masked unless configured
   not to, as in every prompt); ask the model once for entries under a strict JSON schema.
6. No entries → nothing is written. A model failure raises `LLMUnavailable` and writes nothing,
   so the same window is due again at the next trigger (or the job's retry).
7. Otherwise write the summary with the next sequence number (latest + 1, from 1), the window,
   the ids of the excerpt's messages, the entries with their refs resolved to message ids, and
   the token counts of the transcript (before) and of the formatted entries (after).

Deleting summaries heals: `last_end` falls back to the previous summary's end (or the thread's
start) and the next pass re-writes the earliest missing window.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from service.accounts.repository import AccountRepository
from service.config import Settings
from service.db import tenant_transaction
from service.jobs import JobHandler
from service.kit.admission import outside_the_gate
from service.kit.token_counting import count_tokens
from service.providers.llm import ChatModel
from service.threads.models import ThreadSummary
from service.threads.replay import MessageReplay, ReplayedMessage
from service.threads.schemas import HUMAN_ROLE
from service.threads.summary_repository import SummaryRepository

logger = logging.getLogger("mneme.threads.summaries")

ANSWER_ROLES = frozenset({"assistant", "tool"})

SUMMARY_SCHEMA_NAME = "thread_summary"

SUMMARY_SYSTEM_PROMPT = """\
You compress the older part of a conversation between a user and an AI assistant into \
question-and-answer notes. The notes replace those turns in the assistant's context, so keep \
everything needed to carry on the conversation.

The transcript is JSON Lines. Each line is one human turn: {"id": "#N", "messages": [...]}, \
where "#N" is the turn's label and "messages" holds the user's message followed by the \
assistant's and tools' replies (tool calls included). The first line of a conversation also \
holds, before the user's message, what was said before the user spoke; a "system" message is a \
note the application added to the conversation.

Answer with {"entries": [...]}, one entry per distinct thing the user asked or established, in \
conversation order:
- "question": what the user asked or wanted, understandable on its own.
- "answer": what was answered, decided or found, with the concrete facts, names, numbers and \
tool results needed later; say so when it was left unanswered.
- "refs": the "#N" labels of the turns the entry comes from, exactly as written in the \
transcript.
Keep what opening messages and system notes establish (an order number, a changed setting) \
under the turn they appear in. Merge turns that continue the same question. Skip greetings and \
small talk. Use the language of \
the conversation. Do not add anything the transcript does not say. If nothing is worth keeping, \
answer {"entries": []}."""

_REF = re.compile(r"^#?(\d+)$")


class TurnLike(Protocol):
    """What turn arithmetic needs of a message."""

    @property
    def seq(self) -> int: ...

    @property
    def role(self) -> str: ...


class SummaryLike(Protocol):
    """What prompt formatting and the prompt window need of a stored summary."""

    @property
    def sequence(self) -> int: ...

    @property
    def end_index(self) -> int: ...

    @property
    def entries(self) -> Sequence[Mapping[str, Any]]: ...


class SummaryEntryOutput(BaseModel):
    """One entry as the model writes it."""

    model_config = ConfigDict(extra="forbid")

    question: str
    answer: str
    refs: list[str]


class SummaryOutput(BaseModel):
    """The model's whole answer, as its strict JSON schema asks for it."""

    model_config = ConfigDict(extra="forbid")

    entries: list[SummaryEntryOutput]


@dataclass(frozen=True, slots=True)
class SummaryWindow:
    """The messages `[start_index, end_index)` (by seq) a pass compresses, and its turns."""

    start_index: int
    end_index: int
    first_turn: int
    last_turn: int

    @property
    def turn_count(self) -> int:
        return self.last_turn - self.first_turn + 1


SummaryPassStatus = Literal[
    "written", "not_due", "empty", "disabled", "unconfigured", "thread_not_found", "superseded"
]


@dataclass(frozen=True, slots=True)
class SummaryPassResult:
    """What one pass did.

    * `written`: `summary` is the new row.
    * `not_due`: fewer complete uncompressed turns than K (with `force`: none at all).
    * `empty`: the model found nothing worth keeping; nothing was written.
    * `disabled`: K < 1. `unconfigured`: no chat model.
    * `thread_not_found`: no such thread in the tenant (or it went away during the pass).
    * `superseded`: another pass wrote (or summaries were deleted) while the model was
      thinking, every time the pass started again (`SUPERSEDED_PASSES`); its result was
      dropped and the next trigger starts from the new state.
    """

    status: SummaryPassStatus
    window: SummaryWindow | None = None
    summary: ThreadSummary | None = None


def human_turn_labels(messages: Sequence[TurnLike], *, humans_before: int = 0) -> list[int]:
    """The global turn label N (`#N`) of each message; 0 before the thread's first human turn.

    `messages` is a consecutive run of the thread's messages in seq order and `humans_before`
    the number of user messages before that run (0 when the run starts the thread).
    """
    labels: list[int] = []
    current = humans_before
    for message in messages:
        if message.role == HUMAN_ROLE:
            current += 1
        labels.append(current)
    return labels


def compute_summary_window(
    messages: Sequence[TurnLike],
    *,
    humans_before: int,
    last_end: int | None,
    keep_recent: int,
    force: bool = False,
) -> SummaryWindow | None:
    """The window a pass would compress now, or None when no pass is due.

    `messages` holds at least every message with seq ≥ `last_end` (or the whole thread when
    `last_end` is None), in seq order; `humans_before` counts the user messages before
    `messages[0]`. `force` drops the multiple-of-K rule: every complete uncompressed turn is
    taken, even fewer than K. The window starts where the stored summaries end, or at the
    thread's start: what comes before the first human turn is in the first window.
    """
    if keep_recent < 1:
        return None
    start = 0 if last_end is None else last_end
    skipped = [message for message in messages if message.seq < start]
    run = [message for message in messages if message.seq >= start]
    if not run:
        return None
    labels = human_turn_labels(
        run, humans_before=humans_before + sum(m.role == HUMAN_ROLE for m in skipped)
    )
    humans = [index for index, message in enumerate(run) if message.role == HUMAN_ROLE]
    complete = len(humans)
    if humans and not any(message.role in ANSWER_ROLES for message in run[humans[-1] + 1 :]):
        complete -= 1
    take = complete if force else complete // keep_recent * keep_recent
    if take < 1:
        return None
    first, last = humans[0], humans[take - 1]
    end = run[humans[take]].seq if take < len(humans) else run[-1].seq + 1
    return SummaryWindow(
        start_index=start,
        end_index=end,
        first_turn=labels[first],
        last_turn=labels[last],
    )


def render_transcript(messages: Sequence[ReplayedMessage], labels: Sequence[int]) -> str:
    """The excerpt as JSON Lines: one `{"id": "#N", "messages": [...]}` line per turn. It takes
    the messages as replayed only: what goes to the model is what a prompt may carry."""
    lines = []
    for label, group in groupby(zip(labels, messages, strict=True), key=lambda pair: pair[0]):
        rendered = []
        for _, message in group:
            item: dict[str, Any] = {"role": message.role, "content": message.content}
            if message.tool_calls:
                item["tool_calls"] = message.tool_calls
            rendered.append(item)
        lines.append(json.dumps({"id": f"#{label}", "messages": rendered}, ensure_ascii=False))
    return "\n".join(lines)


def parse_ref(ref: str) -> int | None:
    """The turn number of a `#N` ref (a bare `N` is accepted too), or None."""
    match = _REF.match(ref.strip())
    return int(match.group(1)) if match else None


def resolve_entries(
    output: SummaryOutput, turn_message_ids: Mapping[int, Sequence[uuid.UUID]]
) -> list[dict[str, Any]]:
    """The entries to store: refs limited to turns of the excerpt (normalised to `#N`, in the
    model's order, without repeats) and resolved to those turns' message ids; entries with
    neither question nor answer are dropped."""
    entries: list[dict[str, Any]] = []
    for entry in output.entries:
        question, answer = entry.question.strip(), entry.answer.strip()
        if not question and not answer:
            continue
        turns: list[int] = []
        for ref in entry.refs:
            turn = parse_ref(ref)
            if turn is not None and turn in turn_message_ids and turn not in turns:
                turns.append(turn)
        entries.append(
            {
                "question": question,
                "answer": answer,
                "refs": [f"#{turn}" for turn in turns],
                "message_ids": [str(mid) for turn in turns for mid in turn_message_ids[turn]],
            }
        )
    return entries


def format_summary_entries(entries: Iterable[Mapping[str, Any]]) -> str:
    """One pass's entries as prompt text: `Q: … (#3, #4)` / `A: …` per entry, one per line
    pair. Malformed entries are skipped."""
    blocks = []
    for entry in entries:
        question, answer = entry.get("question"), entry.get("answer")
        if not isinstance(question, str) or not isinstance(answer, str):
            continue
        refs = [ref for ref in entry.get("refs") or [] if isinstance(ref, str)]
        cited = f" ({', '.join(refs)})" if refs else ""
        blocks.append(f"Q: {question}{cited}\nA: {answer}")
    return "\n".join(blocks)


def format_summaries_for_prompt(summaries: Iterable[SummaryLike]) -> str:
    """Every pass oldest first (by sequence), joined by a blank line so the model sees where
    one pass ends; "" without summaries."""
    passes = (
        format_summary_entries(summary.entries)
        for summary in sorted(summaries, key=lambda summary: summary.sequence)
    )
    return "\n\n".join(text for text in passes if text)


def window_start_index(
    summaries: Iterable[SummaryLike], messages: Sequence[TurnLike], buffer_recent_turns: int
) -> int:
    """The seq from which a prompt carries raw messages.

    Raw messages start right after the last summarised window, but never later than the
    `buffer_recent_turns`-th most recent human turn, so the latest turns are always verbatim.
    Without summaries everything is raw (0). `messages` is the thread in seq order (a suffix is
    enough if it holds the last `buffer_recent_turns` human turns).
    """
    ends = [summary.end_index for summary in summaries]
    if not ends:
        return 0
    start = max(ends)
    if messages:
        start = min(start, messages[-1].seq + 1)
    if buffer_recent_turns > 0:
        humans = [message.seq for message in messages if message.role == HUMAN_ROLE]
        if humans:
            start = min(start, humans[-min(buffer_recent_turns, len(humans))])
    return start


SUPERSEDED_PASSES = 3
"""How many times a pass starts when other passes keep writing before it (each time from where
the stored summaries then end)."""


async def summarize_thread(
    sessionmaker: async_sessionmaker[AsyncSession],
    chat_model: ChatModel | None,
    settings: Settings,
    tenant_id: str,
    thread_id: uuid.UUID,
    *,
    force: bool = False,
) -> SummaryPassResult:
    """Run a summary pass on the thread (`summary_pass`); one that another pass overtook
    starts again from where the stored summaries now end.

    Two passes of one thread run at once when turns are appended while one is waiting on the
    model: the later pass read more turns, and if the earlier one writes first, the later one's
    window is dropped. Its turns were due, and no further pass may be queued for them until the
    next append, so it starts again rather than leave them raw.
    """
    for _ in range(SUPERSEDED_PASSES):
        result = await summary_pass(
            sessionmaker, chat_model, settings, tenant_id, thread_id, force=force
        )
        if result.status != "superseded":
            break
    return result


async def summary_pass(
    sessionmaker: async_sessionmaker[AsyncSession],
    chat_model: ChatModel | None,
    settings: Settings,
    tenant_id: str,
    thread_id: uuid.UUID,
    *,
    force: bool = False,
) -> SummaryPassResult:
    """Run one summary pass on the thread (see the module docstring); safe to repeat, since a
    window is written at most once.

    `force` (the explicit "summarize now" command) skips the trigger's K gate and
    round-down: it compresses every complete turn not yet covered, however few. It keeps every
    other rule: it starts where the stored summaries end, leaves an unanswered trailing question
    raw, needs K ≥ 1 and a chat model, and writes nothing when nothing is uncovered.

    The model is called outside any transaction; the write re-checks, under a per-thread lock,
    that no other pass wrote meanwhile. Raises `LLMUnavailable` when the model fails.
    """
    keep_recent = settings.thread_summary_keep_recent
    if keep_recent < 1:
        return SummaryPassResult("disabled")
    if chat_model is None:
        return SummaryPassResult("unconfigured")

    async with tenant_transaction(sessionmaker, tenant_id) as session:
        repository = SummaryRepository(session, tenant_id)
        if await repository.thread_owner(thread_id) is None:
            return SummaryPassResult("thread_not_found")
        last_end = await repository.last_compressed_end(thread_id)
        start = 0 if last_end is None else last_end
        humans_before = await repository.count_human_messages_before(thread_id, start)
        tail = await repository.messages_from(thread_id, start)

    window = compute_summary_window(
        tail, humans_before=humans_before, last_end=last_end, keep_recent=keep_recent, force=force
    )
    if window is None:
        return SummaryPassResult("not_due")

    labels = human_turn_labels(tail, humans_before=humans_before)
    # The messages before the first human turn carry no label of their own (0): the model reads
    # them on the first turn's line, and an entry citing that turn cites them too.
    excerpt = [
        (label or window.first_turn, message)
        for label, message in zip(labels, tail, strict=True)
        if window.start_index <= message.seq < window.end_index
    ]
    replay = MessageReplay.configured(settings)
    transcript = render_transcript(
        [replay.message(message) for _, message in excerpt], [label for label, _ in excerpt]
    )
    turn_message_ids: dict[int, list[uuid.UUID]] = {}
    for label, message in excerpt:
        turn_message_ids.setdefault(label, []).append(message.id)

    # Between two transactions: in a request (a summary asked for now), no work of the
    # process's either, so its place in the admission gate is free meanwhile.
    async with outside_the_gate():
        output = await chat_model.complete_json(
            system=SUMMARY_SYSTEM_PROMPT,
            user=transcript,
            output=SummaryOutput,
            schema_name=SUMMARY_SCHEMA_NAME,
        )
    entries = resolve_entries(output, turn_message_ids)
    if not entries:
        logger.info(
            "summary of thread %s turns #%d-#%d: nothing to keep",
            thread_id,
            window.first_turn,
            window.last_turn,
        )
        return SummaryPassResult("empty", window=window)

    async with tenant_transaction(sessionmaker, tenant_id) as session:
        repository = SummaryRepository(session, tenant_id)
        user_id = await repository.thread_owner(thread_id)
        if user_id is None:
            return SummaryPassResult("thread_not_found", window=window)
        # A write to the user's data: after the user's write lock, as every such write.
        await AccountRepository(session, tenant_id).hold_user_writes(user_id)
        await repository.lock_writers(thread_id)
        # Held to the commit: a deletion under way is waited for and then seen here (the summary
        # would name a thread that is gone), and one that comes later waits for this pass.
        if await repository.thread_owner(thread_id, hold=True) is None:
            return SummaryPassResult("thread_not_found", window=window)
        if await repository.last_compressed_end(thread_id) != last_end:
            return SummaryPassResult("superseded", window=window)
        summary = await repository.add_summary(
            ThreadSummary(
                tenant_id=tenant_id,
                thread_id=thread_id,
                sequence=(await repository.latest_sequence(thread_id) or 0) + 1,
                start_index=window.start_index,
                end_index=window.end_index,
                message_ids=[message.id for _, message in excerpt],
                entries=entries,
                tokens_before=count_tokens(transcript),
                tokens_after=count_tokens(format_summary_entries(entries)),
                model=chat_model.model_name,
            )
        )
    return SummaryPassResult("written", window=window, summary=summary)


def thread_summary_job(
    sessionmaker: async_sessionmaker[AsyncSession],
    chat_model: ChatModel | None,
    settings: Settings,
) -> JobHandler:
    """The handler of `THREAD_SUMMARY_JOB`: one (non-forced) pass; a model failure raises, so
    the job is retried with backoff."""

    async def handle(payload: Mapping[str, str]) -> None:
        thread_id = uuid.UUID(payload["thread_id"])
        result = await summarize_thread(
            sessionmaker, chat_model, settings, payload["tenant_id"], thread_id
        )
        logger.debug("summary pass on thread %s: %s", thread_id, result.status)

    return handle
