"""The packaged MiniLM with its matrix products run in int8, derived when it loads.

The packaged model file stores each weight matrix as int8 with one float32 scale per output
column, turned back into float32 by a `Cast` and a `Mul` in front of its `MatMul`. onnxruntime
folds those into float32 weights when it loads the file, so every text then runs float32
products over ~88 MB of weights: bound by memory bandwidth, most of a question's embedding.

`with_int8_products` rewrites each such product to run on the stored int8 weights themselves:
the activations are quantized on every run (`DynamicQuantizeLinear`: uint8, with a scale and
zero point of their own), multiplied in integers (`MatMulInteger`: exact int32 sums) and scaled
back by the activations' scale times the column's (onnxruntime fuses the four nodes into one
kernel). The weights are the file's, bit for bit; only the activations are rounded to 8 bits.
The vectors therefore lie close to the float32 run's but are not the same: they are the vector
space of a profile of their own (`all-MiniLM-L6-v2-onnx-int8-dynamic`). A run's activations
share one scale, so a text's vector would depend on the texts run with it: the local embedder
runs each text alone.

The weights enter the product as uint8 with zero point 128 (the same integers, shifted): on a
CPU without VNNI instructions onnxruntime multiplies uint8 by int8 with an instruction that
saturates sums of two products at 16 bits, which would make the vectors depend on the CPU;
uint8 by uint8 is summed exactly on every CPU.

The rewrite is a pure function of the packaged file, which its package pins, so every process
derives the same model (`service.providers.derived_models` keeps it between starts).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# The zero point that turns an int8 weight into the same integer as uint8.
_UINT8_ZERO_POINT = 128


class NotAnInt8Model(ValueError):
    """The file holds no weight matrix stored as int8 with per-column scales."""


@dataclass(frozen=True, slots=True)
class _Int8Weights:
    """A `MatMul`'s weight matrix as the file stores it."""

    values: np.ndarray
    # The float32 scale of each output column, as a (1, columns) or scalar initializer.
    scale_name: str


def with_int8_products(model_path: Path) -> bytes:
    """The model at `model_path` with every product over stored int8 weights run in int8
    (see the module docstring), serialized for onnxruntime; raises NotAnInt8Model when the
    file has no such product."""
    model = onnx.load(str(model_path))
    graph = model.graph
    initializers = {initializer.name: initializer for initializer in graph.initializer}
    producers = {output: node for node in graph.node for output in node.output}
    nodes: list[onnx.NodeProto] = []
    added: list[onnx.TensorProto] = []
    for node in graph.node:
        weights = _int8_weights(node, producers, initializers)
        if weights is None:
            nodes.append(node)
            continue
        product_nodes, product_initializers = _integer_product(node, weights)
        nodes.extend(product_nodes)
        added.extend(product_initializers)
    if not added:
        raise NotAnInt8Model(f"{model_path} has no int8 weight matrix with per-column scales")
    del graph.node[:]
    graph.node.extend(_without_unused(nodes, {output.name for output in graph.output}))
    graph.initializer.extend(added)
    used = {name for node in graph.node for name in node.input}
    kept = [initializer for initializer in graph.initializer if initializer.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    onnx.checker.check_model(model)
    serialized: bytes = model.SerializeToString()
    return serialized


def _int8_weights(
    node: onnx.NodeProto,
    producers: dict[str, onnx.NodeProto],
    initializers: dict[str, onnx.TensorProto],
) -> _Int8Weights | None:
    """The int8 weights and column scales behind `node`'s second input, when `node` is a
    `MatMul` whose weights are `Mul(Cast(int8 matrix), scale)`; else None."""
    if node.op_type != "MatMul" or len(node.input) != 2:
        return None
    scaled = producers.get(node.input[1])
    if scaled is None or scaled.op_type != "Mul":
        return None
    cast = producers.get(scaled.input[0])
    scale = initializers.get(scaled.input[1])
    if cast is None or cast.op_type != "Cast" or scale is None:
        return None
    if helper.get_attribute_value(cast.attribute[0]) != TensorProto.FLOAT:
        return None
    stored = initializers.get(cast.input[0])
    if stored is None or stored.data_type != TensorProto.INT8 or len(stored.dims) != 2:
        return None
    if scale.data_type != TensorProto.FLOAT or int(np.prod(scale.dims)) not in (1, stored.dims[1]):
        return None
    # A scale per input row would not factor out of the sum over that row.
    if len(scale.dims) == 2 and scale.dims[0] != 1:
        return None
    return _Int8Weights(numpy_helper.to_array(stored), scaled.input[1])


def _integer_product(
    node: onnx.NodeProto, weights: _Int8Weights
) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """The nodes and initializers that compute `node`'s output from int8 products."""
    prefix = f"{node.name or node.output[0]}_int8"
    quantized, activation_scale, activation_zero = (
        f"{prefix}_activations",
        f"{prefix}_activation_scale",
        f"{prefix}_activation_zero_point",
    )
    weights_name, weights_zero = f"{prefix}_weights", f"{prefix}_weights_zero_point"
    shifted = (weights.values.astype(np.int16) + _UINT8_ZERO_POINT).astype(np.uint8)
    initializers = [
        numpy_helper.from_array(shifted, weights_name),
        numpy_helper.from_array(np.array(_UINT8_ZERO_POINT, dtype=np.uint8), weights_zero),
    ]
    nodes = [
        helper.make_node(
            "DynamicQuantizeLinear",
            [node.input[0]],
            [quantized, activation_scale, activation_zero],
            name=f"{prefix}_quantize",
        ),
        helper.make_node(
            "MatMulInteger",
            [quantized, weights_name, activation_zero, weights_zero],
            [f"{prefix}_sums"],
            name=f"{prefix}_matmul",
        ),
        helper.make_node(
            "Mul",
            [activation_scale, weights.scale_name],
            [f"{prefix}_scale"],
            name=f"{prefix}_scales",
        ),
        helper.make_node(
            "Cast", [f"{prefix}_sums"], [f"{prefix}_float"], to=TensorProto.FLOAT, name=prefix
        ),
        helper.make_node(
            "Mul", [f"{prefix}_float", f"{prefix}_scale"], [node.output[0]], name=f"{prefix}_out"
        ),
    ]
    return nodes, initializers


def _without_unused(nodes: list[onnx.NodeProto], graph_outputs: set[str]) -> list[onnx.NodeProto]:
    """`nodes` without those whose outputs nothing reads (the replaced dequantization)."""
    kept = nodes
    while True:
        read = {name for node in kept for name in node.input} | graph_outputs
        remaining = [node for node in kept if any(output in read for output in node.output)]
        if len(remaining) == len(kept):
            return kept
        kept = remaining
