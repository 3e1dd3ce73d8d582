"""The raw training step at the papers' scale: every method, every precision, our step against the authors' layout,
peak memory and model FLOPs utilisation (the main table of ``scripts/bench/gpu.py``).

For each row: ``ours`` is the project's step (length-sorted chunks, the views in one call; optionally cached
gradients); ``authors`` is the encoder layout of the authors' code (every view padded to 32 and run in its own
call) with this project's losses, which agree with theirs (the loss code costs little beside the encoder; SCCL's
whole step as the authors compute it is in scripts/bench/bench.py, CPU); both under the same precision. One batch
is reused: the step alone, nothing of the loop around it.

Steps/s over ``--steps`` timed steps after ``--warmup``; tokens/s counts the texts' real tokens; MFU is
6 x backbone parameters x real tokens per second against the card's dense peak for the precision
(``shared.PEAK_TFLOPS``). The ``vs plain`` column is each cached-gradients row against the same step without them.
"""
from __future__ import annotations

from pathlib import Path

import torch

from scripts.bench.gpu_steps.shared import (
    TimedSteps,
    build,
    card_peak,
    matmul_parameters,
    method_precisions,
    release,
    show,
)


def measure(module, batch, precision: str, device: torch.device, steps: int, warmup: int) -> dict:
    """Mean seconds of ``steps`` steps on one reused batch after ``warmup`` steps, peak GiB, the last loss."""
    steps_of = TimedSteps(module, precision, device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times, losses = [], []
    for i in range(warmup + steps):
        seconds, loss = steps_of.step(batch, i)
        if i >= warmup:
            times.append(seconds)
            losses.append(float(loss.detach()))
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None
    return {"seconds": sum(times) / len(times), "peak_gib": peak, "loss": losses[-1]}


def raw_rows(args, methods: list[str], device: torch.device, tmp: Path) -> list[dict]:
    """For each method and precision: the authors' layout, ours at every ``--chunk-tokens``, and ours with each
    ``--grad-cache`` budget at the last chunk size."""
    variants = [("authors", 0, 0)] + [("ours", c, 0) for c in args.chunk_tokens] + \
               [("ours", args.chunk_tokens[-1], g) for g in args.grad_cache if g]
    rows = []
    for method, arch, folder, batch, kind, precision in method_precisions(args, methods, device, tmp):
        for layout, chunk, grad_cache in variants:
            torch.manual_seed(0)
            module, data, tokens = build(method, folder, batch, kind, device, layout, chunk, grad_cache)
            params = matmul_parameters(module.encoder.backbone)
            result = measure(module, data, precision, device, args.steps, args.warmup)
            peak = card_peak(device, precision)
            flops = 6 * params * tokens / result["seconds"]
            rows.append({"method": method, "arch": arch, "batch": batch, "precision": precision,
                         "layout": layout, "chunk_tokens": chunk, "grad_cache_tokens": grad_cache,
                         "steps_per_s": 1 / result["seconds"], "tokens_per_s": tokens / result["seconds"],
                         "peak_gib": result["peak_gib"], "loss": result["loss"],
                         "mfu": flops / (peak * 1e12) if peak else None})
            show(rows[-1])
            del module, data
            release(device)
    return rows


def render_raw(rows: list[dict]) -> list[str]:
    """The table's lines (none without rows)."""
    raw = [r for r in rows if r["layout"] in ("authors", "ours")]
    if not raw:
        return []
    lines = ["| method | backbone, batch | precision | layout | chunk tokens | cached | steps/s | tokens/s | "
             "peak GiB | MFU | vs authors | vs plain |", "|---" * 12 + "|"]
    for row in raw:
        base = next(r for r in raw if r["method"] == row["method"] and r["precision"] == row["precision"]
                    and r["layout"] == "authors")
        peak = "-" if row["peak_gib"] is None else f"{row['peak_gib']:.1f}"
        mfu = "-" if row["mfu"] is None else f"{100 * row['mfu']:.0f} %"
        # cached gradients against the same step without them (the target: >= 0.6x where the batch fits)
        plain = next((r for r in raw if row["grad_cache_tokens"] and r["method"] == row["method"]
                      and r["precision"] == row["precision"] and r["layout"] == "ours"
                      and r["chunk_tokens"] == row["chunk_tokens"] and not r["grad_cache_tokens"]), None)
        versus = f"{row['steps_per_s'] / plain['steps_per_s']:.2f}x" if plain else "-"
        lines.append(f"| {row['method']} | {row['arch']}, {row['batch']} | {row['precision']} | {row['layout']} | "
                     f"{row['chunk_tokens'] or '-'} | {row['grad_cache_tokens'] or '-'} | {row['steps_per_s']:.2f} | "
                     f"{row['tokens_per_s']:.0f} | {peak} | {mfu} | "
                     f"{row['steps_per_s'] / base['steps_per_s']:.2f}x | {versus} |")
    return lines
