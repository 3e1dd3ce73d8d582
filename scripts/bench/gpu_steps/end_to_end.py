"""End-to-end rows (``scripts/bench/gpu.py --end-to-end``): ``Trainer.fit`` through ``run.train`` on the real
DataModule, evaluation off, beside the raw step of the same layout (SCCL/AECL on StackOverflow: two encoder views,
the first is the original). Steps/s come from the difference of two run lengths (``--e2e-steps``), each timed from
its first step to the end of training; the loop's overhead is the difference of their times per step; start-up is
from the call of ``run.train`` to the first step (data, model, the KMeans of the centroids).
"""
from __future__ import annotations

import time
from pathlib import Path

import torch

from scripts.bench.gpu_steps.raw_step import measure
from scripts.bench.gpu_steps.shared import (
    build,
    card_peak,
    data_file,
    first_callbacks,
    matmul_parameters,
    method_precisions,
    run_config,
    run_overrides,
    show,
)

E2E_METHODS = ("sccl", "aecl")  # short-text methods: the end-to-end row trains on StackOverflow itself


def timed_run(overrides: list[str], device: torch.device) -> tuple[float, float]:
    """Seconds of one ``run.train``: its training loop, from the first step's start to the end of training, and
    its start-up, from the call to the first step (data, model, e.g. the KMeans before the first step)."""
    from lightning.pytorch.callbacks import Callback

    from ctclust.training import train as training

    marks = {}

    class LoopTimer(Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            if "first" not in marks:
                marks["first"] = time.perf_counter()

        def on_train_end(self, trainer, pl_module):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            marks["end"] = time.perf_counter()

    cfg = run_config(overrides)
    with first_callbacks(LoopTimer()):
        marks["start"] = time.perf_counter()
        training.train(cfg)
    return marks["end"] - marks["first"], marks["first"] - marks["start"]


def end_to_end(args, device: torch.device, tmp: Path) -> list[dict]:
    """One row per method, precision and ``--e2e-variants`` entry (the defaults first)."""
    short, long = args.e2e_steps
    data_dir = data_file("short").parent.resolve()
    variants = [()] + [tuple(v.split()) for v in args.e2e_variants]  # the defaults first, then each variant
    rows = []
    methods = [m for m in args.e2e_methods if m in E2E_METHODS]
    for method, arch, folder, batch, kind, precision in method_precisions(args, methods, device, tmp):
        chunk = args.chunk_tokens[-1] if args.e2e_chunk is None else args.e2e_chunk
        torch.manual_seed(0)
        module, data, tokens = build(method, folder, batch, kind, device, "ours", chunk, 0, views=2)
        params = matmul_parameters(module.encoder.backbone)
        raw = measure(module, data, precision, device, args.steps, args.warmup)
        del module, data
        # the variants' runs alternate, repeat by repeat, so that a drift of the machine hits them alike
        seconds = {variant: [] for variant in variants}
        start_ups = {variant: [] for variant in variants}
        for repeat in range(args.e2e_repeats):
            for index, variant in enumerate(variants):
                pair = []
                for steps in (short, long):
                    out = tmp / f"e2e_{method}_{precision}_{index}_{steps}_{repeat}"
                    overrides = run_overrides(method, folder, batch, precision, device, chunk, steps, data_dir,
                                              out) + list(variant)
                    loop, start_up = timed_run(overrides, device)
                    pair.append(loop)
                    start_ups[variant].append(start_up)
                seconds[variant].append((pair[1] - pair[0]) / (long - short))
        peak = card_peak(device, precision)
        for variant in variants:
            per_step = sorted(seconds[variant])[len(seconds[variant]) // 2]
            flops = 6 * params * tokens / per_step
            row = {"method": method, "arch": arch, "batch": batch, "precision": precision,
                   "layout": "end-to-end", "views": 2, "chunk_tokens": chunk, "grad_cache_tokens": 0,
                   "steps_per_s": 1 / per_step, "tokens_per_s": tokens / per_step, "peak_gib": None,
                   "loss": raw["loss"], "mfu": flops / (peak * 1e12) if peak else None,
                   "raw_steps_per_s": 1 / raw["seconds"], "overhead_ms": 1000 * (per_step - raw["seconds"]),
                   "start_up_s": sorted(start_ups[variant])[len(start_ups[variant]) // 2],
                   "settings": " ".join(variant)}
            rows.append(row)
            show(row)
    return rows


def render_end_to_end(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    lines = ["", "End to end (`Trainer.fit` on the real DataModule, evaluation off; steps/s from the difference of "
             "two run lengths, each timed from its first step to the end of training) beside the raw step of the "
             "same layout (2 views, one batch reused); start-up: from `run.train` to the first step (data, model, "
             "KMeans of the centroids), the median of the runs:", "",
             "| method | backbone, batch | precision | chunk tokens | settings | end-to-end steps/s | raw steps/s | "
             "end-to-end / raw | loop overhead ms/step | MFU | start-up s |", "|---" * 11 + "|"]
    for row in rows:
        mfu = "-" if row["mfu"] is None else f"{100 * row['mfu']:.0f} %"
        settings = f"`{row['settings']}`" if row.get("settings") else "defaults"
        lines.append(f"| {row['method']} | {row['arch']}, {row['batch']} | {row['precision']} | "
                     f"{row['chunk_tokens'] or '-'} | {settings} | {row['steps_per_s']:.2f} | "
                     f"{row['raw_steps_per_s']:.2f} | "
                     f"{row['steps_per_s'] / row['raw_steps_per_s']:.2f} | {row['overhead_ms']:.1f} | {mfu} | "
                     f"{row['start_up_s']:.1f} |")
    return lines
