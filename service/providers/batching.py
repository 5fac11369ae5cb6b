"""Concurrent query embeddings share one model run.

On a CPU the cost of a run is mostly fixed per run, not per text: eight short questions embedded
as one batch cost about half the CPU of eight runs of one (docs/benchmarks.md, issue #15), and
eight runs started at once also fight over the same cores. `QueryBatcher` keeps one run in flight
at a time; questions that arrive while it runs wait for it and then go together in the next run.
A question that arrives when nothing runs starts a run at once, so one client never waits for a
batch to fill.

Hand-written rather than taken from a library: what PyPI offers for asyncio micro-batching
collects for a fixed time window (adding that delay to every question, the opposite of what a
single client needs) or brings its own worker threads; this is one loop over a list.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from service.providers.embedder import EmbedderUnavailable

RunBatch = Callable[[list[str]], Awaitable[list[list[float]]]]
"""Embeds a batch of texts, one vector per text in order; raises `EmbedderUnavailable`."""


class QueryBatcher:
    """`embed_query` for many concurrent callers over one batch-embedding function."""

    def __init__(self, run_batch: RunBatch, max_batch: int) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._run_batch = run_batch
        self._max_batch = max_batch
        self._waiting: list[tuple[str, asyncio.Future[list[float]]]] = []
        # The task draining `_waiting`, while there is one; a reference keeps it alive.
        self._drain: asyncio.Task[None] | None = None

    async def embed_query(self, text: str) -> list[float]:
        future: asyncio.Future[list[float]] = asyncio.get_running_loop().create_future()
        self._waiting.append((text, future))
        if self._drain is None:
            self._drain = asyncio.create_task(self._drain_waiting())
        # A caller that gives up (its request cancelled) cancels only its own future; the run
        # goes on for the others.
        return await future

    async def aclose(self) -> None:
        """Stop draining; callers still waiting are cancelled."""
        drain, self._drain = self._drain, None
        if drain is not None:
            drain.cancel()
            await asyncio.gather(drain, return_exceptions=True)
        for _, future in self._waiting:
            future.cancel()
        self._waiting.clear()

    async def _drain_waiting(self) -> None:
        try:
            while self._waiting:
                batch = [
                    (text, future)
                    for text, future in self._waiting[: self._max_batch]
                    if not future.done()
                ]
                del self._waiting[: self._max_batch]
                if batch:
                    await self._run(batch)
        finally:
            self._drain = None

    async def _run(self, batch: list[tuple[str, asyncio.Future[list[float]]]]) -> None:
        # The same question asked twice at once is embedded once.
        texts = list(dict.fromkeys(text for text, _ in batch))
        try:
            vectors = await self._run_batch(texts)
        except asyncio.CancelledError:
            for _, future in batch:
                future.cancel()
            raise
        # Every failure reaches every caller of the batch (none may wait forever), each as an
        # exception of its own, chained to the shared cause.
        except EmbedderUnavailable as exc:
            for _, future in batch:
                if not future.done():
                    error = EmbedderUnavailable(str(exc))
                    error.__cause__ = exc
                    future.set_exception(error)
            return
        except Exception as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        by_text = dict(zip(texts, vectors, strict=True))
        for text, future in batch:
            if not future.done():
                future.set_result(by_text[text])
