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
from lightning.pytorch.plugins.precision import MixedPrecision, Precision
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
    """Make ``${gpu_precision:}`` resolvable (idempotent; ctclust.training.train calls it at import)."""
    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, lambda: gpu_precision())


MIXED = {"bf16-mixed": "bf16-mixed", "bf16": "bf16-mixed", "16-mixed": "16-mixed", "16": "16-mixed"}


class CachedCastMixedPrecision(MixedPrecision):
    """Lightning's ``MixedPrecision`` with autocast's cache of weight casts on.

    Lightning turns the cache off because a weight first cast under ``torch.no_grad`` inside the autocast
    region is cached without a graph, and a later use of it with gradients enabled in the same region then
    trains nothing through it. Here a training step runs under one autocast region: with the cache every
    weight is cast to bf16/fp16 once a step instead of once per use (every encoder chunk, every view).
    The project's code never runs a weight without gradients inside the step and then with them: the one
    place that runs the encoder without a graph (cached gradients, ``grad_cache.py``) turns the cache off
    for that part, and its replays run in a region of their own
    (tests/lightning_modules/shared/test_compiled_and_fused_steps.py: the
    weights after training equal those with Lightning's plugin)."""

    def autocast_context_manager(self) -> torch.autocast:
        dtype = torch.bfloat16 if self.precision == "bf16-mixed" else torch.half
        return torch.autocast(self.device, dtype=dtype, cache_enabled=True)


def precision_trainer_kwargs(precision, accelerator: str | None, plugins: list | None) -> dict:
    """Trainer keyword arguments that replace a ``*-mixed`` precision by :class:`CachedCastMixedPrecision`
    (same dtype, same gradient scaler for float16); nothing when the precision is not mixed or a precision
    plugin is given already."""
    mixed = MIXED.get(str(precision))
    if mixed is None or any(isinstance(p, Precision) for p in plugins or []):
        return {}
    on_gpu = str(accelerator).lower() in ("gpu", "cuda") or (str(accelerator).lower() == "auto"
                                                             and torch.cuda.is_available())
    plugin = CachedCastMixedPrecision(mixed, "cuda" if on_gpu else "cpu")
    return {"precision": None, "plugins": [*(plugins or []), plugin]}
