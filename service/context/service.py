"""The context block: what an agent puts in its prompt before each model call.

Sections, in priority order: organization memory, the user's profile, procedural
instructions (the user's slot over the org's), relevant facts, episodic hints and — with a
thread — its summaries and recent raw turns; the thread's newest turn, what the next model call
answers, before all of them. The memory sections' candidates come from one
fusion statement (one query embedding, each section ranked on its own, then MMR per section),
then `budget.fit` chooses whole items within the token budget. Nothing here writes.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, cast

from opentelemetry import trace

from service.auth.owner import Owner
from service.context.budget import Candidate, SectionDraft, fit, room_alone
from service.context.schemas import (
    ContextItem,
    ContextRequest,
    ContextResponse,
    ContextSection,
    SectionName,
)
from service.context.shortening import shortened
from service.context.telemetry import record_context_sections
from service.kit.token_counting import count_tokens_memo
from service.kit.types import visible_text
from service.memories.models import normalise_text
from service.memories.schemas import ComponentScores, SearchRequest
from service.memories.search import MemorySearch, PendingVector, SectionHits, Spare
from service.memories.service import MemoryService
from service.memories.slots import PROCEDURE_SLOTS
from service.observability import traced, tracer
from service.profile.service import ProfileService
from service.threads.replay import ReplayedMessage
from service.threads.schemas import HUMAN_ROLE
from service.threads.service import ContextWindow, ThreadService
from service.threads.summaries import format_summary_entries

HEADER = (
    "You have long-term memory about this user and earlier conversations. Use it when it is "
    "relevant; do not mention it unless asked, and prefer what the user says now over it."
)

# Share of the budget each section may claim (leftovers flow to later sections).
SECTION_WEIGHTS: dict[SectionName, float] = {
    "org": 1.0,
    "profile": 1.0,
    "procedures": 1.0,
    "facts": 2.0,
    "episodes": 1.5,
    "thread": 2.0,
    "recent": 3.0,
}
TITLES: dict[SectionName, str] = {
    "org": "Organization",
    "profile": "User profile",
    "procedures": "Instructions",
    "facts": "Relevant facts about the user",
    "episodes": "Earlier episodes",
    "thread": "Earlier in this conversation",
    "recent": "Recent messages",
}
# The share of the block's budget a turn is shown in at most, shortened when longer: one pasted
# log or diary must neither push everything else out of the block nor be passed over.
TURN_SHARE = 0.5
# Bullets for facts, en dashes for episodes, so the model sees the difference.
EPISODE_DASH = "\u2013"
MemorySectionName = Literal["org", "facts", "episodes"]
# The sections made of searched memories: the scopes and kinds each searches. They select
# disjoint memories, so one fusion statement ranks all three.
MEMORY_SECTIONS: dict[MemorySectionName, tuple[list[str], list[str]]] = {
    "org": (["org"], ["semantic"]),
    "facts": (["user"], ["semantic"]),
    "episodes": (["user"], ["episodic"]),
}
SLOT_TITLES = {
    "style": "Style",
    "workflow": "Workflow",
    "safety": "Safety",
    "task_policies": "Task policies",
}


class ContextItemSource:
    """What a candidate line stands for, kept for the structured response."""

    def __init__(
        self,
        id: str | None,
        kind: str,
        text: str,
        scores: ComponentScores | None = None,
        *,
        spare: Spare | None = None,
    ) -> None:
        self.id = id
        self.kind = kind
        self.text = text
        self._scores = scores
        self._spare = spare

    @property
    def scores(self) -> ComponentScores | None:
        # A spare's scores are built only when it is shown.
        return self._spare.scores if self._spare is not None else self._scores


def needs_question_vector(request: ContextRequest) -> bool:
    """Whether the block has a memory section, which is ranked by the question's vector."""
    return bool(set(request.include) & MEMORY_SECTIONS.keys())


def block_question(request: ContextRequest) -> str | None:
    """The question a block embeds (None: a block without memory sections needs no vector)."""
    return request.query if needs_question_vector(request) else None


@dataclass(frozen=True, slots=True)
class _Retrieved:
    """The sections a block may show, drafted from what was read, before the budget
    chooses; and whether the thread (if any) is summarized."""

    drafts: list[SectionDraft[ContextItemSource]]
    summarization: Literal["on", "off"] | None


def section_limits(request: ContextRequest) -> dict[MemorySectionName, int]:
    """How many memories each memory section of `request`'s block may show."""
    return {"org": request.k_org, "facts": request.k_user, "episodes": request.k_episodic}


def memory_section_searches(
    request: ContextRequest,
) -> list[tuple[MemorySectionName, SearchRequest]]:
    """The searches a context block runs for its memory sections (those it includes and may
    show any of), in one statement, in `MEMORY_SECTIONS`' order."""
    lifecycles = ["confirmed", "proposed"] if request.include_proposed else ["confirmed"]
    limits = section_limits(request)
    return [
        (
            name,
            SearchRequest.model_validate(
                {
                    "query": request.query,
                    "scopes": MEMORY_SECTIONS[name][0],
                    "kinds": MEMORY_SECTIONS[name][1],
                    "lifecycles": lifecycles,
                    "limit": limits[name],
                    "mmr_lambda": request.mmr_lambda,
                }
            ),
        )
        for name in MEMORY_SECTIONS
        if name in request.include and limits[name]
    ]


class ContextBuilder:
    def __init__(
        self,
        search: MemorySearch,
        memories: MemoryService,
        profiles: ProfileService,
        threads: ThreadService,
        default_budget: int,
        buffer_recent_turns: int,
    ) -> None:
        self._search_service = search
        self._memories = memories
        self._profiles = profiles
        self._threads = threads
        self._default_budget = default_budget
        self._buffer_recent_turns = buffer_recent_turns

    @traced("context.build")
    async def build(
        self,
        user_id: str,
        request: ContextRequest,
        *,
        embedding_question: PendingVector | None = None,
        last_database_work: bool = False,
    ) -> ContextResponse:
        """The block for `request`; `embedding_question` is its question's vector already on
        its way (`question_on_its_way` of `block_question`), else it is embedded here.
        `last_database_work`: the caller reads and writes nothing after the block, so its
        transaction ends once the block has read all it shows (`MemorySearch.search`)."""
        with tracer.start_as_current_span("context.retrieve"):
            retrieved = await self._retrieve(
                user_id, request, embedding_question, last_database_work
            )
        return _assemble(request, retrieved, request.budget_tokens or self._default_budget)

    async def _retrieve(
        self,
        user_id: str,
        request: ContextRequest,
        embedding_question: PendingVector | None,
        last_database_work: bool,
    ) -> _Retrieved:
        """Read everything the included sections show and draft each section (all its
        candidates, before the budget chooses)."""
        wanted = set(request.include)
        drafts: list[SectionDraft[ContextItemSource]] = []
        summarization: Literal["on", "off"] | None = None
        # The question is embedded (in the embedder's thread, or by a remote service) while
        # the reads that do not need its vector run.
        embedding = embedding_question
        if embedding is None and needs_question_vector(request):
            embedding = asyncio.ensure_future(self._search_service.embed_query(request.query))
        try:
            window: ContextWindow | None = None
            turns: list[list[ReplayedMessage]] = []
            if request.thread_id is not None:
                window, turns = await self._thread_window(
                    user_id, request, request.thread_id, showing_turns="recent" in wanted
                )
                summarization = "on" if window.summarization_enabled else "off"
            profile_owners = [
                owner
                for section, owner in (("org", Owner.org()), ("profile", Owner.user(user_id)))
                if section in wanted
            ]
            profiles = (
                await self._profiles.merged_documents(profile_owners) if profile_owners else {}
            )
            procedures = await self._procedures(user_id) if "procedures" in wanted else None
            query_embedding = await embedding if embedding is not None else None
        finally:
            if embedding is not None and not embedding.done():
                embedding.cancel()
        offered = [message for turn in turns for message in turn]
        # Messages the block shows verbatim: a memory made of them alone would say it twice.
        # A shortened message is not one of them: what it leaves out (the middle of a pasted
        # diary) is found only through the memories drawn from it.
        said = {message.id: message.content for message in window.messages} if window else {}
        verbatim = [message for message in offered if said.get(message.id) == message.content]
        shown_messages = {message.id for message in verbatim}
        # The memories are read last: the block reads nothing after them.
        hits = await self._memory_hits(
            user_id, request, query_embedding, shown_messages, last_database_work
        )
        spares = _distinct_spares(hits)
        if "org" in wanted:
            drafts.append(_org_section(profiles[Owner.org()], hits["org"], spares["org"]))
        if "profile" in wanted:
            drafts.append(_profile_section(profiles[Owner.user(user_id)]))
        if procedures is not None:
            drafts.append(procedures)
        if "facts" in wanted:
            drafts.append(_hits_section("facts", hits["facts"], spares["facts"], "•"))
        if "episodes" in wanted:
            drafts.append(
                _hits_section("episodes", hits["episodes"], spares["episodes"], EPISODE_DASH)
            )
        if window is not None:
            if "thread" in wanted:
                drafts.append(_summary_section(window, verbatim))
            if "recent" in wanted:
                read = sum(1 for message in window.messages if _is_shown(message))
                drafts.append(_recent_section(turns, left_out=read - len(offered)))
        return _Retrieved(drafts, summarization)

    async def _thread_window(
        self, user_id: str, request: ContextRequest, thread_id: uuid.UUID, *, showing_turns: bool
    ) -> tuple[ContextWindow, list[list[ReplayedMessage]]]:
        """The thread's window, read only as far back as the block could show its turns, and
        the turns the recent section offers (`_offered_turns`; none when the block does not
        show them)."""
        budget = request.budget_tokens or self._default_budget

        def count(text: str) -> int:
            return count_tokens_memo(text, request.encoding)

        def enough(newest_first: Sequence[ReplayedMessage]) -> bool:
            return (
                not showing_turns
                or _offered_turns(newest_first, budget, count, request.encoding)[1]
            )

        window = await self._threads.context_window(
            user_id, thread_id, self._buffer_recent_turns, enough=enough
        )
        if not showing_turns:
            return window, []
        return window, _offered_turns(window.messages[::-1], budget, count, request.encoding)[0]

    async def _memory_hits(
        self,
        user_id: str,
        request: ContextRequest,
        query_embedding: list[float] | None,
        shown_messages: set[uuid.UUID],
        last_database_work: bool,
    ) -> dict[MemorySectionName, SectionHits]:
        """The best memories of each memory section the request includes, and its spares (the
        candidates after them, for a budget that passes over a memory too long for it), from
        one statement.

        Episodes leave out those drawn from `shown_messages` alone (a thread's turns stored as
        memories, when the block already carries the turns): in the statement, so the
        section's ranking and its MMR choose among the episodes it can show. A memory that
        says what a memory of an earlier section says (`normalise_text`) is left out of the
        later section the same way (`MemorySearch.search_sections`' `shown_texts`): the
        sections' order decides which keeps it, and the block never pays for one text twice."""
        sections = memory_section_searches(request)
        found = (
            await self._search_service.search_sections(
                Owner.user(user_id),
                [search for _, search in sections],
                query_embedding=query_embedding,
                not_only_of_messages=[
                    shown_messages if name == "episodes" and shown_messages else None
                    for name, _ in sections
                ],
                # No memory is shown before these sections; each leaves out what those before
                # it show.
                shown_texts=(),
                last_database_work=last_database_work,
            )
            if sections
            else []
        )
        hits: dict[MemorySectionName, SectionHits] = {
            name: SectionHits([], []) for name in MEMORY_SECTIONS
        }
        hits.update(
            (name, section_hits) for (name, _), section_hits in zip(sections, found, strict=True)
        )
        return hits

    async def _procedures(self, user_id: str) -> SectionDraft[ContextItemSource]:
        own, org = await self._memories.user_and_org_procedures(Owner.user(user_id))
        candidates: list[Candidate[ContextItemSource]] = []
        for index, slot in enumerate(PROCEDURE_SLOTS):
            chosen = getattr(own, slot) or getattr(org, slot)
            if chosen is None:
                continue
            text = f"{SLOT_TITLES[slot]}: {chosen.text}"
            candidates.append(
                Candidate(
                    f"- {text}",
                    ContextItemSource(str(chosen.memory_id), "procedural", text),
                    render_key=index,
                )
            )
        return SectionDraft(
            "procedures", TITLES["procedures"], SECTION_WEIGHTS["procedures"], candidates
        )


def _assemble(request: ContextRequest, retrieved: _Retrieved, budget: int) -> ContextResponse:
    """Choose whole items of the drafted sections within the token budget and render the
    block, its structure or both."""

    def count(text: str) -> int:
        return count_tokens_memo(text, request.encoding)

    drafts = retrieved.drafts
    with tracer.start_as_current_span("context.assemble") as span:
        text = fit(HEADER, drafts, budget, count)
        token_count = count(text) if text else 0
        span.set_attribute("mneme.context.tokens", token_count)
        span.set_attribute("mneme.context.budget", budget)

    sections = [
        ContextSection(
            # Drafts are only ever built with section names; pydantic checks it again.
            name=cast(SectionName, draft.name),
            title=draft.title,
            items=[
                ContextItem(
                    id=c.item.id,
                    kind=c.item.kind,
                    text=c.item.text,
                    tokens=count(c.line),
                    scores=c.item.scores,
                )
                for c in sorted(draft.chosen, key=lambda c: c.render_key)
            ],
            omitted=draft.omitted,
        )
        for draft in drafts
        if draft.chosen
    ]
    omitted = {draft.name: draft.omitted for draft in drafts if draft.omitted}
    record_context_sections(
        trace.get_current_span(), sections, omitted, token_count=token_count, budget=budget
    )
    return ContextResponse(
        text=text if request.format in ("text", "both") else None,
        sections=sections if request.format in ("json", "both") else None,
        token_count=token_count,
        budget_tokens=budget,
        encoding=request.encoding,
        omitted=omitted,
        summarization=retrieved.summarization,
    )


def _org_section(
    org_profile: dict[str, Any], found: SectionHits, spares: list[Spare]
) -> SectionDraft[ContextItemSource]:
    candidates: list[Candidate[ContextItemSource]] = []
    for key, value in org_profile.items():
        text = f"{key}: {_compact(value)}"
        candidates.append(Candidate(f"• {text}", ContextItemSource(None, "profile", text)))
    candidates.extend(_hit_candidates(found, spares, "•", offset=len(candidates)))
    return SectionDraft(
        "org",
        TITLES["org"],
        SECTION_WEIGHTS["org"],
        candidates,
        most=len(org_profile) + len(found.hits),
    )


def _profile_section(profile: dict[str, Any]) -> SectionDraft[ContextItemSource]:
    candidates = [
        Candidate(
            f"{key}: {_compact(value)}",
            ContextItemSource(None, "profile", f"{key}: {_compact(value)}"),
            render_key=index,
        )
        for index, (key, value) in enumerate(profile.items())
    ]
    return SectionDraft(
        "profile",
        TITLES["profile"],
        SECTION_WEIGHTS["profile"],
        candidates,
        opening="<memory>",
        closing="</memory>",
    )


def _hits_section(
    name: MemorySectionName, found: SectionHits, spares: list[Spare], bullet: str
) -> SectionDraft[ContextItemSource]:
    return SectionDraft(
        name,
        TITLES[name],
        SECTION_WEIGHTS[name],
        _hit_candidates(found, spares, bullet),
        most=len(found.hits),
    )


def _hit_candidates(
    found: SectionHits, spares: list[Spare], bullet: str, offset: int = 0
) -> list[Candidate[ContextItemSource]]:
    """The section's hits, best first, then its `spares` (`SectionDraft.most`)."""
    sources = [
        ContextItemSource(str(hit.memory.id), hit.memory.kind, hit.memory.text, hit.scores)
        for hit in found.hits
    ] + [ContextItemSource(str(spare.id), spare.kind, spare.text, spare=spare) for spare in spares]
    return [
        Candidate(f"{bullet} {source.text}", source, render_key=offset + rank)
        for rank, source in enumerate(sources)
    ]


def _distinct_spares(
    found: dict[MemorySectionName, SectionHits],
) -> dict[MemorySectionName, list[Spare]]:
    """Each memory section's spares without those that say what a hit of any section says or
    what a spare of an earlier section says (`normalise_text`): the block never shows one text
    twice, whichever of them the budget takes. (A section's hits and spares already leave out
    what the hits of the sections before it say: `MemorySearch.search_sections`.)"""
    said = {normalise_text(hit.memory.text) for each in found.values() for hit in each.hits}
    spares: dict[MemorySectionName, list[Spare]] = {}
    for name in MEMORY_SECTIONS:
        spares[name] = []
        for spare in found[name].spares:
            text = normalise_text(spare.text)
            if text not in said:
                said.add(text)
                spares[name].append(spare)
    return spares


def _summary_section(
    window: ContextWindow, offered: list[ReplayedMessage]
) -> SectionDraft[ContextItemSource]:
    """One item per summary entry; the newest are kept first when the budget is short, after
    those that say what the block does not show verbatim: an entry whose turns are all among
    the `offered` recent messages (those shown verbatim) restates them (`Candidate.restates`)."""
    offered_ids = {str(message.id) for message in offered}
    # Messages the recent section never renders (system notes, a tool call's empty content)
    # are no part of what an entry would repeat.
    unrendered = {str(message.id) for message in window.messages if not _is_shown(message)}
    entries = [
        (summary.sequence, index, entry)
        for summary in window.summaries
        for index, entry in enumerate(summary.entries)
        if isinstance(entry.get("question"), str) and isinstance(entry.get("answer"), str)
    ]
    candidates = []
    for order, (sequence, index, entry) in enumerate(reversed(entries)):
        text = format_summary_entries([entry])
        cited = {mid for mid in entry.get("message_ids") or [] if isinstance(mid, str)}
        cited -= unrendered
        candidates.append(
            Candidate(
                text,
                ContextItemSource(f"summary:{sequence}:{index}", "summary", text),
                render_key=len(entries) - order,
                restates=frozenset(cited) if cited and cited <= offered_ids else frozenset(),
            )
        )
    return SectionDraft(
        "thread",
        TITLES["thread"],
        SECTION_WEIGHTS["thread"],
        candidates,
        opening="<earlier_conversation>",
        closing="</earlier_conversation>",
    )


def _offered_turns(
    newest_first: Sequence[ReplayedMessage],
    budget: int,
    count: Callable[[str], int],
    encoding: str,
) -> tuple[list[list[ReplayedMessage]], bool]:
    """The turns the recent section offers, newest first (`_turns`), each as it is shown
    (`_shown_turn`): the newest whose lines add up to at most the block's budget; and whether
    older turns are left out because they would not fit after these. Offering only these
    bounds what a block of a long conversation reads.

    A turn is shown in at most `TURN_SHARE` of the budget, and the newest in no more than the
    block can give it besides the preamble and the section's heading (`room_alone`): it goes
    into the block before any section takes its share, and at a tight budget half the budget
    is more than is left after them.

    The turns end at the first that does not fit: an older one shown would leave out the
    messages between it and the newest, and the model reading the block could not know that
    something was said there. A turn is never too long to show (it is shortened instead),
    and a turn not read to its question yet would only be longer read whole."""
    offered: list[list[ReplayedMessage]] = []
    spent = 0
    most = int(budget * TURN_SHARE)
    newest_most = min(most, room_alone(HEADER, TITLES["recent"], budget, count))
    for turn in _turns(newest_first):
        shown = _shown_turn(turn, most if offered else newest_most, count, encoding)
        if shown is None:
            return offered, True
        cost = sum(count(_turn_line(message)) + 1 for message in shown)  # each its newline
        if spent + cost > budget:
            return offered, True
        offered.append(shown)
        spent += cost
    return offered, False


def _shown_turn(
    turn: list[ReplayedMessage], most: int, count: Callable[[str], int], encoding: str
) -> list[ReplayedMessage] | None:
    """`turn` as the recent section shows it: whole when its lines add up to at most `most`
    tokens; else each message longer than an equal share of what the shorter ones leave is
    shortened to that share (`shortened`: its beginning and its end around a marker). None
    when the share leaves too little of a message to show (a turn of very many messages)."""
    costs = [count(_turn_line(message)) + 1 for message in turn]  # each its newline
    if sum(costs) <= most:
        return turn
    left, waiting = most, len(costs)
    share = left // waiting
    for cost in sorted(costs):
        if cost > share:
            break
        left, waiting = left - cost, waiting - 1
        share = left // waiting
    shown = []
    for message, cost in zip(turn, costs, strict=True):
        if cost > share:
            content = shortened(f"{message.role}: ", message.content, share - 1, encoding)
            if content is None:
                return None
            message = replace(message, content=content)
        shown.append(message)
    return shown


def _turns(newest_first: Sequence[ReplayedMessage]) -> list[list[ReplayedMessage]]:
    """The shown messages of `newest_first` in turns, newest first, each newest message first.

    A turn is a human message and the replies after it (the assistant's, tools'), the unit
    the recent section shows or leaves out: a reply shown without its question reads as an
    answer to the question before, and a question without its reply as one never answered.
    Messages older than the first human message read form a turn of their own: their question,
    if any, was summarized (or is not read yet)."""
    turns: list[list[ReplayedMessage]] = []
    turn: list[ReplayedMessage] = []
    for message in newest_first:
        if _is_shown(message):
            turn.append(message)
        if message.role == HUMAN_ROLE:
            if turn:
                turns.append(turn)
            turn = []
    if turn:
        turns.append(turn)
    return turns


def _recent_section(
    turns: list[list[ReplayedMessage]], *, left_out: int
) -> SectionDraft[ContextItemSource]:
    """The raw turns after the summaries that the section offers (`_offered_turns`, newest
    first, as shown); the budget takes them whole and newest first, the newest before any
    section takes its share (`SectionDraft.leading`), and no older turn once one does not
    fit. `left_out`: the messages read and not offered, which count as omitted (those older
    than what was read are not counted)."""
    candidates = [
        Candidate(
            _turn_line(message),
            ContextItemSource(str(message.id), f"message:{message.role}", message.content),
            render_key=message.seq,
            key=str(message.id),
            unit=index,
        )
        for index, turn in enumerate(turns)
        for message in turn
    ]
    return SectionDraft(
        "recent",
        TITLES["recent"],
        SECTION_WEIGHTS["recent"],
        candidates,
        left_out=left_out,
        run=True,
        leading=1,
    )


def _turn_line(message: ReplayedMessage) -> str:
    return f"{message.role}: {message.content}"


def _is_shown(message: ReplayedMessage) -> bool:
    """Whether the recent section renders this message: not system prompts, nor messages with
    nothing visible to read (a tool call's empty content, a blank reply), which would show as a
    bare `assistant: ` line."""
    return message.role != "system" and bool(visible_text(message.content))


def _compact(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
