"""The local embedder: all-MiniLM-L6-v2 (int8 ONNX) run in-process."""

from __future__ import annotations

import dataclasses
import hashlib
import math
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from service.providers import EmbedderConfig, EmbedderUnavailable, build_embedder, local_embedder
from service.providers.local_embedder import (
    DIMS,
    MODEL_NAME,
    LocalEmbedder,
    ModelFile,
    _bundled_model_path,
    _load_model,
    _models,
    _scan_model_file,
)


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / (math.hypot(*a) * math.hypot(*b))


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    return LocalEmbedder(EmbedderConfig())


def test_local_is_the_default_provider() -> None:
    embedder = build_embedder(EmbedderConfig())
    assert isinstance(embedder, LocalEmbedder)
    assert (embedder.model_name, embedder.dims) == (MODEL_NAME, 384)


async def test_local_embedder_returns_384_dimensional_unit_vectors(
    embedder: LocalEmbedder,
) -> None:
    vectors = await embedder.embed(["I like green tea.", "Meeting moved to Thursday at 3pm."])
    assert len(vectors) == 2
    for vector in vectors:
        assert len(vector) == DIMS
        assert math.hypot(*vector) == pytest.approx(1.0, abs=1e-5)
    assert cosine(vectors[0], vectors[1]) < 0.99


async def test_a_paraphrase_scores_higher_than_an_unrelated_sentence(
    embedder: LocalEmbedder,
) -> None:
    anchor, paraphrase, unrelated = await embedder.embed(
        [
            "I adore hiking in the mountains",
            "Mountain trekking is my favourite hobby",
            "The quarterly tax report is due",
        ]
    )
    assert cosine(anchor, paraphrase) > 0.5
    assert cosine(anchor, paraphrase) > cosine(anchor, unrelated) + 0.3


async def test_batch_embeddings_equal_one_at_a_time_embeddings(embedder: LocalEmbedder) -> None:
    # More texts than one inference run holds, of very different lengths, so the batch is
    # reordered, split and padded.
    texts = [("word " * (n * 7 % 40)) + f"note {n}" for n in range(37)]
    texts += ["", "a much longer memory " * 200]
    batch = await embedder.embed(texts)
    assert len(batch) == len(texts)
    for text, batched in zip(texts, batch, strict=True):
        single = await embedder.embed_query(text)
        assert max(abs(x - y) for x, y in zip(single, batched, strict=True)) < 1e-5


async def test_empty_and_blank_inputs_embed_to_unit_vectors(embedder: LocalEmbedder) -> None:
    for vector in await embedder.embed(["", "   ", "\n"]):
        assert len(vector) == DIMS
        assert math.hypot(*vector) == pytest.approx(1.0, abs=1e-5)


async def test_inputs_are_truncated_at_256_word_pieces(embedder: LocalEmbedder) -> None:
    tokenizer = _load_model(_bundled_model_path(), 2).tokenizer
    sentence = "The user keeps detailed notes about every trip they take. "
    pieces_per_sentence = len(tokenizer.encode(sentence, add_special_tokens=False).ids)

    def differ_after(pieces: int) -> tuple[str, str]:
        prefix = sentence * (pieces // pieces_per_sentence)
        return prefix + "They hate flying.", prefix + "Cats are their favourite animal."

    # Past the limit the endings are cut off, so the texts embed identically...
    first, second = await embedder.embed(differ_after(300))
    assert first == pytest.approx(second, abs=1e-6)
    # ...but not before it: the limit is the model's 256, not the tokenizer file's 128.
    first, second = await embedder.embed(differ_after(200))
    assert first != pytest.approx(second, abs=1e-3)


async def test_no_texts_give_no_vectors(embedder: LocalEmbedder) -> None:
    assert await embedder.embed([]) == []


def test_the_model_is_loaded_once_per_process_even_under_concurrent_first_use() -> None:
    path = _bundled_model_path()
    # A thread count no other test uses, so this load really is the first.
    with ThreadPoolExecutor(max_workers=4) as pool:
        models = list(pool.map(lambda _: _load_model(path, 3), range(4)))
    assert all(model is models[0] for model in models)
    assert _load_model(path, 3) is models[0]


async def test_a_missing_model_file_raises_embedder_unavailable(tmp_path: Path) -> None:
    embedder = LocalEmbedder(EmbedderConfig(), model_path=tmp_path / "missing.onnx")
    with pytest.raises(EmbedderUnavailable, match="cannot load"):
        await embedder.load()
    with pytest.raises(EmbedderUnavailable, match="cannot load"):
        await embedder.embed(["hello"])


async def test_a_corrupt_model_file_raises_embedder_unavailable(tmp_path: Path) -> None:
    corrupt = tmp_path / "model.onnx"
    corrupt.write_bytes(b"definitely not an onnx graph")
    embedder = LocalEmbedder(EmbedderConfig(), model_path=corrupt)
    with pytest.raises(EmbedderUnavailable):
        await embedder.embed_query("hello")


def test_the_local_embedder_refuses_other_vector_sizes() -> None:
    with pytest.raises(ValueError, match="384"):
        build_embedder(EmbedderConfig(dims=1536))


class EnteredSession:
    """The real model session, noting when a run has entered it (and on which thread)."""

    def __init__(self, session: Any) -> None:
        self._session = session
        self.entered = threading.Event()
        self.threads: list[str] = []

    def run(self, output_names: Any, feeds: Any) -> Any:
        self.threads.append(threading.current_thread().name)
        self.entered.set()
        return self._session.run(output_names, feeds)


async def test_the_event_loop_hands_a_question_to_the_model_before_it_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    embedder = LocalEmbedder(EmbedderConfig(local_threads=4))
    await embedder.load()
    key = (ModelFile(_bundled_model_path(), int8_products=True), 4)
    session = EnteredSession(_models[key].session)
    monkeypatch.setitem(_models, key, dataclasses.replace(_models[key], session=session))
    # The loop waits for the handover at most 2 ms, which a thread on a loaded machine (a test
    # run on every core) can take to be scheduled: the wait is given the time here, so only a
    # loop that does not wait for the handover fails.
    monkeypatch.setattr(local_embedder, "_HANDOVER_TIMEOUT_SECONDS", 10.0)
    run = embedder._embed_questions(["Where does my sister live?"])
    # This task has held the GIL since: without the handover, the question's thread could not
    # have started the model yet.
    assert session.entered.is_set()
    assert session.threads == ["mneme-questions_0"]
    (vector,) = await run
    assert vector == pytest.approx((await embedder.embed(["Where does my sister live?"]))[0])
    await embedder.aclose()


async def test_long_questions_and_a_model_not_loaded_yet_are_embedded_the_same(
    embedder: LocalEmbedder,
) -> None:
    # Neither is handed over (the loop does not wait), and both give the stored texts' vectors.
    fresh = LocalEmbedder(EmbedderConfig())
    long_question = "Which of my colleagues went to the Lisbon conference in May? " * 40
    for question in ("Which colleague went to Lisbon?", long_question):
        expected = (await embedder.embed([question]))[0]
        assert await fresh.embed_query(question) == pytest.approx(expected, abs=1e-6)
    await fresh.aclose()


async def test_a_question_after_closing_is_refused_as_unavailable() -> None:
    embedder = LocalEmbedder(EmbedderConfig())
    await embedder.load()
    await embedder.aclose()
    with pytest.raises(EmbedderUnavailable, match="closed"):
        await embedder.embed_query("Anyone there?")


def test_a_model_file_is_read_once_for_its_digest_and_its_per_run_quantization(
    tmp_path: Path,
) -> None:
    # The operator's name straddles the first 1 MiB block the file is read in.
    content = bytes((1 << 20) - 5) + b"DynamicQuantizeLinear" + bytes(100)
    straddling, plain = tmp_path / "straddling.onnx", tmp_path / "plain.onnx"
    straddling.write_bytes(content)
    plain.write_bytes(bytes(len(content)))
    facts = _scan_model_file(straddling)
    assert facts.sha256 == hashlib.sha256(content).hexdigest()
    assert facts.quantizes_per_run
    assert not _scan_model_file(plain).quantizes_per_run
