"""A summary pass asked for now (`POST …/threads/{id}/summarize`), run outside the request's
transaction.

The pass reads the thread and writes its summary in transactions of its own, and calls the
chat model between them, for seconds. Run inside a request's transaction, it held that
transaction's pooled connection idle for the model's whole round trip and took a second
connection for its own reads: with every connection held by such requests, none of them
could go on. The caller's thread is checked first, in a unit of work of its own that ends
before the pass begins."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from service.auth.principal import Principal
from service.providers.llm import LLMUnavailable
from service.services import Services, unit_of_work
from service.state import AppState
from service.threads.errors import SummarizationDisabled, SummarizerUnavailable, ThreadNotFound
from service.threads.schemas import SummarizeResult, SummaryRead
from service.threads.service import ThreadService


class SummaryNow:
    def __init__(
        self,
        state: AppState,
        principal: Principal,
        thread_service: Callable[[Services], ThreadService],
    ) -> None:
        """`thread_service` builds a unit of work's thread service (the domain's wiring)."""
        self._state = state
        self._principal = principal
        self._thread_service = thread_service

    async def summarize(self, user_id: str, thread_id: uuid.UUID) -> SummarizeResult:
        """Summarize every complete turn of the user's thread not yet summarized: 404 when it
        is not the user's, 409 when summarization is off, 503 when the model fails."""
        async with unit_of_work(self._state, self._principal) as services:
            await services.get(self._thread_service).load(user_id, thread_id)
        summarizer = self._state.threads.summarizer
        status = summarizer.status
        if not status.enabled:
            raise SummarizationDisabled(f"Summarization is off: {status.reason}.")
        try:
            result = await summarizer.run(self._principal.tenant_id, thread_id)
        except LLMUnavailable as exc:
            raise SummarizerUnavailable("The summarization model did not answer; retry.") from exc
        if result.status == "written" and result.summary is not None:
            return SummarizeResult(
                status="written", summary=SummaryRead.model_validate(result.summary)
            )
        if result.status in ("not_due", "empty", "superseded"):
            return SummarizeResult(status=result.status)
        if result.status == "thread_not_found":
            # Deleted between the check and the pass.
            raise ThreadNotFound(f"No thread {thread_id} here.")
        raise SummarizationDisabled(f"Summarization is off ({result.status}).")
