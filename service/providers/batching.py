"""Concurrent query embeddings share one model run.

On a CPU the cost of a run is mostly fixed per run, not per text: eight short questions embedded
as one batch cost about half the CPU of eight runs of one (docs/benchmarks.md), and
eight runs started at once also fight over the same cores. `QueryBatcher` keeps one run in flight
at a time; questions that arrive while it runs wait for it and then go together in the next run.
A question that arrives when nothing runs starts a run at once, inside `embed_query`'s first
step, so one client never waits for a batch to fill, nor for another turn of the event loop.

Hand-written rather than taken from a library: what PyPI offers for asyncio micro-batching
collects for a fixed time window (adding that delay to every question, the opposite of what a
single client needs) or brings its own worker threads; this is a list and a done-callback.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from functools import partial

from service.providers.embedder import EmbedderUnavailable

RunBatch = Callable[[list[str]], Awaitable[list[list[float]]]]
"""Embeds a batch of texts, one vector per text in order; raises `EmbedderUnavailable`.

A plain function that starts the work before it returns (and returns a future) lets a run begin
the moment its first question arrives; a coroutine function's run begins at the event loop's
next turn."""

Waiting = list[tuple[str, "asyncio.Future[list[float]]"]]


class QueryBatcher:
    """`embed_query` for many concurrent callers over one batch-embedding function."""

    def __init__(self, run_batch: RunBatch, max_batch: int) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._run_batch = run_batch
        self._max_batch = max_batch
        self._waiting: Waiting = []
        # The run in flight, while there is one.
        self._running: asyncio.Future[list[list[float]]] | None = None

    async def embed_query(self, text: str) -> list[float]:
        future: asyncio.Future[list[float]] = asyncio.get_running_loop().create_future()
        self._waiting.append((text, future))
        if self._running is None:
            self._start_next_run()
        # A caller that gives up (its request cancelled) cancels only its own future; the run
        # goes on for the others.
        return await future

    async def aclose(self) -> None:
        """Stop batching; the run in flight and the callers still waiting are cancelled."""
        waiting, self._waiting = self._waiting, []
        running, self._running = self._running, None
        for _, future in waiting:
            future.cancel()
        if running is not None:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)

    def _start_next_run(self) -> None:
        while self._waiting:
            batch = [
                (text, future)
                for text, future in self._waiting[: self._max_batch]
                if not future.done()
            ]
            del self._waiting[: self._max_batch]
            if not batch:
                continue
            # The same question asked twice at once is embedded once.
            texts = list(dict.fromkeys(text for text, _ in batch))
            run = self._start(texts)
            self._running = run
            run.add_done_callback(partial(self._finish, batch, texts))
            return

    def _start(self, texts: list[str]) -> asyncio.Future[list[list[float]]]:
        try:
            return asyncio.ensure_future(self._run_batch(texts))
        # A run that fails to start fails its callers exactly as one that fails later.
        except Exception as exc:
            failed: asyncio.Future[list[list[float]]] = asyncio.get_running_loop().create_future()
            failed.set_exception(exc)
            return failed

    def _finish(
        self, batch: Waiting, texts: list[str], run: asyncio.Future[list[list[float]]]
    ) -> None:
        _deliver(batch, texts, run)
        # Unless the batcher was closed meanwhile (`aclose` cancelled this run), the questions
        # that arrived during the run go next.
        if self._running is run:
            self._running = None
            self._start_next_run()


def _deliver(batch: Waiting, texts: list[str], run: asyncio.Future[list[list[float]]]) -> None:
    """Every caller of the batch gets its question's vector, or the run's failure (none may
    wait forever): each an exception of its own, chained to the shared cause."""
    if run.cancelled():
        for _, future in batch:
            future.cancel()
        return
    failure = run.exception()
    if failure is None:
        by_text = dict(zip(texts, run.result(), strict=True))
        for text, future in batch:
            if not future.done():
                future.set_result(by_text[text])
        return
    for _, future in batch:
        if future.done():
            continue
        if isinstance(failure, EmbedderUnavailable):
            error = EmbedderUnavailable(str(failure))
            error.__cause__ = failure
            future.set_exception(error)
        else:
            future.set_exception(failure)
