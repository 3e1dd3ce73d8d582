"""The compiled step in steady state (``scripts/bench/gpu.py --compile``): ``torch.compile`` of the backbone in each
given mode, beside the eager step, cycling through ``--distinct-batches`` different batches (so the widths vary as
in training), one padded call a step (static shapes: CUDA graphs can apply), optionally with every batch padded to a
multiple of ``--bucket`` tokens so that few shapes occur. The first pass over the batches (where every shape
compiles) is reported apart: compile seconds = its time less the steady step time it would have taken; steady
steps/s after ``--warmup`` passes; break-even = the steps after which compiling has paid for itself.
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

from scripts.bench.gpu_steps.shared import TimedSteps, build, method_precisions, release, show, texts

COMPILE_METHODS = ("sccl", "aecl")  # short-text methods: distinct batches of StackOverflow's two columns


def distinct_batches(module, kind: str, batch: int, count: int, bucket: int, device: torch.device) -> list[dict]:
    """``count`` different training batches (two views: the texts and their augmentation), each padded to its
    longest text, or up to a multiple of ``bucket`` tokens (``pad_to_multiple_of``; padding is masked, so the
    embeddings are those of the plain batch: tests/scripts/test_bench_gpu.py)."""
    from textcore.encoding.token_batches import with_token_counts

    a, b = texts(kind, batch * count)
    out = []
    for i in range(count):
        rows = slice(i * batch, (i + 1) * batch)

        def tok(xs):
            tokens = module.encoder.tokenizer(list(xs), padding="longest", truncation=True,
                                              max_length=module.encoder.max_length, return_tensors="pt",
                                              pad_to_multiple_of=bucket or None)
            return {k: (v.to(device) if isinstance(v, torch.Tensor) else v)
                    for k, v in with_token_counts(tokens).items()}

        out.append({"index": torch.arange(batch, device=device), "view1": tok(a[rows]), "view2": tok(b[rows])})
    return out


def measure_cycle(module, batches: list[dict], precision: str, device: torch.device, steps: int,
                  warmup: int) -> dict:
    """Steps over ``batches`` in turn: the first pass (every shape's first step: compilation) timed apart, then
    ``warmup`` passes, then ``steps`` timed steps; steady = the median step."""
    steps_of = TimedSteps(module, precision, device)

    def step(i: int) -> float:
        return steps_of.step(batches[i % len(batches)], i)[0]

    first = sum(step(i) for i in range(len(batches)))
    for i in range(warmup * len(batches)):
        step(len(batches) + i)
    times = sorted(step(i) for i in range(steps))
    steady = times[len(times) // 2]
    return {"first_pass_s": first, "steady_s": steady, "compile_s": max(0.0, first - len(batches) * steady)}


def compiled_rows(args, device: torch.device, tmp: Path) -> list[dict]:
    """Eager and compiled steps (``--compile`` modes) over ``--distinct-batches`` batches, with and without
    bucketed lengths (``--bucket``), one padded encoder call a step."""
    rows = []
    methods = [m for m in args.compile_methods if m in COMPILE_METHODS]
    for method, arch, folder, batch, kind, precision in method_precisions(args, methods, device, tmp):
        for bucket in args.bucket:
            eager_s = None
            for mode in ["eager", *(args.compile if bucket in args.compile_bucket else [])]:
                if mode == "reduce-overhead" and device.type != "cuda":
                    print("bench_gpu: compile mode reduce-overhead (CUDA graphs) skipped: no CUDA device",
                          file=sys.stderr, flush=True)
                    continue
                torch.manual_seed(0)
                torch._dynamo.reset()  # each variant compiles afresh: its compile time is its own
                module, _, _ = build(method, folder, batch, kind, device, "ours", 0, 0, views=2)
                data = distinct_batches(module, kind, batch, args.distinct_batches, bucket, device)
                if mode != "eager":
                    module.encoder.backbone.compile(dynamic=args.compile_dynamic, backend=args.compile_backend,
                                                    mode=None if mode == "default" else mode)
                result = measure_cycle(module, data, precision, device, args.steps, args.warmup)
                widths = sorted({int(b[v]["input_ids"].shape[1]) for b in data for v in ("view1", "view2")})
                eager_s = result["steady_s"] if mode == "eager" else eager_s
                saved = eager_s - result["steady_s"] if eager_s else 0.0
                row = {"method": method, "arch": arch, "batch": batch, "precision": precision,
                       "layout": "compiled", "mode": mode, "bucket": bucket, "widths": widths,
                       "steps_per_s": 1 / result["steady_s"], "compile_s": result["compile_s"] if mode != "eager"
                       else None, "vs_eager": eager_s / result["steady_s"] if eager_s else None,
                       "break_even_steps": (result["compile_s"] / saved) if mode != "eager" and saved > 0
                       else None, "chunk_tokens": 0, "grad_cache_tokens": 0, "peak_gib": None, "loss": None,
                       "mfu": None}
                rows.append(row)
                show(row)
                del module, data
                release(device)
    return rows


def render_compiled(rows: list[dict], paper_steps: int = 3000) -> list[str]:
    if not rows:
        return []
    lines = ["", "Compiled step in steady state (`torch.compile` of the backbone; one padded call a step over "
             f"distinct batches; compile s = the first pass over them less its steady time; break-even: steps "
             f"until compiling has paid for itself; {paper_steps} steps: a paper run's training time, compile "
             "included):", "",
             "| method | backbone, batch | precision | bucket | widths | mode | steady steps/s | vs eager | compile s "
             f"| break-even steps | {paper_steps} steps, min |", "|---" * 11 + "|"]
    for row in rows:
        compile_s = row["compile_s"] or 0.0
        total = (paper_steps / row["steps_per_s"] + compile_s) / 60
        lines.append(f"| {row['method']} | {row['arch']}, {row['batch']} | {row['precision']} | "
                     f"{row['bucket'] or '-'} | {len(row['widths'])} ({row['widths'][0]}-{row['widths'][-1]}) | "
                     f"{row['mode']} | {row['steps_per_s']:.2f} | "
                     + ("-" if row["vs_eager"] is None else f"{row['vs_eager']:.2f}x") + " | "
                     + ("-" if row["compile_s"] is None else f"{row['compile_s']:.1f}") + " | "
                     + ("-" if row["break_even_steps"] is None else f"{row['break_even_steps']:.0f}")
                     + f" | {total:.1f} |")
    return lines
