"""Stop a run whose training loss is NaN or infinite, before that step touches the weights.

``NonFiniteLossGuard`` looks at the loss Lightning is about to back-propagate
(``on_before_backward``). A NaN/inf loss stops training with :class:`NonFiniteLossError`, which
names the step and the loss terms; the terms and the batch's texts are written to
``<output_dir>/nonfinite_loss.json``. The optimizer never steps on that loss, and no checkpoint is
written after it, so ``last.ckpt`` stays the last good state.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import torch
from lightning.pytorch.callbacks import Callback

from callbacks.safety.checkpointing import atomic_write_text
from errors import UserError

REPORT_FILE = "nonfinite_loss.json"


class NonFiniteLossError(UserError, FloatingPointError):
    """The training loss became NaN or infinite; the message says where the details are."""


def logged_loss_terms(trainer) -> dict[str, float]:
    """Values the training step logged for this step (``train/loss``, ``train/instance_loss``, ...)."""
    terms = {}
    results = getattr(trainer, "_results", None)
    for key, metric in (results.items() if results is not None else []):
        if not key.startswith("training_step.") or not getattr(metric.meta, "on_step", False):
            continue
        value = getattr(metric, "value", None)
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            terms[metric.meta.name] = float(value.detach().cpu())
    return terms


def batch_texts(batch) -> dict[str, list]:
    """The texts (and row indices) a batch carries: ``text`` (short texts), ``texts`` (streamed
    sentences), ``texts1``/``texts2`` (NLI pairs), ``index``."""
    if not isinstance(batch, dict):
        return {}
    found = {}
    for key, value in batch.items():
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
            found[key] = list(value)
        elif key == "index" and isinstance(value, torch.Tensor):
            found[key] = value.tolist()
    return found


def _number(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)  # JSON has no NaN/inf


class NonFiniteLossGuard(Callback):
    """Raises :class:`NonFiniteLossError` on a NaN/inf training loss, after writing the report.

    Args:
        output_dir: the run folder, where ``nonfinite_loss.json`` goes (None: not written).

    Needs nothing from the module; under DDP a non-finite loss on any rank stops every rank.
    """

    def __init__(self, output_dir: str | None = None):
        self.output_dir = Path(output_dir) if output_dir else None
        self._batch = None
        self._batch_idx: int | None = None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._batch, self._batch_idx = batch, batch_idx

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._batch = None  # do not hold the batch's tensors between steps

    def on_before_backward(self, trainer, pl_module, loss: torch.Tensor) -> None:
        bad = not bool(torch.isfinite(loss.detach()).all())
        if trainer.world_size > 1:
            bad = trainer.strategy.reduce_boolean_decision(bad, all=False)
        if not bad:
            return
        step = trainer.global_step + 1  # the step being taken; global_step counts finished ones
        terms = logged_loss_terms(trainer)
        if not terms:  # a module that logs nothing: the loss Lightning was given
            terms["loss"] = float(loss.detach().float().mean().cpu()) if loss.numel() else float("nan")
        checkpoint = getattr(trainer.checkpoint_callback, "last_path", None)
        checkpoint_step = getattr(trainer.checkpoint_callback, "last_step", None)
        report = {
            "step": step, "epoch": trainer.current_epoch, "batch_index_in_epoch": self._batch_idx,
            "loss_terms": {k: _number(v) for k, v in terms.items()},
            "last_good_checkpoint": str(checkpoint) if checkpoint else None,
            "last_good_checkpoint_step": checkpoint_step,
            "batch": batch_texts(self._batch),
        }
        where = ""
        if self.output_dir is not None and trainer.is_global_zero:
            path = self.output_dir / REPORT_FILE
            atomic_write_text(path, json.dumps(report, indent=2, ensure_ascii=False))
            where = f"; the loss terms and the batch's texts are in {path}"
        if checkpoint:
            kept = f"the last good checkpoint is {checkpoint} (step {checkpoint_step})"
            then = f"then resume with ckpt_path={checkpoint} or start again"
        else:
            kept, then = "no checkpoint had been written yet", "then start again"
        shown = ", ".join(f"{k}={v:.4g}" for k, v in terms.items())
        raise NonFiniteLossError(
            f"the training loss is not finite at step {step} ({shown}); training stopped before this step "
            f"changed the weights{where}; {kept}. Lower the learning rate (method.lr), clip gradients "
            f"(trainer.gradient_clip_val=1.0) or check those texts, {then}."
        )
