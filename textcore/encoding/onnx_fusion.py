"""ONNX Runtime's transformer graph optimiser on an export of the encoder (``textcore.encoding.onnx_runtime``).

``onnxruntime.transformers.optimizer.optimize_model`` (model type ``bert``: ``RECIPE`` of ``onnx_runtime``)
replaces each layer's self-attention subgraph by one ``Attention`` node, the embeddings' sum and LayerNorm by
``EmbedLayerNormalization``, each residual add and LayerNorm by ``SkipLayerNormalization`` and the feed-forward bias
and GELU by ``BiasGelu``: fewer, larger kernels, and an ``Attention`` whose Q/K/V projection is one int8 matrix
product once quantised.

Its attention pattern needs two things of the exported graph:

- the backbone traced with eager attention (:func:`eager_attention`): transformers' SDPA path exports its mask as
  ``Where``/``IsNaN`` nodes that the pattern does not know;
- the attention scores scaled by a division (:func:`scale_as_division`): transformers multiplies them by
  1/sqrt(head size), and the pattern takes the first ``Mul`` feeding the scores' ``Add`` for the scale when it looks
  for the scale and for the mask when it looks for the mask, so with two ``Mul`` parents one of the two fails.
"""
from __future__ import annotations

import contextlib
import logging
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

FUSED_OPS = ("Attention", "EmbedLayerNormalization", "SkipLayerNormalization", "BiasGelu")


@contextlib.contextmanager
def eager_attention(backbone):
    """The backbone with transformers' eager attention while the block runs (the export's trace), then as it was."""
    config = getattr(backbone, "config", None)
    before = getattr(config, "_attn_implementation", None)
    switch = getattr(backbone, "set_attn_implementation", None)
    if before in (None, "eager") or switch is None:
        yield
        return
    switch("eager")
    try:
        yield
    finally:
        switch(before)


def scale_as_division(model) -> int:
    """Rewrite each ``Softmax(Add(Mul(MatMul(q, k), c), mask))`` of ``model`` (an ``onnx.ModelProto``, in place) as
    ``Div(MatMul(q, k), 1/c)``: the same scores up to float rounding. Returns how many were rewritten."""
    from onnx import numpy_helper

    graph = model.graph
    producer = {out: node for node in graph.node for out in node.output}
    initialisers = {init.name: init for init in graph.initializer}

    def constant(name: str):
        node = producer.get(name)
        if node is not None and node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            return numpy_helper.to_array(node.attribute[0].t)
        return numpy_helper.to_array(initialisers[name]) if name in initialisers else None

    rewritten = 0
    for softmax in [n for n in graph.node if n.op_type == "Softmax"]:
        add = producer.get(softmax.input[0])
        if add is None or add.op_type != "Add":
            continue
        for name in add.input:
            mul = producer.get(name)
            scores = producer.get(mul.input[0]) if mul is not None and mul.op_type == "Mul" else None
            scale = constant(mul.input[1]) if scores is not None and scores.op_type == "MatMul" else None
            if scale is None or scale.size != 1:
                continue
            inverse = numpy_helper.from_array(np.asarray(1.0 / scale, dtype=scale.dtype), f"{mul.name}/inverse_scale")
            graph.initializer.append(inverse)
            mul.op_type, mul.input[1] = "Div", inverse.name
            rewritten += 1
    return rewritten


def fuse(source: Path, target: Path, model_type: str, num_heads: int, hidden_size: int) -> dict[str, int]:
    """``source`` (an export) through the transformer optimiser for ``model_type`` (``bert``: BERT-like encoders;
    heads and hidden size 0: read from the graph) into ``target``; returns how many nodes of each fused kind
    (:data:`FUSED_OPS`) it made. A graph the optimiser cannot read is an error (the caller decides)."""
    import onnx
    from onnxruntime.transformers.optimizer import optimize_model

    model = onnx.load(str(source))
    scale_as_division(model)
    rewritten = Path(str(target) + ".scaled")
    onnx.save(model, str(rewritten))
    quiet = _Quiet()
    try:
        with quiet:  # the optimiser logs each pattern it tries on the root logger
            optimised = optimize_model(str(rewritten), model_type=model_type, num_heads=num_heads,
                                       hidden_size=hidden_size, opt_level=0, use_gpu=False)
            optimised.save_model_to_file(str(target))
    finally:
        rewritten.unlink(missing_ok=True)
    counts = {op: 0 for op in FUSED_OPS}
    for node in optimised.model.graph.node:
        if node.op_type in counts:
            counts[node.op_type] += 1
    return counts


class _Quiet:
    """The root logger and the optimiser's loggers at ERROR while the block runs."""

    NAMES = ("", "onnx_model", "fusion_base", "fusion_attention", "fusion_utils", "onnxruntime.transformers")

    def __enter__(self):
        self.levels = {name: logging.getLogger(name).level for name in self.NAMES}
        for name in self.NAMES:
            logging.getLogger(name).setLevel(logging.ERROR)

    def __exit__(self, *exc):
        for name, level in self.levels.items():
            logging.getLogger(name).setLevel(level)
