"""The passes over a corpus on the GPU against the CPU of the same machine: ``tools.py predict`` (texts/s) and KMeans
(the seconds of a fit and of assigning every row), for the ``corpus`` part of the prepared GPU session.

- predict: SCCL's tiny-backbone model (scripts/bench/corpus.py trains it) assigns ``--texts`` generated texts
  (scripts/bench/scale.py) on one CPU process with every core, then on one GPU;
- KMeans: ``--kmeans-rows`` random float32 rows of 384 dimensions (MiniLM's width) into ``--clusters`` clusters, fitted
  on the default sample (``kmeans_sample``, 50,000 rows) and every row assigned: the ``fast`` backend (the CPU's
  default) beside ``torch`` on the GPU, and ``faiss`` where its build sees the GPU.

Writes ``<out>/corpus_devices.md`` (the table the session pastes into BENCHMARKS.md) and ``corpus_devices.json``.
``--tiny``: a few thousand texts and rows on the CPU alone, to check the script without a GPU.

Usage: python scripts/bench/corpus_devices.py --out logs/gpu_session/corpus [--texts 200000] [--tiny]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from scripts.bench.corpus import predict_run, train_model  # noqa: E402
from scripts.bench.scale import write_corpus  # noqa: E402


def default_kmeans_sample() -> int:
    """The rows a run's KMeans fits on by default (conf/config.yaml ``kmeans_sample``)."""
    from omegaconf import OmegaConf

    from textcore.checkout import CONF

    return int(OmegaConf.load(CONF / "config.yaml").kmeans_sample)


def kmeans_row(backend: str, data, clusters: int, sample: int) -> dict:
    from textcore.kmeans import kmeans_fit

    start = time.perf_counter()
    result = kmeans_fit(data, clusters, seed=0, n_init=1, backend=backend, sample=sample)
    return {"backend": backend, "device": result.device, "rows": len(data), "clusters": clusters,
            "fitted_on": result.fitted_rows or len(data), "seconds": round(time.perf_counter() - start, 2),
            "inertia": float(result.inertia_)}


def measure(out: Path, texts: int, kmeans_rows: int, clusters: int, gpu: bool) -> dict:
    import numpy as np

    out.mkdir(parents=True, exist_ok=True)
    run = train_model(out)
    source = out / f"new_{texts}.csv"
    if not source.is_file():
        write_corpus(texts, source, seed=1)
    predict = [predict_run(run, source, out, "cpu", 1, threads=None)]
    if gpu:
        predict.append(predict_run(run, source, out, "gpu", 1, threads=None))
    data = np.random.default_rng(0).standard_normal((kmeans_rows, 384), dtype=np.float32)
    sample = min(default_kmeans_sample(), kmeans_rows // 2)
    kmeans = [kmeans_row("fast", data, clusters, sample)]
    if gpu:
        from textcore.kmeans import faiss_gpus

        kmeans.append(kmeans_row("torch", data, clusters, sample))
        if faiss_gpus():
            kmeans.append(kmeans_row("faiss", data, clusters, sample))
    return {"predict": predict, "kmeans": kmeans}


def render(result: dict, device: str) -> str:
    lines = [f"### Passes over a corpus: GPU against CPU ({device})", "",
             "| `tools.py predict` | texts | wall (s) | texts/s | peak RSS (GiB) |", "|---|---|---|---|---|"]
    for row in result["predict"]:
        lines.append(f"| {row['device']} | {row['texts']:,} | {row['wall_seconds']:.0f} | "
                     f"{row['texts_per_second']:,.0f} | {', '.join(f'{g:.2f}' for g in row['peak_gib'])} |")
    rates = {row["accelerator"]: row["texts_per_second"] for row in result["predict"]}
    if "gpu" in rates:
        ratio = rates["gpu"] / rates["cpu"]
        lines += ["", f"One GPU against one CPU process with every core: {ratio:.1f}x the texts/s."]
    lines += ["", "| KMeans backend | device | rows | clusters | fitted on | seconds (fit and assign) |",
              "|---|---|---|---|---|---|"]
    for row in result["kmeans"]:
        lines.append(f"| {row['backend']} | {row['device']} | {row['rows']:,} | {row['clusters']} | "
                     f"{row['fitted_on']:,} | {row['seconds']:.2f} |")
    commands = "; ".join(f"`{row['command']}`" for row in result["predict"])
    lines += ["", f"Commands: {commands}; KMeans: `textcore.kmeans.kmeans_fit(rows, K, n_init=1, backend=..., "
              f"sample=...)` (scripts/bench/corpus_devices.py)."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--texts", type=int, default=200_000, help="texts predict assigns on each device")
    parser.add_argument("--kmeans-rows", type=int, default=1_000_000)
    parser.add_argument("--clusters", type=int, default=100)
    parser.add_argument("--tiny", action="store_true", help="a few thousand texts and rows, on the CPU alone")
    args = parser.parse_args(argv)
    import torch

    gpu = torch.cuda.is_available() and not args.tiny
    texts, rows = (3000, 4000) if args.tiny else (args.texts, args.kmeans_rows)
    result = measure(args.out.resolve(), texts, rows, 8 if args.tiny else args.clusters, gpu)
    device = torch.cuda.get_device_name(0) if gpu else "CPU only"
    (args.out / "corpus_devices.json").write_text(json.dumps({"device": device, **result}, indent=1) + "\n")
    text = render(result, device)
    (args.out / "corpus_devices.md").write_text(text)
    print(text, flush=True)
    return result


if __name__ == "__main__":
    main()
