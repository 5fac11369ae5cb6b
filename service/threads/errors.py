"""The threads domain's problems."""

from __future__ import annotations

from service.errors import Conflict, ModelUnavailable, NotFound


class ThreadNotFound(NotFound):
    title = "Thread not found"


class SummarizationDisabled(Conflict):
    """Summaries were asked for, but this deployment has no model to write them: the request
    conflicts with how the service is configured (retrying will not help)."""

    title = "Summarization is off"
    code = "SUMMARIZATION_DISABLED"


class SummarizerUnavailable(ModelUnavailable):
    title = "The summarization model is unavailable"


class ThreadFull(Conflict):
    """An append would give a message a position past `POSITION_MAX`: the thread takes no more
    messages (no thread the API filled gets there; an imported one can)."""

    title = "The thread is full"
