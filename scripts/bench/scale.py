"""The ``scale`` part of ``make bench``: what a run costs as the corpus grows, on generated corpora.

For each size (``--scale-sizes``, default 10k, 100k, 1M texts) a corpus of 8 topics is generated from the demo
corpus's vocabulary (:func:`write_corpus`, seeded) and one run is timed, as a user would start it::

    python run.py dataset=csv data_dir=<folder> dataset.file=scale_<n>.csv dataset.num_clusters=8 backbone=tiny \\
        trainer.max_steps=20 dataset.callbacks.clustering_eval.every_n_steps=10

Recorded per run: the wall time of the process, its peak resident memory (``os.wait4``'s ``ru_maxrss``), and the
phases results.json gives (``seconds``: reading the data, the start-up before the first step, the training steps
with the evaluations during training, the end: last evaluation, predictions.csv, report). The growth exponent is
the slope of log(wall) against log(texts) between the two largest sizes (and fitted over every size). The same
run at ``--scale-minilm`` texts with the MiniLM backbone; then ``tools.py predict`` with the smallest run's model
on new texts of the smallest and the largest size, for its peak memory.

Usage: python scripts/bench/bench.py --only scale [--scale-sizes 10000,100000,1000000] [--scale-minilm 100000]
"""
from __future__ import annotations

import csv
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "datamodules" / "demo_data" / "demo.csv"
STEPS, EVERY = 20, 10


def write_corpus(n: int, path: Path, seed: int = 0) -> Path:
    """``n`` texts of 5-14 words, each drawn from the words of one of the demo corpus's 8 topics (label column)."""
    vocabulary: dict[str, list[str]] = {}
    with DEMO.open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            vocabulary.setdefault(row["label"], []).extend(re.findall(r"[A-Za-z']+", row["text"]))
    labels = sorted(vocabulary)
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        for i in range(n):
            label = labels[i % len(labels)]
            writer.writerow([" ".join(rng.choices(vocabulary[label], k=rng.randint(5, 14))), label])
    return path


def process_env(**extra: str) -> dict:
    """The environment of a benchmarked command: this checkout's configuration, tokenizers on one thread."""
    return dict(os.environ, PROJECT_ROOT=str(ROOT), TOKENIZERS_PARALLELISM="false", **extra)


def timed_process(command: list[str], log: Path) -> dict:
    """Wall seconds and peak resident memory (GiB) of ``command`` run from the repository root."""
    env = process_env()
    start = time.perf_counter()
    with log.open("w") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({process.returncode}); see {log}")
    return {"wall_seconds": round(wall, 1), "peak_gib": round(usage.ru_maxrss / 1024**2, 2)}


def fresh_run_folder(out: Path) -> Path:
    """``out``, emptied of an earlier measurement's run: a benchmark times a run from its start, and run.py (rightly)
    refuses to start a new run over a finished one."""
    if out.exists():
        print(f"bench: replacing the earlier measurement's run folder {out}", file=sys.stderr, flush=True)
        shutil.rmtree(out)
    return out


def user_command(command: list[str], folder: Path) -> str:
    """The command as a user types it, with the generated corpus's folder as ``<folder>``."""
    return " ".join(["python", *command[1:]]).replace(str(folder), "<folder>")


def run_at(n: int, folder: Path, backbone: str) -> dict:
    corpus = folder / f"scale_{n}.csv"
    if not corpus.is_file():
        write_corpus(n, corpus)
    out = fresh_run_folder(folder / f"run_{backbone}_{n}")
    command = [sys.executable, "run.py", "dataset=csv", f"data_dir={folder}", f"dataset.file={corpus.name}",
               "dataset.num_clusters=8", f"backbone={backbone}", f"trainer.max_steps={STEPS}",
               f"dataset.callbacks.clustering_eval.every_n_steps={EVERY}", f"hydra.run.dir={out}", "print_table=false"]
    print(f"bench scale: {backbone}, {n:,} texts ...", file=sys.stderr, flush=True)
    measured = timed_process(command, folder / f"run_{backbone}_{n}.log")
    results = json.loads((out / "results.json").read_text())
    clustering = results.get("clustering") or {}
    return {"texts": n, "backbone": backbone, "command": user_command(command, folder), **measured,
            "phases": results.get("seconds"), "evaluation": clustering.get("seconds"),
            "final_texts": (clustering.get("final") or {}).get("texts"), "run": str(out)}


def predict_at(n: int, folder: Path, run: str) -> dict:
    new = folder / f"new_{n}.csv"
    if not new.is_file():
        write_corpus(n, new, seed=1)
    command = [sys.executable, "tools.py", "predict", "--run", run, "--input", str(new),
               "--output", str(folder / f"assigned_{n}.csv")]
    print(f"bench scale: predict, {n:,} texts ...", file=sys.stderr, flush=True)
    return {"texts": n, "command": user_command(command, folder), **timed_process(command, folder / f"predict_{n}.log")}


def growth_exponent(sizes: list[int], seconds: list[float]) -> float:
    """Least-squares slope of log(seconds) against log(sizes): 1 is linear."""
    return float(np.polyfit(np.log(sizes), np.log(seconds), 1)[0])


def part_scale(args) -> dict:
    folder = ROOT / "logs" / "bench" / "scale"
    sizes = sorted(int(s) for s in str(args.scale_sizes).split(","))
    runs = [run_at(n, folder, "tiny") for n in sizes]
    walls = [r["wall_seconds"] for r in runs]
    result = {"steps": STEPS, "every_n_steps": EVERY, "runs": runs,
              "exponent_fit": growth_exponent(sizes, walls) if len(sizes) > 1 else None,
              "exponent_last": (math.log(walls[-1] / walls[-2]) / math.log(sizes[-1] / sizes[-2])
                                if len(sizes) > 1 else None)}
    if args.scale_minilm:
        result["minilm"] = run_at(int(args.scale_minilm), folder, "minilm")
    result["predict"] = [predict_at(n, folder, runs[0]["run"]) for n in (sizes[0], sizes[-1])]
    for entry in runs + [result.get("minilm")] + result["predict"]:
        if entry and "run" in entry:
            entry["run"] = entry["run"].replace(str(ROOT) + os.sep, "")
    return result
