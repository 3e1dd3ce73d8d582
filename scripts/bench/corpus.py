"""The ``corpus`` part of ``make bench``: ``python tools.py predict`` on one and on several processes.

A tiny-backbone model (SCCL, 20 steps on the demo corpus) assigns generated corpora (``scale.write_corpus``: 8
topics of the demo corpus's words, seeded) of ``--corpus-sizes`` texts (default 1M and 10M), output to a folder of
parts::

    python tools.py predict --run <run> --input <folder>/new_<n>.csv --output <folder>/parts_<n> \\
        --accelerator cpu --devices 2

On the CPU: the smaller corpus on 1 and 2 processes, the larger on 2 (``OMP_NUM_THREADS=1``: one thread per process,
so that two processes use the two cores of a small machine and one process one of them; a row with the default
threads too). With a GPU: the smaller corpus on 1 GPU and on every GPU of the machine (texts/s per GPU and the
scaling efficiency, rate on N / (N x rate on 1)). Recorded per run: the wall time of the command (start-up and the
one pass that cuts the input into shards included), the predict loop's texts/s and each process's peak resident
memory (from the prediction's ``_complete.json``), and the size of the parts.

Usage: python scripts/bench/bench.py --only corpus [--corpus-sizes 1000000,10000000]
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from scripts.bench.scale import process_env, user_command, write_corpus

ROOT = Path(__file__).resolve().parents[2]
RUN_STEPS = 20


def train_model(folder: Path) -> Path:
    out = folder / "run_tiny"
    if not (out / "checkpoints" / "last.ckpt").is_file():
        command = [sys.executable, "run.py", "backbone=tiny", f"trainer.max_steps={RUN_STEPS}",
                   f"hydra.run.dir={out}", "print_table=false", "callbacks.report.plots=false"]
        subprocess.run(command, cwd=ROOT, env=process_env(), check=True, capture_output=True)
    return out


def predict_run(run: Path, source: Path, folder: Path, accelerator: str, devices: int,
                threads: int | None = 1) -> dict:
    """One prediction from scratch into a folder of parts; the numbers of its ``_complete.json``."""
    output = folder / f"parts_{source.stem}_{accelerator}{devices}"
    shutil.rmtree(output, ignore_errors=True)
    command = [sys.executable, "tools.py", "predict", "--run", str(run), "--input", str(source), "--output",
               str(output), "--accelerator", accelerator, "--devices", str(devices)]
    env = process_env(OMP_NUM_THREADS=str(threads)) if threads else process_env()
    print(f"bench corpus: {source.name} on {devices} {accelerator} process(es) ...", file=sys.stderr, flush=True)
    start = time.perf_counter()
    log = folder / f"{output.name}.log"
    with log.open("w") as handle:
        done = subprocess.run(command, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}); see {log}")
    summary = json.loads((output / "_complete.json").read_text())
    parts = sum(p.stat().st_size for p in output.glob("part-*.parquet"))
    texts = sum(p.stat().st_size for p in (output / "_texts").glob("*.parquet"))
    prefix = f"OMP_NUM_THREADS={threads} " if threads else ""
    return {"texts": summary["rows"], "accelerator": accelerator, "processes": summary["processes"],
            "threads": threads, "device": summary["device"], "wall_seconds": round(wall, 1),
            "loop_seconds": summary["seconds"], "texts_per_second": summary["texts_per_second"],
            "peak_gib": summary["peak_memory_gib"], "parts_mib": round(parts / 2**20, 1),
            "text_shards_mib": round(texts / 2**20, 1), "command": prefix + user_command(command, folder)}


def part_corpus(args) -> dict:
    import torch

    folder = ROOT / "logs" / "bench" / "corpus"
    folder.mkdir(parents=True, exist_ok=True)
    run = train_model(folder)
    sizes = sorted(int(s) for s in str(args.corpus_sizes).split(","))
    sources = {}
    for n in sizes:
        sources[n] = folder / f"new_{n}.csv"
        if not sources[n].is_file():
            print(f"bench corpus: writing {n:,} texts ...", file=sys.stderr, flush=True)
            write_corpus(n, sources[n], seed=1)
    small, large = sources[sizes[0]], sources[sizes[-1]]
    cpu = [predict_run(run, small, folder, "cpu", 1), predict_run(run, small, folder, "cpu", 2),
           predict_run(run, small, folder, "cpu", 1, threads=None)]
    if len(sizes) > 1:
        cpu.append(predict_run(run, large, folder, "cpu", 2))
    result = {"model": f"SCCL, tiny backbone, {RUN_STEPS} steps on the demo corpus", "cpu": cpu, "gpu": []}
    gpus = torch.cuda.device_count()
    if gpus:
        result["gpu"] = [predict_run(run, small, folder, "gpu", 1, threads=None)]
        if gpus > 1:
            result["gpu"].append(predict_run(run, small, folder, "gpu", gpus, threads=None))
        result["gpu_name"] = torch.cuda.get_device_name(0)
    return result
