"""Speed and memory benchmark of the short-text pipeline (writes BENCHMARKS.md).

1. SCCL training steps/s at batch 64 with explicit augmentation on StackOverflow: texts padded
   to the longest of the batch (ours) against every text padded to max_length (the authors' code).
2. Embedding throughput over the whole StackOverflow set for evaluation: length-sorted batches
   padded to the longest against unsorted batches padded to max_length.
3. Peak resident memory of `python run.py method=sccl dataset=stackoverflow` at batch 64.

Usage: python scripts/bench.py [--data-dir ../shared/data/short_text] [--steps 30] [--out BENCHMARKS.md]
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PROJECT_ROOT", str(ROOT))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

from datamodules.short_text import ShortTextDataModule  # noqa: E402
from lightning_modules.sccl import SCCL  # noqa: E402


def datamodule(data_dir: str, pad_to_max: bool, sort: bool = True, batch_size: int = 64) -> ShortTextDataModule:
    dm = ShortTextDataModule(
        data_dir=data_dir, file="stackoverflow.csv", text_column="text0", aug_columns=["text1"],
        num_clusters=20, tokenizer="minilm", batch_size=batch_size, eval_batch_size=256,
        pad_to_max=pad_to_max, eval_sort_by_length=sort, seed=0,
    )
    dm.setup()
    return dm


def train_steps_per_second(data_dir: str, pad_to_max: bool, steps: int, warmup: int = 3) -> float:
    torch.manual_seed(0)
    model = SCCL(num_clusters=20, backbone="minilm")
    model.set_centroids(torch.randn(20, model.encoder.dim))  # the step's cost does not depend on where they are
    optimizer = model.configure_optimizers()
    model.train()
    batches = iter(datamodule(data_dir, pad_to_max).train_dataloader())
    start = None
    for i in range(warmup + steps):
        if i == warmup:
            start = time.perf_counter()
        batch = next(batches)
        loss = model.training_step(batch, i)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return steps / (time.perf_counter() - start)


def embedding_texts_per_second(data_dir: str, sorted_batches: bool) -> tuple[float, int]:
    from callbacks.eval_outputs import collect_eval_outputs

    torch.manual_seed(0)
    model = SCCL(num_clusters=20, backbone="minilm")
    dm = datamodule(data_dir, pad_to_max=not sorted_batches, sort=sorted_batches)
    start = time.perf_counter()
    out = collect_eval_outputs(model, dm.eval_dataloader())
    return len(out["embeddings"]) / (time.perf_counter() - start), len(out["embeddings"])


def peak_memory_of_run(data_dir: str, steps: int) -> tuple[float, list[str], float]:
    command = [sys.executable, "run.py", "method=sccl", "dataset=stackoverflow", f"data_dir={data_dir}",
               "batch_size=64", f"trainer.max_steps={steps}", "logger=csv", "~callbacks.progress",
               "hydra.run.dir=logs/bench/memory_run", "print_table=false"]
    start = time.perf_counter()
    subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # Linux: KiB
    return peak_kib / 1024**2, command, wall


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem = next(int(x.split()[1]) for x in Path("/proc/meminfo").read_text().splitlines() if x.startswith("MemTotal"))
        mem_gib = f"{mem / 1024**2:.1f} GiB RAM"
    except (OSError, StopIteration):
        mem_gib = "unknown RAM"
    return f"{cpu}, {os.cpu_count()} cores, {mem_gib}; Python {platform.python_version()}, torch {torch.__version__} ({torch.get_num_threads()} threads)"


def verdict(value: float, target: float, higher_is_better: bool = True) -> str:
    ok = value >= target if higher_is_better else value < target
    return "meets target" if ok else "MISSES target"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data" / "short_text"))
    parser.add_argument("--steps", type=int, default=30, help="timed training steps per variant")
    parser.add_argument("--memory-steps", type=int, default=20, help="training steps of the memory run")
    parser.add_argument("--out", default=str(ROOT / "BENCHMARKS.md"))
    args = parser.parse_args()
    if not (Path(args.data_dir) / "stackoverflow.csv").exists():
        sys.exit(f"error: {args.data_dir}/stackoverflow.csv not found; pass --data-dir <folder with stackoverflow.csv>")

    load = os.getloadavg()
    longest = train_steps_per_second(args.data_dir, pad_to_max=False, steps=args.steps)
    padded = train_steps_per_second(args.data_dir, pad_to_max=True, steps=args.steps)
    emb_sorted, n_texts = embedding_texts_per_second(args.data_dir, sorted_batches=True)
    emb_padded, _ = embedding_texts_per_second(args.data_dir, sorted_batches=False)
    peak_gib, command, wall = peak_memory_of_run(args.data_dir, args.memory_steps)
    train_ratio, emb_ratio = longest / padded, emb_sorted / emb_padded
    load_after = os.getloadavg()

    text = f"""# Benchmarks

Measured by `make bench` (`python scripts/bench.py`) on {dt.date.today().isoformat()}.

- Machine: {machine()}
- Load average (1 min) at start / end: {load[0]:.2f} / {load_after[0]:.2f} (other processes on the machine slow every variant alike; ratios are what we compare)
- Data: StackOverflow ({n_texts} texts, `{args.data_dir}`), backbone `minilm` (all-MiniLM-L6-v2), max_length 32

| what | ours | baseline | ratio | target | verdict |
|---|---|---|---|---|---|
| SCCL training, batch 64, explicit augmentation (steps/s, {args.steps} timed steps after 3 warm-up) | {longest:.3f} (pad to longest in batch) | {padded:.3f} (pad to max_length) | {train_ratio:.2f}x | >= 1.5x | {verdict(train_ratio, 1.5)} |
| Full-set embedding for evaluation (texts/s) | {emb_sorted:.0f} (length-sorted batches of 256) | {emb_padded:.0f} (unsorted, padded to max_length) | {emb_ratio:.2f}x | >= 1.3x | {verdict(emb_ratio, 1.3)} |
| Peak resident memory of a full run (GiB) | {peak_gib:.2f} | | | < 6 GiB | {verdict(peak_gib, 6.0, higher_is_better=False)} |

Memory run: `{' '.join(command[1:])}` ({wall:.0f} s wall: model load, KMeans initialisation and evaluation on all
{n_texts} texts before training, {args.memory_steps} training steps, final evaluation and predictions). Peak RSS is the
largest resident set of the child process (`getrusage(RUSAGE_CHILDREN).ru_maxrss`).
"""
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
