"""One agent turn in one round trip: append the messages, then build the next context block.

Both happen in the request's transaction, so the block already sees the appended turns (as
`recent`) and a failed build leaves no half-recorded turn behind.
"""

from __future__ import annotations

import uuid

from service.context.schemas import ContextRequest, TurnAppend, TurnAppended
from service.context.service import ContextBuilder
from service.errors import ValidationFailed
from service.kit.types import QUERY_MAX_CHARS, visible_text
from service.memories.search import PendingVector
from service.threads.schemas import MessageIn
from service.threads.service import ThreadService

USER_ROLES = frozenset({"user", "human"})


async def record_turn(
    threads: ThreadService,
    context: ContextBuilder,
    user_id: str,
    thread_id: uuid.UUID,
    body: TurnAppend,
    embedding_question: PendingVector | None = None,
) -> TurnAppended:
    """Append `body.messages`, then build the context block for the model's next call;
    `embedding_question` is the block's question already on its way
    (`question_on_its_way` of `turn_context_request`'s question), else it is embedded in
    the build."""
    appended = await threads.append(user_id, thread_id, body.messages)
    built = await context.build(
        user_id, turn_context_request(body, thread_id), embedding_question=embedding_question
    )
    return TurnAppended(items=appended.items, duplicates=appended.duplicates, context=built)


def turn_context_request(body: TurnAppend, thread_id: uuid.UUID) -> ContextRequest:
    """The context block a turn asks for: its options, about its thread, its question the
    last user message unless it names one."""
    return ContextRequest(
        query=body.context.query or default_query(body.messages),
        thread_id=thread_id,
        **body.context.model_dump(exclude={"query"}, exclude_unset=True),
    )


def default_query(messages: list[MessageIn]) -> str:
    """The last user message with visible text (else the last message with any), cut to the
    query limit from its end."""
    # The query's own rule (`QueryText`): a message of only invisible characters asks nothing,
    # so it is passed over: a tool call's empty content, a blank tool result or reply (a user's
    # message always has visible text, `MessageIn`).
    latest = ""
    for message in reversed(messages):
        text = visible_text(message.content)
        if text and message.role in USER_ROLES:
            return text[-QUERY_MAX_CHARS:]
        latest = latest or text
    if not latest:
        raise ValidationFailed(
            "The context query defaults to the last message with visible text, from the user "
            "if any; none of the messages appended has any, so send `context.query`.",
            errors=[{"loc": ["body", "context", "query"], "msg": "required", "type": "missing"}],
        )
    return latest[-QUERY_MAX_CHARS:]
