"""The host syncs of a training loop (``scripts/bench/gpu.py --count-syncs``; also profile_loop.py's): every sync
CUDA reports (``torch.cuda.set_sync_debug_mode("warn")``) in the quiet steps of one ``run.train``, by source line
(docs/gpu.md, "A training loop that does not wait for the host"). Needs a CUDA device.
"""
from __future__ import annotations

import collections
from pathlib import Path

import torch

from scripts.bench.gpu_steps.shared import data_file, first_callbacks, method_backbone, run_config, run_overrides


def host_syncs(overrides: list[str], device: torch.device, steps: int) -> tuple[list[int], collections.Counter]:
    """The host syncs CUDA reports in one ``run.train`` of ``steps`` steps, by source line, summed over its quiet
    steps: neither the first two nor the last, none of them a logging step (the run logs after its last step only);
    (those steps, the counts)."""
    import warnings

    from lightning.pytorch.callbacks import Callback

    from ctclust.training import train as training

    state = {"step": None}
    seen = collections.defaultdict(collections.Counter)

    class Steps(Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            state["step"] = trainer.global_step

        def on_train_epoch_end(self, trainer, pl_module):
            state["step"] = None  # what runs once an epoch (AECL's pseudo-labels) is no step's

        def on_train_end(self, trainer, pl_module):
            state["step"] = None

    def record(message, category, filename, lineno, file=None, line=None):
        if state["step"] is not None and "synchroniz" in str(message):
            seen[state["step"]][f"{Path(filename).name}:{lineno}"] += 1

    overrides = [o for o in overrides if not o.startswith("trainer.log_every_n_steps")]
    cfg = run_config(overrides + [f"trainer.log_every_n_steps={steps + 10}"])
    saved_showwarning = warnings.showwarning
    try:
        with first_callbacks(Steps()), warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = record
            torch.cuda.set_sync_debug_mode("warn")
            training.train(cfg)
    finally:
        torch.cuda.set_sync_debug_mode("default")
        warnings.showwarning = saved_showwarning
    quiet = list(range(2, steps - 1))
    total = collections.Counter()
    for step in quiet:
        total.update(seen.get(step, {}))
    return quiet, total


def count_syncs(args, device: torch.device, tmp: Path, steps: int = 12) -> dict:
    """Host syncs CUDA reports in ``steps`` SCCL steps of ``Trainer.fit`` in bf16 (``host_syncs``), none of them
    a logging step after the first two; per step and by source line."""
    if device.type != "cuda":
        print("count-syncs: no CUDA device, nothing to count")
        return {}
    _, folder, batch, _ = method_backbone("sccl", args.tiny, tmp)
    overrides = run_overrides("sccl", folder, batch, "bf16", device, 0, steps, data_file("short").parent.resolve(),
                              tmp / "syncs")
    quiet, total = host_syncs(overrides, device, steps)
    per_step = sum(total.values()) / max(1, len(quiet))
    print(f"count-syncs: {per_step:.1f} syncs a step in steps {quiet[0]}-{quiet[-1]} (no logging step); "
          f"sources: {dict(total.most_common(8))}")
    return {"per_step": per_step, "sources": dict(total)}
