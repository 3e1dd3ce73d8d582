"""Stop a run whose training loss is NaN or infinite, and never save the weights it touched.

``NonFiniteLossGuard`` looks at the loss Lightning is about to back-propagate (``on_before_backward``)
without waiting for the GPU: it keeps, on the loss's device, the first step whose loss was not finite and
that step's loss terms, and reads them when the host reads values anyway: at every logging step
(``trainer.log_every_n_steps``), before every checkpoint is written and at the end of training. A NaN/inf
loss then stops training with :class:`NonFiniteLossError`, which names the step and the loss terms; the
terms and the batch's texts are written to ``<output_dir>/nonfinite_loss.json``. No checkpoint is written
after that step, so ``last.ckpt`` stays the last good state. When the bad step is itself a logging step
(``log_every_n_steps=1``: every step) the optimizer never steps on that loss; otherwise the steps up to
the next logging step have run on (their weights are not saved).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import torch
from lightning.pytorch.callbacks import Callback

from callbacks.safety.checkpointing import atomic_write_text
from lightning_modules.shared.step_budget import training_ends_after_batch
from textcore.errors import UserError

REPORT_FILE = "nonfinite_loss.json"


class NonFiniteLossError(UserError, FloatingPointError):
    """The training loss became NaN or infinite; the message says where the details are."""


def logged_loss_terms(trainer) -> dict[str, torch.Tensor]:
    """Values the training step logged for this step (``train/loss``, ``train/instance_loss``, ...), as
    float32 scalars on their device (reading them would wait for the GPU)."""
    terms = {}
    results = getattr(trainer, "_results", None)
    for key, metric in (results.items() if results is not None else []):
        if not key.startswith("training_step.") or not getattr(metric.meta, "on_step", False):
            continue
        value = getattr(metric, "value", None)
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            terms[metric.meta.name] = value.detach().float().reshape(())
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

    Needs nothing from the module; under DDP a non-finite loss on any rank stops every rank (decided when
    the flag is read, on every rank at the same steps).
    """

    def __init__(self, output_dir: str | None = None):
        self.output_dir = Path(output_dir) if output_dir else None
        self._batch_idx: int | None = None
        self._reset()

    def _reset(self) -> None:
        self._first_bad: torch.Tensor | None = None  # on the loss's device: the first bad step, -1 while none
        self._terms: dict[str, torch.Tensor] = {}  # that step's logged terms
        # step -> (batch index in epoch, epoch, the batch's texts and row indices), since the last read
        self._batches: dict[int, tuple] = {}

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._batch_idx = batch_idx
        kept = ({k: v for k, v in batch.items() if k == "index" or batch_texts({k: v})}
                if isinstance(batch, dict) else None)
        self._batches[trainer.global_step + 1] = (batch_idx, trainer.current_epoch, kept)

    def on_before_backward(self, trainer, pl_module, loss: torch.Tensor) -> None:
        step = trainer.global_step + 1  # the step being taken; global_step counts finished ones
        bad = ~torch.isfinite(loss.detach()).all()
        if self._first_bad is None:
            self._first_bad = torch.full((), -1, dtype=torch.long, device=loss.device)
        first = bad & (self._first_bad < 0)
        self._first_bad = torch.where(first, torch.full_like(self._first_bad, step), self._first_bad)
        terms = logged_loss_terms(trainer)
        if not terms and loss.numel():  # a module that logs nothing: the loss Lightning was given
            terms["loss"] = loss.detach().float().mean()
        for name, value in terms.items():
            kept = self._terms.get(name)
            kept = kept if kept is not None else torch.full_like(value, float("nan"))
            self._terms[name] = torch.where(first, value, kept)
        if getattr(trainer._logger_connector, "should_update_logs", True):
            self._check(trainer, current_step=step)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        # a checkpoint due by step count (or the last step's) is written after this hook (Lightning runs checkpoint
        # callbacks last): read the flag first, so the report names the bad step; a save due by time or a signal
        # meets the checkpoint's own check of the weights instead
        every = int(getattr(trainer.checkpoint_callback, "every_n_steps", 0) or 0)
        last = training_ends_after_batch(trainer)
        if (every and trainer.global_step % every == 0) or last:
            self._check(trainer, current_step=None)
        # texts of the steps since the last read only: a later read needs the bad step's batch
        if getattr(trainer._logger_connector, "should_update_logs", True):
            self._batches.clear()

    def on_save_checkpoint(self, trainer, pl_module, checkpoint) -> None:
        self._check(trainer, current_step=None)  # raising here leaves the last good file in place

    def on_train_end(self, trainer, pl_module) -> None:
        self._check(trainer, current_step=None)

    def _check(self, trainer, current_step: int | None) -> None:
        """Read the flag (waits for the device); raise when a step's loss was not finite."""
        bad_step = -1 if self._first_bad is None else int(self._first_bad.item())
        bad = bad_step >= 0
        if trainer.world_size > 1:
            bad = trainer.strategy.reduce_boolean_decision(bad, all=False)
        if bad:
            self._stop(trainer, bad_step, current_step)

    def _stop(self, trainer, bad_step: int, current_step: int | None) -> None:
        terms = {name: float(value.cpu()) for name, value in self._terms.items()}
        if bad_step < 0:  # another rank's loss was not finite
            terms, bad_step = {}, trainer.global_step + 1
        batch_idx, epoch, batch = self._batches.get(bad_step, (None, trainer.current_epoch, None))
        checkpoint = getattr(trainer.checkpoint_callback, "last_path", None)
        checkpoint_step = getattr(trainer.checkpoint_callback, "last_step", None)
        report = {
            "step": bad_step, "epoch": epoch, "batch_index_in_epoch": batch_idx,
            "loss_terms": {k: _number(v) for k, v in terms.items()},
            "last_good_checkpoint": str(checkpoint) if checkpoint else None,
            "last_good_checkpoint_step": checkpoint_step,
            "batch": batch_texts(batch),
        }
        # the step being taken when read at a logging step; the finished steps when read at a save or the end
        detected = current_step if current_step is not None else trainer.global_step
        if detected != bad_step:
            report["detected_at_step"] = detected
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
        if current_step == bad_step:
            when = "training stopped before this step changed the weights"
        else:  # read at the next logging step or save: the steps in between ran, their weights are not saved
            when = (f"found at step {detected} (the flag is read every trainer.log_every_n_steps and before a "
                    "checkpoint), where training stopped; no weights after it are saved")
        shown = ", ".join(f"{k}={v:.4g}" for k, v in terms.items())
        self._reset()
        raise NonFiniteLossError(
            f"the training loss is not finite at step {bad_step} ({shown}); {when}{where}; {kept}. Lower the "
            "learning rate (method.lr), clip gradients (trainer.gradient_clip_val=1.0) or check those texts, "
            f"{then}."
        )
