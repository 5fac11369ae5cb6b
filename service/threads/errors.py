from __future__ import annotations

from service.errors import NotFound, ServiceUnavailable


class ThreadNotFound(NotFound):
    title = "Thread not found"


class SummarizationDisabled(ServiceUnavailable):
    status = 409
    title = "Summarization is off"
    code = "SUMMARIZATION_DISABLED"


class SummarizerUnavailable(ServiceUnavailable):
    title = "The summarization model is unavailable"
    code = "LLM_UNAVAILABLE"
