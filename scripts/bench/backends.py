"""Texts/s of each corpus-pass backend (torch, onnx, onnx-int8) on one machine, and how far their embeddings and
cluster assignments are from torch's (textcore/encoding/onnx_runtime.py; BENCHMARKS.md).

The encoder is the offline MiniLM (``minilm``, mean pooling, 32 tokens: what ``tools.py predict`` and the API embed
with). The texts are the first ``--texts`` rows of a labelled CSV (``label`` and a text column). The texts are cut
into ``--chunks`` parts and every backend embeds a part (length-sorted batches within it, the order of the
backends rotated from part to part) before the next part is taken, all in one process, so that other work on a
shared machine slows them alike: the ratios to torch are the numbers to read. Then:

- the largest absolute difference of an embedding value of the float32 export from torch's;
- KMeans (K = the number of labels, seeded) is fitted on torch's embeddings, and every backend's embeddings are
  assigned to its centres (what ``tools.py predict --assign kmeans`` does with a run's centroids): the share of texts
  assigned as torch assigns them, and ACC/NMI against the labels.

``--openvino`` adds OpenVINO's runtime (``pip install openvino``; not a dependency of the project) on the float32
export, as one more column: the project adds a backend only where it measures faster than those it has.

``--profile`` runs every ONNX export over the texts once more under ONNX Runtime's profiler and reports where its
time goes: each operator type's share of the kernel time, and the matrix products' share of the profiled pass
(``MatMul``, the fused ``Attention`` with its Q/K/V projection and everything else it does, and their int8 forms).
From it, the ceiling of each export's ratio to torch: the ratio it would reach if everything but its matrix
products took no time (``ceiling``), an upper bound on what any change of the graph around ONNX Runtime's matrix
kernels can give on this machine.

``--int8-float-feed-forward`` measures another int8 recipe than the code's (``RECIPE`` of
``textcore/encoding/onnx_runtime.py``): the layers whose feed-forward output projection stays float (``all``,
``none`` or layer numbers such as ``0,1``); the result records the recipe it measured.

Usage: python scripts/bench/backends.py --data <labelled.csv> [--texts 20000] [--chunks 4] [--text-column text0]
       [--int8-float-feed-forward 0,1] [--openvino] [--profile] [--output backends.json]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

BACKENDS = ("torch", "onnx", "onnx-int8")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="a labelled CSV (label + text column)")
    parser.add_argument("--text-column", default="text0")
    parser.add_argument("--texts", type=int, default=20_000)
    parser.add_argument("--chunks", type=int, default=4, help="the texts are embedded in this many parts, every "
                        "backend on a part before the next part")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--int8-float-feed-forward", default=None,
                        help="all, none or layer numbers (0,1): the int8 recipe's float feed-forward outputs "
                             "(default: the code's)")
    parser.add_argument("--openvino", action="store_true",
                        help="also OpenVINO's runtime on the float32 export (needs `pip install openvino`)")
    parser.add_argument("--profile", action="store_true",
                        help="also where each ONNX export's time goes (ONNX Runtime's profiler) and the ratio to "
                             "torch it would reach with free non-matrix work")
    parser.add_argument("--output", type=Path, default=None, help="a JSON file for the results")
    args = parser.parse_args(argv)

    import pandas as pd
    import torch
    from sklearn.cluster import KMeans

    from evaluation.clustering.metrics import clustering_scores
    from evaluation.model_io.load import load_encoder
    from evaluation.model_io.predict import nearest_centroid
    from textcore.device_settings import usable_cores
    from textcore.encoding.onnx_runtime import RECIPE, embedder

    if args.int8_float_feed_forward is not None:
        RECIPE["onnx-int8"]["float_feed_forward"] = float_layers(args.int8_float_feed_forward)

    frame = pd.read_csv(args.data, nrows=args.texts, keep_default_na=False)
    texts, labels = frame[args.text_column].astype(str).tolist(), frame["label"].to_numpy()
    encoder, pooling = load_encoder("minilm")
    cache = Path(tempfile.mkdtemp(prefix="bench-backends-"))
    models, export_seconds = {}, {}
    for backend in BACKENDS:
        start = time.perf_counter()
        models[backend] = embedder(encoder, pooling, backend, cache)
        export_seconds[backend] = round(time.perf_counter() - start, 1)
    if args.openvino:
        models["openvino"] = openvino_encoder(models["onnx"], usable_cores())
    backends = list(models)
    seconds = {b: 0.0 for b in backends}
    parts = {b: [] for b in backends}
    chunk = -(-len(texts) // args.chunks)
    for c, start in enumerate(range(0, len(texts), chunk)):
        part = texts[start:start + chunk]
        turn = c % len(backends)
        for backend in backends[turn:] + backends[:turn]:  # the order rotated from chunk to chunk
            began = time.perf_counter()
            parts[backend].append(models[backend].encode(part, batch_size=args.batch_size, pooling=pooling).numpy())
            seconds[backend] += time.perf_counter() - began
        done = start + len(part)
        print(f"{done:,} texts: " + ", ".join(f"{b} {done / seconds[b]:,.0f} texts/s" for b in backends),
              file=sys.stderr, flush=True)
    embeddings = {b: np.concatenate(parts[b]) for b in backends}
    rate = {b: len(texts) / seconds[b] for b in backends}
    k = len(np.unique(labels))
    centres = KMeans(k, n_init=3, random_state=0).fit(embeddings["torch"]).cluster_centers_
    assigned = {b: nearest_centroid(embeddings[b], centres)[0] for b in backends}
    result = {
        "texts": len(texts), "data": args.data.name, "encoder": "minilm (mean pooling, 32 tokens)",
        "chunks": args.chunks, "seconds": {b: round(seconds[b], 1) for b in backends},
        "threads": {"torch": torch.get_num_threads(), "onnxruntime": usable_cores(),
                    **({"openvino": usable_cores()} if args.openvino else {})},
        "export_seconds": export_seconds,
        "recipe": RECIPE,
        "texts_per_second": {b: round(rate[b], 1) for b in backends},
        "ratio_to_torch": {b: round(rate[b] / rate["torch"], 2) for b in backends},
        "max_abs_difference_to_torch": {b: float(np.abs(embeddings[b] - embeddings["torch"]).max())
                                        for b in backends},
        "assignment_agreement_with_torch": {b: float((assigned[b] == assigned["torch"]).mean()) for b in backends},
        "scores": {b: {m: round(100 * v, 2) for m, v in clustering_scores(labels, assigned[b]).items()
                       if m in ("acc", "nmi")} for b in backends},
        "k": int(k),
    }
    if args.profile:
        result["profile"] = {}
        for backend in ("onnx", "onnx-int8"):
            shares, product_share = profiled_pass(models[backend], texts, args.batch_size, cache)
            result["profile"][backend] = {
                "kernel_time_by_operator": shares, "matrix_product_share_of_pass": round(product_share, 3),
                "ceiling_ratio_to_torch": round(ceiling(result["ratio_to_torch"][backend], product_share), 2)}
    return print_result(result, args.output)


# ONNX Runtime's operators that multiply matrices (float and int8); the fused attention counts whole
MATRIX_PRODUCTS = ("MatMul", "Gemm", "FusedMatMul", "Attention", "QAttention", "DynamicQuantizeMatMul",
                   "MatMulInteger", "MatMulIntegerToFloat", "QGemm")


def kernel_seconds(events: list[dict]) -> dict[str, float]:
    """Seconds of kernel time per operator type in ONNX Runtime's profile (its JSON trace: one ``Node`` event
    ``<node>_kernel_time`` per node run, ``dur`` in microseconds, ``args.op_name`` the operator type)."""
    seconds: dict[str, float] = {}
    for event in events:
        if event.get("cat") == "Node" and event.get("name", "").endswith("_kernel_time"):
            op = event["args"]["op_name"]
            seconds[op] = seconds.get(op, 0.0) + event["dur"] / 1e6
    return seconds


def ceiling(ratio: float, product_share: float) -> float:
    """The ratio to torch a pass measured at ``ratio`` would reach if only its matrix products, ``product_share``
    of its time, took any."""
    if not 0 < product_share <= 1:
        raise ValueError(f"the matrix products' share of the pass must be in (0, 1], got {product_share}")
    return ratio / product_share


def profiled_pass(onnx_encoder, texts, batch_size: int, folder: Path) -> tuple[dict[str, float], float]:
    """``onnx_encoder``'s export run over ``texts`` (its own batches) in a session like its own, with ONNX
    Runtime's profiler on: each operator type's share of the kernel time (largest first), and the matrix
    products' share of the pass's wall time (the profiler's own cost counts as non-matrix time, so the share is
    if anything low and the ceiling high)."""
    import copy

    import onnxruntime

    from textcore.encoding.onnx_runtime import session_options

    options = session_options(onnx_encoder.threads)
    options.enable_profiling = True
    options.profile_file_prefix = str(folder / f"profile-{onnx_encoder.backend}")
    profiled = copy.copy(onnx_encoder)
    profiled.session = onnxruntime.InferenceSession(str(onnx_encoder.path), options,
                                                    providers=["CPUExecutionProvider"])
    began = time.perf_counter()
    profiled.encode(texts, batch_size=batch_size)
    wall = time.perf_counter() - began
    seconds = kernel_seconds(json.loads(Path(profiled.session.end_profiling()).read_text()))
    total = sum(seconds.values())
    shares = {op: round(s / total, 4) for op, s in sorted(seconds.items(), key=lambda item: -item[1])}
    return shares, sum(s for op, s in seconds.items() if op in MATRIX_PRODUCTS) / wall


def openvino_encoder(onnx_encoder, threads: int):
    """An encoder like ``onnx_encoder`` (same tokenisation and batches) whose graph, its float32 export, runs in
    OpenVINO's CPU runtime with ``threads`` inference threads."""
    import copy

    try:
        import openvino
    except ImportError:
        raise SystemExit("--openvino: OpenVINO is not installed here; `pip install openvino`, or leave --openvino out")

    compiled = openvino.Core().compile_model(str(onnx_encoder.path), "CPU", {"INFERENCE_NUM_THREADS": threads,
                                                                            "PERFORMANCE_HINT": "LATENCY"})
    request = compiled.create_infer_request()

    def run(tokens: dict) -> np.ndarray:  # the same inputs as ONNX Runtime gets: the export is one graph
        return request.infer(onnx_encoder.feed(tokens))[compiled.outputs[0]].copy()

    twin = copy.copy(onnx_encoder)
    twin.backend, twin._run = "openvino", run
    return twin


def float_layers(value: str):
    """``all``, ``none`` (no layer: every feed-forward output quantised) or comma-separated layer numbers."""
    if value in ("all", "none"):
        return "all" if value == "all" else []
    return [int(layer) for layer in value.split(",")]


def print_result(result: dict, output: Path | None) -> dict:
    """The measurement as JSON on stdout, and in ``output`` when given."""
    text = json.dumps(result, indent=2)
    print(text)
    if output is not None:
        output.write_text(text + "\n")
    return result


if __name__ == "__main__":
    main()
