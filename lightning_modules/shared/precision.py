"""Training precision for ``trainer=gpu`` / ``trainer=ddp``: bf16 where the GPU computes it natively.

``conf/trainer/gpu.yaml`` sets ``precision: ${gpu_precision:}``; this resolver picks, when the run
starts, Lightning's ``bf16-mixed`` on GPUs of compute capability 8.0 or newer (A100, RTX 3090,
H100: bf16 tensor cores, no loss scaling needed) and ``16-mixed`` (float16 with a gradient scaler)
on older ones (V100, T4), which emulate bf16 slowly. Without a CUDA device it gives ``32-true``.
The papers trained in float32: ``trainer=gpu_fp32`` or ``trainer.precision=32-true``; any explicit
``trainer.precision=...`` replaces the automatic choice. The resolved value is what
``config_resolved.yaml`` records.
"""
from __future__ import annotations

import torch
from omegaconf import OmegaConf

RESOLVER = "gpu_precision"
BF16_CAPABILITY = (8, 0)


def gpu_precision(device: int | None = None) -> str:
    """``bf16-mixed`` | ``16-mixed`` | ``32-true`` for CUDA ``device`` (default: the current one)."""
    if not torch.cuda.is_available():
        return "32-true"
    capability = torch.cuda.get_device_capability(device)
    return "bf16-mixed" if tuple(capability) >= BF16_CAPABILITY else "16-mixed"


def register_precision_resolver() -> None:
    """Make ``${gpu_precision:}`` resolvable (idempotent; run.py calls it at import)."""
    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, lambda: gpu_precision())
