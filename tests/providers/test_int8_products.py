"""The packaged model with its matrix products in int8: the file's own weights, another vector
space close to the float run's, each text's vector independent of the texts run with it, and
the derived model kept between starts."""

from __future__ import annotations

import asyncio
import hashlib
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from service.providers import EmbedderConfig, EmbedderUnavailable
from service.providers.derived_models import int8_products_model
from service.providers.int8_products import NotAnInt8Model, with_int8_products
from service.providers.local_embedder import LocalEmbedder, _bundled_model_path
from service.providers.profiles import MINILM, MINILM_INT8_PRODUCTS

SENTENCES = [
    "Lena lives in Lisbon and cycles to work",
    "User likes piano and chess",
    "Where does my sister live?",
    "The team meets every Tuesday at ten to plan the release",
]


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / (math.hypot(*a) * math.hypot(*b))


def test_every_product_over_stored_int8_weights_runs_on_those_weights() -> None:
    packaged = onnx.load(str(_bundled_model_path()))
    producers = {output: node for node in packaged.graph.node for output in node.output}
    matrices = {
        producers[producers[node.input[1]].input[0]].input[0]
        for node in packaged.graph.node
        if node.op_type == "MatMul"
        and producers.get(node.input[1]) is not None
        and producers[node.input[1]].op_type == "Mul"
    }
    stored = {
        initializer.name: numpy_helper.to_array(initializer)
        for initializer in packaged.graph.initializer
        if initializer.data_type == TensorProto.INT8 and initializer.name in matrices
    }
    rewritten = onnx.load_from_string(with_int8_products(_bundled_model_path()))
    initializers = {i.name: numpy_helper.to_array(i) for i in rewritten.graph.initializer}
    products = [node for node in rewritten.graph.node if node.op_type == "MatMulInteger"]
    # One integer product per stored matrix; no float copy of the weights is left to fold.
    assert len(products) == len(stored) == 36
    assert not any(
        node.op_type == "Cast" and node.input[0] in stored for node in rewritten.graph.node
    )
    weights = sorted(
        (initializers[node.input[1]].astype(np.int16) - 128).astype(np.int8).tobytes()
        for node in products
    )
    # The file's weights bit for bit (as uint8 with zero point 128).
    assert weights == sorted(matrix.tobytes() for matrix in stored.values())
    assert {initializers[node.input[3]].item() for node in products} == {128}


def test_a_model_without_int8_weights_is_refused(tmp_path: Path) -> None:
    weights = numpy_helper.from_array(np.ones((4, 2), dtype=np.float32), "weights")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "weights"], ["y"])],
        "float",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
        [weights],
    )
    path = tmp_path / "model.onnx"
    onnx.save(helper.make_model(graph), str(path))
    with pytest.raises(NotAnInt8Model):
        with_int8_products(path)
    embedder = LocalEmbedder(EmbedderConfig(), model_path=path)
    with pytest.raises(EmbedderUnavailable, match="int8"):
        asyncio.run(embedder.embed(["anything"]))


async def test_its_vectors_lie_close_to_the_float_run_but_are_a_space_of_their_own() -> None:
    int8 = LocalEmbedder(EmbedderConfig())
    float32 = LocalEmbedder(EmbedderConfig(profile=MINILM.name))
    try:
        assert (int8.model_name, float32.model_name) == (MINILM_INT8_PRODUCTS.name, MINILM.name)
        cosines = [
            _cosine(a, b)
            for a, b in zip(
                await int8.embed(SENTENCES), await float32.embed(SENTENCES), strict=True
            )
        ]
    finally:
        await int8.aclose()
        await float32.aclose()
    assert min(cosines) > 0.97
    assert max(cosines) < 0.9999


async def test_questions_asked_together_get_the_vectors_they_get_alone() -> None:
    # The activations' scale covers one run: run together, the questions would change each
    # other's vectors (and a padded short one would change by its padding).
    embedder = LocalEmbedder(EmbedderConfig(local_threads=2))
    try:
        alone = [await embedder.embed_query(question) for question in SENTENCES]
        together = await asyncio.gather(*(embedder.embed_query(q) for q in SENTENCES))
        stored = await embedder.embed(SENTENCES)
    finally:
        await embedder.aclose()
    # Run together, they would differ by hundredths; alone, by float rounding at most.
    for vectors in (together, stored):
        for vector, expected in zip(vectors, alone, strict=True):
            assert vector == pytest.approx(expected, abs=1e-6)


def test_the_derived_model_is_kept_and_read_back_only_while_intact(tmp_path: Path) -> None:
    source = _bundled_model_path()
    derived = int8_products_model(source, tmp_path)
    assert isinstance(derived, bytes)
    (kept,) = tmp_path.glob("*.onnx")
    assert kept.read_bytes() == derived
    # The next start reads the kept copy.
    assert int8_products_model(source, tmp_path) == kept
    # A copy that no longer matches its digest is derived again, and replaced.
    kept.write_bytes(derived[:1000])
    assert int8_products_model(source, tmp_path) == derived
    assert kept.read_bytes() == derived


def test_a_cache_that_cannot_be_written_derives_the_model_each_time(tmp_path: Path) -> None:
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    derived = int8_products_model(_bundled_model_path(), not_a_directory / "models")
    assert isinstance(derived, bytes)
    assert onnx.load_from_string(derived).graph.node


def test_a_kept_model_loads_without_importing_onnx(tmp_path: Path) -> None:
    # Importing onnx takes most of a second of a start; only deriving needs it.
    int8_products_model(_bundled_model_path(), tmp_path)
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from service.providers.derived_models import int8_products_model\n"
        "from service.providers.local_embedder import _bundled_model_path\n"
        f"kept = int8_products_model(_bundled_model_path(), Path({str(tmp_path)!r}))\n"
        "print(isinstance(kept, Path), 'onnx' in sys.modules)\n"
    )
    ran = subprocess.run(  # noqa: S603 - our own interpreter and script
        [sys.executable, "-c", script],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        check=True,
    )
    assert ran.stdout.split() == ["True", "False"]


def _per_run_quantized_model(directory: Path) -> tuple[Path, str]:
    """A small model as onnxruntime's `quantize_dynamic` makes them: token vectors looked up,
    quantized with one scale for the whole run, multiplied in integers; the packaged tokenizer
    beside it."""
    rng = np.random.default_rng(7)
    table = (rng.normal(size=(30522, 8)) * rng.uniform(0.1, 10, (30522, 1))).astype(np.float32)
    weights = rng.integers(0, 256, size=(8, 8), dtype=np.uint8)
    nodes = [
        helper.make_node("Gather", ["table", "input_ids"], ["tokens"]),
        helper.make_node("DynamicQuantizeLinear", ["tokens"], ["q", "scale", "zero"]),
        helper.make_node("MatMulInteger", ["q", "weights", "zero", "weights_zero"], ["sums"]),
        helper.make_node("Cast", ["sums"], ["float_sums"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["float_sums", "scale"], ["last_hidden_state"]),
    ]
    ids = [
        helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "tokens"])
        for name in ("input_ids", "attention_mask")
    ]
    graph = helper.make_graph(
        nodes,
        "per_run",
        ids,
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, None)],
        [
            numpy_helper.from_array(table, "table"),
            numpy_helper.from_array(weights, "weights"),
            numpy_helper.from_array(np.array(128, dtype=np.uint8), "weights_zero"),
        ],
    )
    path = directory / "model.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    tokenizer = Path(__file__).resolve().parents[2] / "service/providers/data/tokenizer.json"
    (directory / "tokenizer.json").write_bytes(tokenizer.read_bytes())
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


async def test_an_operators_model_that_quantizes_per_run_embeds_each_text_alone(
    tmp_path: Path,
) -> None:
    path, sha256 = _per_run_quantized_model(tmp_path)
    embedder = LocalEmbedder(
        EmbedderConfig(dims=8, local_model_path=path, local_model_sha256=sha256)
    )
    texts = ["a", "Lena keeps bees in Lisbon, and her sister Ana is a nurse in Porto"]
    try:
        together = await embedder.embed(texts)
        alone = [(await embedder.embed([text]))[0] for text in texts]
    finally:
        await embedder.aclose()
    for vector, expected in zip(together, alone, strict=True):
        assert vector == pytest.approx(expected, abs=1e-6)
