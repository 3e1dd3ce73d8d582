"""Checkpoints that survive crashes, full disks and interruptions (docs/reliability.md "Preemption and resume").

- :func:`atomic_save` is how the project writes every checkpoint (``atomic_files``: into a temporary
  file in the target's folder, flushed and fsync'ed, then renamed over the target). A crash
  or a full disk leaves the previous file intact under its name; a failed write is the one
  ``textcore.errors.OutputWriteError`` of every failed write (``textcore.errors.writing``), naming the file and the
  cause.
- :class:`AtomicCheckpointIO` makes ``trainer.save_checkpoint`` use it (``last.ckpt``,
  ``best.ckpt``, Lightning's SLURM ``hpc_ckpt_*.ckpt``), and makes every checkpoint Lightning loads (a resume, an
  eval-only run, a requeued job's ``hpc_ckpt``) go through ``textcore.run_folder.load_checkpoint``: tensors and plain
  values only unless the run has the opt-in ``trust_checkpoint=true``, and a checkpoint the run's checks already read
  is not read again.
- :class:`LastCheckpoint` writes ``last.ckpt`` every ``every_n_steps`` optimizer steps and/or
  every ``every_n_minutes``, at the last training step (before the final evaluation, so a failing
  evaluation keeps the trained weights), and when a stop was requested by a signal
  (``runtime.interrupt``). Every save happens at the end of a training step, after the other
  callbacks (Lightning runs ``Checkpoint`` callbacks last), which is the state Lightning resumes
  from exactly. It also repairs, on load, checkpoints written at the end of an epoch or of
  training (:func:`normalize_loop_state`).
"""
from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO
from lightning.pytorch.callbacks import Checkpoint

from lightning_modules.shared.step_budget import epoch_ends_after_batch, training_ends_after_batch
from runtime import interrupt
from textcore import atomic_files, run_folder
from textcore.errors import ConfigError, UserError, writing

log = logging.getLogger(__name__)


class NonFiniteWeightsError(UserError, FloatingPointError):
    """The model's weights hold NaN or inf; they are not saved over the last good checkpoint."""


def atomic_save(obj: Any, path: str | os.PathLike) -> None:
    """``torch.save(obj)`` to ``path`` so that ``path`` is either the old file or the complete new one.

    A failed write (disk full, permissions, ...) raises ``textcore.errors.OutputWriteError``; the temporary file is
    removed.
    """
    # torch's zip writer reports a failed write as a RuntimeError
    with writing(path, "checkpoint", atomic=True, catch=(OSError, RuntimeError)):
        atomic_files.atomic_write(path, lambda handle: torch.save(obj, handle))


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write a small text file (results.json, reports) with the same temporary-file-and-rename rule."""
    with writing(path, atomic=True):
        atomic_files.atomic_write_text(path, text)


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning checkpoint I/O that writes local files with :func:`atomic_save` (remote URLs: Lightning's) and reads
    them with ``textcore.run_folder.load_checkpoint``. ``trust``: the user's opt-in for a checkpoint that holds more
    than tensors and plain values; ``loaded``: {path: checkpoint} already read by the run (validation), given to
    Lightning instead of a second read."""

    def __init__(self, trust: bool = False, loaded: dict | None = None):
        super().__init__()
        self.trust = bool(trust)
        self.loaded = {str(Path(p).resolve()): c for p, c in (loaded or {}).items()}

    def load_checkpoint(self, path, map_location=None, weights_only: bool | None = None) -> dict:
        from textcore.run_folder import load_checkpoint

        if "://" in str(path):  # a remote file: Lightning's reader, never unpickling code without the opt-in
            return super().load_checkpoint(path, weights_only=not self.trust)
        loaded = self.loaded.pop(str(Path(path).resolve()), None)
        return loaded if loaded is not None else load_checkpoint(path, trust=self.trust, key="ckpt_path")

    def save_checkpoint(self, checkpoint: dict, path, storage_options: Any | None = None) -> None:
        if "://" in str(path):
            return super().save_checkpoint(checkpoint, path, storage_options)
        if storage_options is not None:
            raise TypeError("AtomicCheckpointIO.save_checkpoint does not take storage_options")
        atomic_save(checkpoint, path)


def with_atomic_checkpoint_io(plugins: list | None, trust: bool = False, loaded: dict | None = None) -> list:
    """``plugins`` plus :class:`AtomicCheckpointIO` (``trust``, ``loaded``: its own), unless a checkpoint I/O plugin is
    already there (the trainer is then told ``weights_only``: ``RunLifecycle.fit``)."""
    from lightning.fabric.plugins import CheckpointIO

    plugins = list(plugins or [])
    if not any(isinstance(p, CheckpointIO) for p in plugins):
        plugins.append(AtomicCheckpointIO(trust, loaded))
    return plugins


# -- loop state ---------------------------------------------------------------------------------------
def normalize_loop_state(checkpoint: dict) -> str | None:
    """Rewrite the fit-loop state of a checkpoint into one Lightning 2.6 resumes exactly; returns
    what was changed (None: nothing).

    Lightning resumes exactly from a checkpoint written in ``on_train_batch_end`` in the middle of
    an epoch. Three other moments go wrong, all reproduced in tests/run/test_resume.py:

    - after the last batch of an epoch, in ``on_train_batch_end`` (ModelCheckpoint with
      ``every_n_train_steps``): the resumed run starts the next epoch without calling the
      ``on_train_epoch_start`` hooks (AECL's stage switch and pseudo-labels) and without counting
      that epoch as started;
    - in ``on_train_epoch_end``: the resumed run trains one more batch in the finished epoch (from
      the next epoch's data) and every later epoch is numbered one too low, so epoch-seeded data
      orders shift;
    - in ``on_train_end`` (``ModelCheckpoint(save_last=True)``, the old last.ckpt): the finished
      batch and epoch are counted twice: the resumed run jumps to the next epoch.

    A state whose last batch ended an epoch becomes a clean epoch boundary (every counter of the
    epoch finished, none of the next one started); a mid-epoch end-of-training state becomes the
    ``on_train_batch_end`` state of its last batch.
    """
    fit = (checkpoint.get("loops") or {}).get("fit_loop")
    if not fit or "epoch_loop.batch_progress" not in fit or "epoch_progress" not in fit:
        return None
    batch = fit["epoch_loop.batch_progress"]
    current, total = batch["current"], batch["total"]
    if current["ready"] == 0:
        return None
    after_batch_end = current["completed"] == current["ready"] - 1  # saved inside on_train_batch_end
    stepped = fit.get("epoch_loop.state_dict") or {}
    epochs = [fit["epoch_progress"][part] for part in ("current", "total")]
    if batch.get("is_last_batch"):
        for key in current:
            current[key] = 0
        total["completed"] = total["processed"] = total["started"] = total["ready"]
        batch["is_last_batch"] = False
        for epoch in epochs:
            epoch["processed"] = epoch["completed"] = epoch["started"]
        if after_batch_end and "_batches_that_stepped" in stepped:
            stepped["_batches_that_stepped"] += 1  # Lightning adds it only when restarting inside an epoch
        return "epoch boundary"
    if after_batch_end:
        return None
    current["completed"] -= 1
    total["completed"] -= 1
    if "_batches_that_stepped" in stepped:
        stepped["_batches_that_stepped"] -= 1  # Lightning adds it back when it restarts after a batch end
    for epoch in epochs:
        epoch["processed"] = min(epoch["processed"], epoch["started"] - 1)
        epoch["completed"] = min(epoch["completed"], epoch["started"] - 1)
    return "end of the last batch"


def weights_finite(module: torch.nn.Module) -> bool:
    return all(bool(torch.isfinite(p).all()) for p in module.parameters() if p.is_floating_point())


class LastCheckpoint(Checkpoint):
    """Writes ``<dirpath>/<filename>`` (``last.ckpt``) periodically, at the last training step and
    when a signal asked the run to stop; see the module docstring.

    Args:
        dirpath: folder of the checkpoint (the run's ``checkpoints/``).
        filename: its name.
        every_n_steps: save every N optimizer steps (0: off).
        every_n_minutes: save when this many minutes have passed since the last save (0: off).
        save_final: save after the last training step (before the end-of-training evaluation).

    Under DDP every rank takes the same decisions (any rank's clock or signal). Weights
    holding NaN/inf are never written: the run stops with :class:`NonFiniteWeightsError` and the
    last good file stays. Attributes ``last_path``/``last_step`` name the newest file written and
    ``final_step`` the step of the final save; ``on_save`` (a callable taking path, step, final)
    is told about each save (SLURM requeue bookkeeping).
    """

    def __init__(self, dirpath: str, filename: str = Path(run_folder.LAST_CHECKPOINT).name, every_n_steps: int = 500,
                 every_n_minutes: float = 15.0, save_final: bool = True):
        if every_n_steps is None or every_n_steps < 0:
            raise ConfigError(f"callbacks.checkpoint.every_n_steps must be >= 0 (0: off), got {every_n_steps}")
        if every_n_minutes is None or every_n_minutes < 0:
            raise ConfigError(f"callbacks.checkpoint.every_n_minutes must be >= 0 (0: off), got {every_n_minutes}")
        if not filename:
            raise ConfigError("callbacks.checkpoint.filename must not be empty")
        self.dirpath = Path(dirpath)
        self.filename = filename
        self.every_n_steps = int(every_n_steps)
        self.every_n_minutes = float(every_n_minutes)
        self.save_final = save_final
        self.last_path: Path | None = None
        self.last_step: int | None = None
        self.final_step: int | None = None
        self.on_save = None
        self._last_time = time.monotonic()
        self._at_epoch_end: tuple | None = None

    @property
    def path(self) -> Path:
        return self.dirpath / self.filename

    # -- hooks ------------------------------------------------------------------------------------------
    def on_load_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        changed = normalize_loop_state(checkpoint)
        if changed:
            log.debug("checkpoint loop state rewritten to the %s, where Lightning resumes exactly", changed)

    def on_train_start(self, trainer, pl_module) -> None:
        self._last_time = time.monotonic()
        if not trainer.should_stop:  # eval_only stops before the first step: signals then act at once
            interrupt.set_phase("training")

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        interrupt.set_phase("training")

    def _any_rank(self, trainer, *flags: bool) -> list[bool]:
        """Each flag, true when it is true on any process (one collective under DDP)."""
        if trainer.world_size == 1:
            return list(flags)
        votes = torch.tensor([float(f) for f in flags], device=trainer.strategy.root_device)
        return [bool(v > 0) for v in trainer.strategy.reduce(votes, reduce_op="sum")]

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        requested = interrupt.pending()
        step = trainer.global_step
        due = bool(self.every_n_minutes) and time.monotonic() - self._last_time >= 60 * self.every_n_minutes
        stop, due = self._any_rank(trainer, requested is not None, due)
        final = self.save_final and training_ends_after_batch(trainer)
        periodic = due or (bool(self.every_n_steps) and step % self.every_n_steps == 0)
        if epoch_ends_after_batch(trainer):
            # after the epoch's end hooks (on_train_epoch_end below), so a resumed run starts the next epoch
            self._at_epoch_end = (stop, requested, final, periodic)
            return
        self._stop_or_save(trainer, stop, requested, final, periodic)

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        stop, requested, final, periodic = self._at_epoch_end or (False, None, False, False)
        self._at_epoch_end = None
        if not stop:  # a signal may also have come after the epoch's last step
            requested = interrupt.pending()
            (stop,) = self._any_rank(trainer, requested is not None)
        self._stop_or_save(trainer, stop, requested, final, periodic)

    def _stop_or_save(self, trainer, stop: bool, requested: int | None, final: bool, periodic: bool) -> None:
        if stop:
            self.stop(trainer, requested, final=final)
        if final or periodic:
            self.save(trainer, final=final)
        if final:
            self.final_step = trainer.global_step
            interrupt.set_phase("finishing")  # a signal now ends the run at once: the weights are saved

    # -- actions ----------------------------------------------------------------------------------------
    def save(self, trainer, final: bool = False, path: Path | None = None) -> Path:
        path = Path(path or self.path)
        if not weights_finite(trainer.lightning_module):
            kept = f"the last good checkpoint {self.last_path} (step {self.last_step}) is kept" if self.last_path \
                else "no checkpoint was written before"
            raise NonFiniteWeightsError(
                f"the model's weights hold NaN or inf at step {trainer.global_step}; {kept}. Lower the learning "
                "rate (method.lr) or clip gradients (trainer.gradient_clip_val=1.0) and resume or start again."
            )
        trainer.save_checkpoint(path, weights_only=False)  # full state (resume); also keeps Lightning's log quiet
        self.last_path, self.last_step = path, trainer.global_step
        self._last_time = time.monotonic()
        if self.on_save is not None and trainer.is_global_zero:
            self.on_save(path, trainer.global_step, final)
        return path

    def stop(self, trainer, requested: int | None, final: bool = False) -> None:
        """Save (or hand over to SLURM's requeue) and end the run with :class:`interrupt.RunInterrupted`.

        ``final``: this was the last training step; the saved weights are the trained model and
        only the end-of-training evaluation is left (``eval_only=true``).
        """
        signum = requested if requested is not None else interrupt.DEFAULT_SIGNAL
        requeued = interrupt.is_requeue_signal(signum)
        if requeued:
            if not weights_finite(trainer.lightning_module):
                self.save(trainer)  # raises NonFiniteWeightsError: bad weights are not handed to the next job
            path = interrupt.requeue(trainer)  # Lightning's SLURM handler: hpc checkpoint + scontrol requeue
            self.last_path, self.last_step = path, trainer.global_step
            if self.on_save is not None and trainer.is_global_zero:
                self.on_save(path, trainer.global_step, final)
        else:
            path = self.save(trainer, final=final)
        if final:
            self.final_step = trainer.global_step
        raise interrupt.RunInterrupted(signum, trainer.global_step, path, requeued=requeued, training_finished=final)
