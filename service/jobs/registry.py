"""What the worker runs, as the domains register it at start-up: each domain's `jobs.py`
registers the handlers of its job kinds (and, if it wants to hear of failures, a hook), so
the worker and the app factory know no kind of job."""

from __future__ import annotations

from service.jobs.worker import FailureHook, JobFailure, JobHandler


class JobRegistry:
    def __init__(self) -> None:
        self._handlers: dict[str, JobHandler] = {}
        self._failure_hooks: list[FailureHook] = []

    @property
    def handlers(self) -> dict[str, JobHandler]:
        return dict(self._handlers)

    def handle(self, kind: str, handler: JobHandler) -> None:
        """Run `handler` for every job of `kind`; one kind has one handler."""
        if kind in self._handlers:
            raise ValueError(f"Two handlers registered for the job kind {kind!r}.")
        self._handlers[kind] = handler

    def on_failure(self, hook: FailureHook) -> None:
        """Tell `hook` about every failed run of any job (it picks the kinds it cares about)."""
        self._failure_hooks.append(hook)

    async def failed(self, failure: JobFailure) -> None:
        """The worker's failure hook: every registered hook, in registration order."""
        for hook in self._failure_hooks:
            await hook(failure)
