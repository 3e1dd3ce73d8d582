"""A :class:`~textcore.encoding.encoder.TextEncoder` run by ONNX Runtime: the same embeddings, faster on a CPU.

Every pass over a corpus outside training (``predict``/``transform`` of the API, ``tools.py predict``,
``tools.py evaluate``) can take a ``backend``:

- ``torch``: the encoder itself (eager PyTorch), the default;
- ``onnx``: the backbone and its pooling exported once to ONNX (``torch.onnx.export``), its transformer layers
  fused by ONNX Runtime's graph optimiser (``textcore.encoding.onnx_fusion``), run by ONNX Runtime in float32: the
  same embeddings up to float rounding;
- ``onnx-int8``: that fused graph with its weights quantised to int8
  (``onnxruntime.quantization.quantize_dynamic``): 1.5-1.7x the texts/s of torch on a 2-core AVX2 CPU (VNNI or AMX
  should give more); embeddings close but not equal (BENCHMARKS.md).

The export is cached in ``<cache folder>/onnx/`` (a run folder's, for a run) under a name made of a hash of the
encoder's weights, its pooling and a hash of the recipe (:data:`RECIPE`): an encoder trained further, or an export
made another way, is never taken for this one. Before it is used, an export embeds a few texts and is compared with
the torch encoder (:data:`TOLERANCE`); a disagreement is one line naming the backend and how far it is off.

ONNX Runtime is an optional dependency: ``pip install -e ".[onnx]"`` (``make install`` installs it).
"""
from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from textcore.device_settings import usable_cores
from textcore.encoding.backends import BACKENDS, check_backend
from textcore.errors import UserError

log = logging.getLogger(__name__)

__all__ = ["BACKENDS", "BackendError", "OnnxEncoder", "check_against_torch", "check_backend", "embedder", "export",
           "session_options"]
ONNX_POOLINGS = ("mean", "cls", "cls_before_pooler")  # one backbone call each; the prompt poolings need several
# what an export may differ from torch on the check texts: the largest absolute difference of an embedding value
# (fp32: float rounding of a different kernel order), or the smallest cosine similarity (int8: quantised weights)
TOLERANCE = {"onnx": {"max_abs": 1e-3}, "onnx-int8": {"min_cosine": 0.95}}
# How the exports are made, read by the code that makes them; a hash of it is part of their names, so a cached
# export of another recipe is not reused (``recipe_key``). BENCHMARKS.md has the measurements behind the choices.
RECIPE = {
    # traced with eager attention (onnx_fusion.eager_attention; named here for the hash), then ONNX Runtime's
    # transformer optimiser for this model type (onnx_fusion; None: the traced graph as it is)
    "onnx": {"opset": 17, "trace": "eager attention", "optimiser": "bert"},
    # quantize_dynamic on that graph: int8 weights, one scale per output channel (one per tensor: MiniLM's embeddings
    # fell to a cosine of 0.91 with torch's on short texts, 0.98 per channel), 7-bit (reduce_range: CPUs without VNNI
    # multiply them without saturating); the nodes of `ops` (``Attention``: each layer's fused Q/K/V projection; the
    # embedding table stays float) except the feed-forward output projection of the layers in `float_feed_forward`
    # ("all" or layer numbers), whose input, after GELU, has the widest range of any product's
    "onnx-int8": {"per_channel": True, "reduce_range": True, "ops": ["MatMul", "Attention"],
                  "float_feed_forward": [0, 1]},
}
CHECK_TEXTS = (
    "How do I revert a git commit?",
    "The telescope found a faint galaxy behind the cluster.",
    "Best pasta recipe with garlic and olive oil",
    "stock markets fell sharply after the announcement",
    "a",
    "Which football team won the championship last year, and who scored the winning goal in the final?",
)


class BackendError(UserError, ValueError):
    """A backend that cannot be used here (unknown, not installed, or an export that disagrees with torch)."""


def _onnxruntime():
    try:
        import onnxruntime
    except ImportError:
        raise BackendError("the onnx backends need ONNX Runtime: pip install -e \".[onnx]\" (or pip install "
                           "onnxruntime onnx), or use backend torch.") from None
    return onnxruntime


def weights_key(encoder) -> str:
    """A hash of the encoder's weights (every tensor of its state dict, names and values), 16 hex digits."""
    digest = hashlib.sha256()
    for name, tensor in encoder.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


class _Pooled(torch.nn.Module):
    """The encoder's backbone and pooling as one graph: (ids, mask[, token types]) -> embeddings [B, d]."""

    def __init__(self, encoder, pooling: str):
        super().__init__()
        self.encoder, self.pooling = encoder, pooling

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        return self.encoder._pooled(input_ids, attention_mask, token_type_ids, pooling=self.pooling, full=False)


def recipe_key(backend: str) -> str:
    """A hash of how ``backend``'s export is made (:data:`RECIPE`; int8 adds its own to the float32 one's),
    8 hex digits."""
    steps = [RECIPE["onnx"]] + ([RECIPE["onnx-int8"]] if backend == "onnx-int8" else [])
    return hashlib.sha256(json.dumps(steps, sort_keys=True).encode()).hexdigest()[:8]


def export_path(encoder, pooling: str, backend: str, cache_dir: Path) -> Path:
    """``<cache_dir>/onnx/<weights hash>-<pooling>-<recipe hash>-<fp32|int8>.onnx``: one place for the layout
    (``tools.py predict``, the API, ``tools.py evaluate`` and a run's end-of-run pass all export through here)."""
    name = f"{weights_key(encoder)}-{pooling}-{recipe_key(backend)}"  # any token count: the limit is the tokenizer's
    return Path(cache_dir) / "onnx" / f"{name}-{'int8' if backend == 'onnx-int8' else 'fp32'}.onnx"


def export(encoder, pooling: str, backend: str, cache_dir: Path) -> Path:
    """The ONNX file of ``encoder`` with ``pooling`` for ``backend``: written once into ``<cache_dir>/onnx/``,
    found there afterwards."""
    check_backend(backend)
    if backend == "torch":
        raise ValueError("backend torch has no export")
    if pooling not in ONNX_POOLINGS:
        raise BackendError(f"backend {backend}: pooling '{pooling}' takes several backbone calls and is not exported "
                           f"(poolings {ONNX_POOLINGS} are); use backend torch.")
    target = export_path(encoder, pooling, backend, cache_dir)
    if target.is_file():
        log.info("%s: using the cached export %s", backend, target)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fp32 = export_path(encoder, pooling, "onnx", cache_dir)
    if not fp32.is_file():
        _export_fp32(encoder, pooling, fp32)
    if backend == "onnx-int8":
        _quantise(fp32, target)
    return target


def _export_fp32(encoder, pooling: str, target: Path) -> None:
    """The traced graph (eager attention), then fused by ONNX Runtime's transformer optimiser."""
    _onnxruntime()
    import warnings

    from textcore.encoding.onnx_fusion import eager_attention

    was_training = encoder.training
    encoder.eval()
    sample = encoder.tokenize(list(CHECK_TEXTS[:2]))
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in sample]
    args = tuple(sample[n] for n in names)
    axes = {n: {0: "batch", 1: "tokens"} for n in names}
    axes["embeddings"] = {0: "batch"}
    traced = target.with_name(target.name + ".traced")
    partial = target.with_name(target.name + ".partial")
    log.info("exporting the encoder to ONNX (%s pooling): %s", pooling, target)
    try:
        with warnings.catch_warnings(), torch.no_grad(), eager_attention(encoder.backbone):
            warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and tracer notes: nothing to do
            torch.onnx.export(_Pooled(encoder, pooling), args, str(traced), input_names=names,
                              output_names=["embeddings"], dynamic_axes=axes, opset_version=RECIPE["onnx"]["opset"],
                              dynamo=False, do_constant_folding=True)
    finally:
        encoder.train(was_training)
    if RECIPE["onnx"]["optimiser"]:
        _fuse(encoder, traced, partial, RECIPE["onnx"]["optimiser"])
        traced.unlink()
    else:
        traced.replace(partial)
    partial.replace(target)  # a crash mid-export leaves no file that looks complete


def _fuse(encoder, traced: Path, target: Path, model_type: str) -> None:
    """``traced`` through the transformer optimiser into ``target``; a graph it cannot take stays as traced (the
    same embeddings, fewer fused kernels), which the log says."""
    from textcore.encoding.onnx_fusion import fuse

    config = getattr(encoder.backbone, "config", None)
    heads, hidden = getattr(config, "num_attention_heads", 0), getattr(config, "hidden_size", 0)
    layers = getattr(config, "num_hidden_layers", None)
    try:
        fused = fuse(traced, target, model_type, heads, hidden)
    except Exception as err:  # noqa: BLE001 - an optimiser error on an unknown graph: export it unfused, say so
        log.warning("ONNX Runtime's transformer optimiser failed on this export (%s: %s); it is used unfused",
                    type(err).__name__, err)
        shutil.copyfile(traced, target)
        return
    if layers is not None and fused["Attention"] != layers:
        log.info("the transformer optimiser fused %d attention blocks of %d layers (%s)", fused["Attention"],
                 layers, ", ".join(f"{op} {n}" for op, n in fused.items()))


def _quantise(fp32: Path, target: Path) -> None:
    _onnxruntime()
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    recipe = RECIPE["onnx-int8"]
    partial = target.with_name(target.name + ".partial")
    log.info("quantising the ONNX export to int8 (dynamic): %s", target)
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # the quantiser logs every tensor it leaves alone on the root logger
    try:
        # the settings: RECIPE; DefaultTensorType: the fused nodes (com.microsoft) leave ONNX's shape inference
        # without the types of their outputs, and every tensor here is float32
        quantize_dynamic(str(fp32), str(partial), weight_type=QuantType.QInt8, per_channel=recipe["per_channel"],
                         reduce_range=recipe["reduce_range"], op_types_to_quantize=list(recipe["ops"]),
                         nodes_to_exclude=_feed_forward_outputs(fp32, recipe["float_feed_forward"]),
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    finally:
        root.setLevel(level)
    partial.replace(target)


def _feed_forward_outputs(path: Path, layers) -> list[str]:
    """The MatMul nodes of the feed-forward output projection (BERT's ``layer.N.output.dense``, named after the
    module by the exporter) of the transformer layers ``layers`` (layer numbers, or "all"); none for a model named
    otherwise."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    found = [n.name for n in graph.node if n.op_type == "MatMul" and "/output/dense/" in n.name
             and "/attention/" not in n.name]
    if layers == "all":
        return found
    return [name for name in found if any(f"/layer.{layer}/" in name for layer in layers)]


def session_options(threads: int):
    """ONNX Runtime's settings for a corpus pass: ``threads`` intra-op threads, one inter-op, every graph
    optimisation, errors only in the log."""
    ort = _onnxruntime()
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # errors only: ORT's warnings about unused initialisers are not the user's
    return options


class OnnxEncoder:
    """Embeds texts like ``TextEncoder.encode`` (same tokenizer, token limit, length-sorted batches, input order
    back), through an ONNX Runtime session of an export; ``threads``: intra-op threads (default: the usable
    cores)."""

    def __init__(self, encoder, pooling: str, backend: str, cache_dir: Path, threads: int | None = None):
        ort = _onnxruntime()
        self.backend, self.pooling, self.encoder = backend, pooling, encoder
        self.tokenizer, self.dim = encoder.tokenizer, encoder.dim
        self.path = export(encoder, pooling, backend, cache_dir)
        self.recipe = recipe_key(backend)  # how the export was made (its name holds it too)
        self.threads = threads or usable_cores()
        self.session = ort.InferenceSession(str(self.path), session_options(self.threads),
                                            providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.agreement: dict | None = None  # the differences to torch on the check texts (``embedder`` measures)

    @property
    def max_length(self) -> int:
        """The torch encoder's token limit at call time (evaluation changes it per task; the graph takes any)."""
        return self.encoder.max_length

    def encode(self, texts: Sequence[str], batch_size: int = 128, pooling: str | None = None,
               sort_by_length: bool = True, pad_to_max: bool = False) -> torch.Tensor:
        """[len(texts), d] float32 on CPU, in input order."""
        from textcore.console import text_bar
        from textcore.encoding.token_batches import token_lengths, tokenize_batch

        if pooling is not None and pooling != self.pooling:
            raise BackendError(f"backend {self.backend}: exported with pooling '{self.pooling}', asked for "
                               f"'{pooling}'; build it with that pooling or use backend torch.")
        if sort_by_length:
            lengths = token_lengths(self.tokenizer, texts, self.max_length)
            order = np.lexsort((np.arange(len(texts)), lengths))
        else:
            order = np.arange(len(texts))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        with text_bar(len(texts), f"embedding ({self.backend})") as bar:
            for start in range(0, len(texts), batch_size):
                idx = order[start:start + batch_size]
                batch = tokenize_batch(self.tokenizer, [texts[i] for i in idx], self.max_length, pad_to_max)
                out[idx] = self._run(batch)
                bar.update(len(idx))
        return torch.from_numpy(out)

    def embed_tokens(self, tokens: dict, pooling: str | None = None) -> torch.Tensor:
        """[B, d] float32 of one token batch (``input_ids``, ``attention_mask``[, ``token_type_ids``]; other keys
        ignored), on the batch's device: what a module's ``embed`` returns, for an evaluation pass
        (``lightning_modules.shared.eval_outputs``)."""
        if pooling is not None and pooling != self.pooling:
            raise BackendError(f"backend {self.backend}: exported with pooling '{self.pooling}', asked for "
                               f"'{pooling}'; build it with that pooling or use backend torch.")
        ids = tokens["input_ids"]
        return torch.from_numpy(self._run(tokens)).to(ids.device)

    def _run(self, tokens: dict) -> np.ndarray:
        return self.session.run(None, self.feed(tokens))[0]

    def feed(self, tokens: dict) -> dict:
        """The graph's inputs (``self.inputs``) from a token batch, as int64 arrays."""
        feed = {}
        for name in self.inputs:
            if name in tokens:
                feed[name] = tokens[name].detach().cpu().numpy().astype(np.int64, copy=False)
            elif name == "token_type_ids":  # a collator that leaves them out: BERT's default, every token type 0
                feed[name] = np.zeros(tuple(tokens["input_ids"].shape), dtype=np.int64)
            else:
                raise BackendError(f"backend {self.backend}: the token batch has no '{name}', which the export "
                                   "takes; use backend torch.")
        return feed


def check_against_torch(onnx_encoder: OnnxEncoder, encoder, pooling: str, texts: Sequence[str] = CHECK_TEXTS) \
        -> dict:
    """Embed ``texts`` with both and compare (:data:`TOLERANCE`); a disagreement is a :class:`BackendError`.
    Returns the measured differences."""
    from textcore.console import show_bars

    with show_bars(False):
        reference = encoder.encode(list(texts), pooling=pooling).double()
        got = onnx_encoder.encode(list(texts), pooling=pooling).double()
    max_abs = float((reference - got).abs().max())
    cosine = torch.nn.functional.cosine_similarity(reference, got, dim=1)
    measured = {"max_abs": max_abs, "min_cosine": float(cosine.min())}
    limit = TOLERANCE[onnx_encoder.backend]
    if measured["max_abs"] > limit.get("max_abs", np.inf) or measured["min_cosine"] < limit.get("min_cosine", -1):
        raise BackendError(
            f"backend {onnx_encoder.backend}: the export {onnx_encoder.path} disagrees with the torch encoder on "
            f"{len(texts)} check texts (largest difference {max_abs:.2e}, smallest cosine {measured['min_cosine']:.4f}"
            f"; allowed {limit}); delete it to export again, or use backend torch.")
    log.info("%s export agrees with torch on %d texts (largest difference %.1e, smallest cosine %.5f)",
             onnx_encoder.backend, len(texts), max_abs, measured["min_cosine"])
    return measured


def embedder(encoder, pooling: str, backend: str, cache_dir: Path | None = None, threads: int | None = None):
    """What embeds a corpus for ``backend``: the torch encoder itself, or an :class:`OnnxEncoder` of it, exported
    into ``cache_dir`` (default: ``~/.cache/ctclust``) and checked against torch."""
    check_backend(backend)
    if backend == "torch":
        return encoder
    cache_dir = Path(cache_dir) if cache_dir is not None else Path.home() / ".cache" / "ctclust"
    encoder = encoder.cpu()  # ONNX Runtime runs here on the CPU; the export is traced from the CPU weights
    onnx_encoder = OnnxEncoder(encoder, pooling, backend, cache_dir, threads)
    onnx_encoder.agreement = check_against_torch(onnx_encoder, encoder, pooling)
    return onnx_encoder
