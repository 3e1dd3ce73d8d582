"""Peak memory and step time of a training step with and without cached gradients (``encoder_grad_cache_tokens``).

PairSupCon at batch 1024 and SCCL at batch 400 (the papers' batches), the offline MiniLM, real StackOverflow
texts (PairSupCon's pairs are a text and its augmentation, labels alternating: the cost is the same as NLI
pairs of these lengths). Each measurement is a fresh process: build the module and the batch, run one
warm-up step, then ``--steps`` timed steps (forward, backward, Adam). Memory is the process's peak resident
set (``ru_maxrss``) and the part of it the steps added on top of the model and batch (the activations and
gradients a step holds). Cached and uncached runs alternate, ``--rounds`` times each, so that drifts of the
machine hit both alike. The section of BENCHMARKS.md between the markers below is replaced.

Usage: python scripts/bench/grad_cache.py [--steps 3] [--rounds 2] [--grad-cache-tokens 2048]
"""
from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from datamodules.download.catalogue import data_root  # noqa: E402
from textcore.device_settings import CPU_CHUNK_TOKENS  # noqa: E402

START, END = "<!-- grad-cache:start -->", "<!-- grad-cache:end -->"
CASES = (("pairsupcon", 1024), ("sccl", 400))


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def texts(data_dir: Path, n: int) -> tuple[list[str], list[str]]:
    with (data_dir / "stackoverflow.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))[:n]
    return [r["text0"] for r in rows], [r["text1"] for r in rows]


def child(method: str, batch_size: int, grad_cache_tokens: int, steps: int, data_dir: Path) -> dict:
    import torch

    torch.manual_seed(0)
    a, b = texts(data_dir, batch_size)
    if method == "pairsupcon":
        from lightning_modules.pairsupcon.module import PairSupCon

        module = PairSupCon(backbone="minilm", chunk_tokens=CPU_CHUNK_TOKENS, grad_cache_tokens=grad_cache_tokens)
        tok = module.encoder.tokenize
        batch = {"s1": tok(a), "s2": tok(b), "labels": torch.tensor([1, 0] * (batch_size // 2))}
    else:
        from lightning_modules.sccl.module import SCCL

        module = SCCL(num_clusters=20, backbone="minilm", chunk_tokens=CPU_CHUNK_TOKENS,
                      grad_cache_tokens=grad_cache_tokens)
        module.set_centroids(torch.randn(20, module.encoder.dim))
        tok = module.encoder.tokenize
        batch = {"index": torch.arange(batch_size), "view1": tok(b), "view2": tok(a[::-1]), "original": tok(a)}
    module.log = lambda *args, **kwargs: None
    module.train()
    optimizer = module.configure_optimizers()

    def one_step() -> float:
        start = time.perf_counter()
        optimizer.zero_grad()
        module.training_step(batch, 0).backward()
        optimizer.step()
        return time.perf_counter() - start

    before = rss_mib()  # the model, the batch, the process
    one_step()  # warm-up: Adam's state, the allocator's first growth
    seconds = [one_step() for _ in range(steps)]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds_per_step": statistics.mean(seconds), "peak_mib": peak, "setup_mib": before,
            "step_mib": peak - before}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--grad-cache-tokens", type=int, default=2048)
    parser.add_argument("--data-dir", type=Path, default=data_root() / "short_text")
    parser.add_argument("--out", type=Path, default=ROOT / "BENCHMARKS.md")
    parser.add_argument("--child", nargs=3, metavar=("METHOD", "BATCH", "TOKENS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        method, batch, tokens = args.child
        print(json.dumps(child(method, int(batch), int(tokens), args.steps, args.data_dir)))
        return
    if not (args.data_dir / "stackoverflow.csv").is_file():
        sys.exit(f"error: {args.data_dir}/stackoverflow.csv not found; pass --data-dir <folder with stackoverflow.csv>")
    load_start, started = os.getloadavg()[0], time.perf_counter()
    runs: dict = {}
    for method, batch in CASES:
        for round_ in range(args.rounds):
            variants = (0, args.grad_cache_tokens) if round_ % 2 == 0 else (args.grad_cache_tokens, 0)
            for tokens in variants:
                command = [sys.executable, __file__, "--child", method, str(batch), str(tokens), "--steps",
                           str(args.steps), "--data-dir", str(args.data_dir)]
                print(f"bench_grad_cache: {method} batch {batch} grad_cache_tokens={tokens} (round {round_ + 1})",
                      file=sys.stderr, flush=True)
                done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
                runs.setdefault(f"{method}/{tokens}", []).append(json.loads(done.stdout.strip().splitlines()[-1]))
    lines = [START, "## Cached gradients: memory and time of one step (`scripts/bench/grad_cache.py`)", "",
             f"_Measured {dt.date.today().isoformat()}; load average (1 min) {load_start:.2f} at start, "
             f"{os.getloadavg()[0]:.2f} at end; {time.perf_counter() - started:.0f} s. Command: `python "
             f"scripts/bench/grad_cache.py --steps {args.steps} --rounds {args.rounds} --grad-cache-tokens "
             f"{args.grad_cache_tokens}`. minilm, max length 32, CPU, float32; mean over "
             f"{args.rounds} alternating runs of {args.steps} timed steps each._", "",
             "| method, batch | cached (grad_cache_tokens) | s/step | peak RSS (MiB) | added by the steps (MiB) |",
             "|---|---|---|---|---|"]
    for method, batch in CASES:
        for tokens in (0, args.grad_cache_tokens):
            rs = runs[f"{method}/{tokens}"]
            mean = {k: statistics.mean(r[k] for r in rs) for k in rs[0]}
            lines.append(f"| {method}, {batch} | {'no' if not tokens else tokens} | {mean['seconds_per_step']:.2f} | "
                         f"{mean['peak_mib']:.0f} | {mean['step_mib']:.0f} |")
        off = {k: statistics.mean(r[k] for r in runs[f"{method}/0"]) for k in runs[f"{method}/0"][0]}
        on = {k: statistics.mean(r[k] for r in runs[f"{method}/{args.grad_cache_tokens}"]) for k in off}
        ratio = on["seconds_per_step"] / off["seconds_per_step"]
        lines.append(f"| {method}, {batch}: cached / uncached | | {ratio:.2f}x | "
                     f"{on['peak_mib'] / off['peak_mib']:.2f}x | {on['step_mib'] / max(off['step_mib'], 1e-9):.2f}x |")
    lines += ["", "Target (batch 1024): peak memory of the step at most 1/3 of the uncached run, at most 1.5x its "
              "step time. `added by the steps` is the peak resident set minus the resident set once the model and "
              "the batch are built (what the steps' activations, gradients and Adam's state need); `peak RSS` also "
              "holds the Python process, torch and the model.", END]
    section = "\n".join(lines)
    text = args.out.read_text() if args.out.is_file() else "# Benchmarks\n"
    if START in text:
        text = text[: text.index(START)] + section + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    args.out.write_text(text)
    print(section)


if __name__ == "__main__":
    main()
