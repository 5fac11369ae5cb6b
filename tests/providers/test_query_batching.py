"""Concurrent questions share one model run (`QueryBatcher`, used by the local embedder)."""

from __future__ import annotations

import asyncio
import math

import pytest

from service.providers import EmbedderConfig, EmbedderUnavailable
from service.providers.batching import QueryBatcher
from service.providers.local_embedder import LocalEmbedder

QUESTIONS = [
    "Where did Caroline go hiking last May?",
    "What does Melanie paint?",
    "When is the dentist appointment?",
    "Which book did Jon recommend?",
    "What did we decide about the budget?",
    "Who moved to Lisbon?",
]


class RecordingRuns:
    """A batch function that embeds each text as a one-hot-ish vector and records its runs;
    each run waits for `release` so that several callers can queue behind it, and a run that
    holds `fails_with` fails."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.release = asyncio.Event()
        self.fails_with: str | None = None

    async def __call__(self, texts: list[str]) -> list[list[float]]:
        self.batches.append(list(texts))
        await self.release.wait()
        if self.fails_with in texts:
            raise EmbedderUnavailable("model crashed")
        return [[float(len(text)), 1.0] for text in texts]


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_questions_asked_while_a_run_is_in_flight_go_together_in_the_next_run() -> None:
    runs = RecordingRuns()
    batcher = QueryBatcher(runs, max_batch=16)
    first = asyncio.create_task(batcher.embed_query("a"))
    await _settle()
    # The first question started a run at once, alone: nobody waits for a batch to fill.
    assert runs.batches == [["a"]]
    later = [asyncio.create_task(batcher.embed_query(text)) for text in ("bb", "ccc", "bb")]
    await _settle()
    assert runs.batches == [["a"]]
    runs.release.set()
    results = await asyncio.gather(first, *later)
    # One more run for all three, the repeated question embedded once; every caller got its
    # own question's vector.
    assert runs.batches == [["a"], ["bb", "ccc"]]
    assert results == [[1.0, 1.0], [2.0, 1.0], [3.0, 1.0], [2.0, 1.0]]


async def test_a_run_takes_at_most_max_batch_questions() -> None:
    runs = RecordingRuns()
    batcher = QueryBatcher(runs, max_batch=2)
    tasks = [asyncio.create_task(batcher.embed_query("x" * n)) for n in range(1, 7)]
    await _settle()
    runs.release.set()
    await asyncio.gather(*tasks)
    # The first question's run started as it arrived, alone; the others waited for it.
    assert [len(batch) for batch in runs.batches] == [1, 2, 2, 1]


async def test_a_failed_run_fails_each_of_its_callers_and_the_next_run_works() -> None:
    runs = RecordingRuns()
    batcher = QueryBatcher(runs, max_batch=16)
    runs.fails_with = "a"
    first = asyncio.create_task(batcher.embed_query("z"))
    await _settle()
    tasks = [asyncio.create_task(batcher.embed_query(text)) for text in ("a", "bb")]
    await _settle()
    runs.release.set()
    assert await first == [1.0, 1.0]
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    assert runs.batches[1] == ["a", "bb"]
    failures = [outcome for outcome in outcomes if isinstance(outcome, EmbedderUnavailable)]
    assert len(failures) == len(outcomes)
    # Each caller raises an exception of its own, chained to the run's failure.
    assert failures[0] is not failures[1]
    assert all(str(failure.__cause__) == "model crashed" for failure in failures)
    assert await batcher.embed_query("ccc") == [3.0, 1.0]


async def test_a_caller_that_gives_up_does_not_cancel_the_others() -> None:
    runs = RecordingRuns()
    batcher = QueryBatcher(runs, max_batch=16)
    first = asyncio.create_task(batcher.embed_query("a"))
    await _settle()
    impatient = asyncio.create_task(batcher.embed_query("bb"))
    patient = asyncio.create_task(batcher.embed_query("ccc"))
    await _settle()
    impatient.cancel()
    await _settle()
    runs.release.set()
    assert await first == [1.0, 1.0]
    assert await patient == [3.0, 1.0]
    assert impatient.cancelled()
    # The question nobody waits for any more is not embedded.
    assert runs.batches == [["a"], ["ccc"]]


async def test_closing_cancels_the_waiting_callers() -> None:
    runs = RecordingRuns()
    batcher = QueryBatcher(runs, max_batch=16)
    first = asyncio.create_task(batcher.embed_query("a"))
    waiting = asyncio.create_task(batcher.embed_query("bb"))
    await _settle()
    await batcher.aclose()
    outcomes = await asyncio.gather(first, waiting, return_exceptions=True)
    assert all(isinstance(outcome, asyncio.CancelledError) for outcome in outcomes)


async def test_a_run_that_starts_when_called_starts_in_the_questions_first_step() -> None:
    started: list[list[str]] = []
    vectors: asyncio.Future[list[list[float]]] = asyncio.get_running_loop().create_future()

    def start_run(texts: list[str]) -> asyncio.Future[list[list[float]]]:
        started.append(texts)
        return vectors

    batcher = QueryBatcher(start_run, max_batch=16)
    question = asyncio.create_task(batcher.embed_query("a"))
    # One turn of the event loop: the question's own first step, and nothing else.
    await asyncio.sleep(0)
    assert started == [["a"]]
    vectors.set_result([[1.0, 2.0]])
    assert await question == [1.0, 2.0]


async def test_a_run_that_fails_to_start_fails_its_callers_and_the_next_run_works() -> None:
    calls = 0

    def start_run(texts: list[str]) -> asyncio.Future[list[list[float]]]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise EmbedderUnavailable("model file missing")
        done: asyncio.Future[list[list[float]]] = asyncio.get_running_loop().create_future()
        done.set_result([[float(len(text))] for text in texts])
        return done

    batcher = QueryBatcher(start_run, max_batch=16)
    with pytest.raises(EmbedderUnavailable, match="model file missing") as failure:
        await batcher.embed_query("a")
    assert str(failure.value.__cause__) == "model file missing"
    assert await batcher.embed_query("bb") == [2.0]


def test_max_batch_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="max_batch"):
        QueryBatcher(RecordingRuns(), max_batch=0)


async def test_the_local_model_gives_the_same_vectors_batched_as_alone() -> None:
    embedder = LocalEmbedder(EmbedderConfig(local_query_batch=16))
    alone = [await embedder.embed_query(question) for question in QUESTIONS]
    together = await asyncio.gather(*(embedder.embed_query(q) for q in QUESTIONS))
    for one, other in zip(alone, together, strict=True):
        # Padding a shorter question within a batch is masked out of the pooling.
        assert math.dist(one, other) < 1e-4
    await embedder.aclose()
