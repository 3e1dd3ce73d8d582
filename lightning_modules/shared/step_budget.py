"""How long training runs: the first of ``trainer.max_steps`` and ``trainer.max_epochs`` to end it.

The CPU and GPU trainers bound a run both ways (conf/trainer/cpu.yaml: 150 steps, at most 2 epochs), so "the last
step" is not always ``max_steps``: on a corpus of 2,000 texts at batch 64 the epochs end it at step 64. Everything
that shows a budget (the budget line, the progress bar and lines) and everything that acts at the last step (the
final checkpoint, the evaluator's last pass) asks here.
"""
from __future__ import annotations

import math


def step_budget(max_steps: int | None, max_epochs: int | None, steps_per_epoch: float | None) -> int | None:
    """Optimizer steps of the run: ``max_steps`` (< 0 or None: unbounded), or ``max_epochs`` (< 0 or None: unbounded)
    times ``steps_per_epoch`` when that ends it first; None when neither bounds it, or only the epochs do and their
    length is unknown (a stream)."""
    bounds = []
    if max_steps is not None and max_steps >= 0:
        bounds.append(int(max_steps))
    if max_epochs is not None and max_epochs >= 0 and steps_per_epoch is not None and math.isfinite(steps_per_epoch):
        bounds.append(int(max_epochs) * int(steps_per_epoch))
    return min(bounds) if bounds else None


def trainer_step_budget(trainer) -> int | None:
    """:func:`step_budget` of a Lightning trainer (its batches per epoch, gradient accumulation counted)."""
    batches = trainer.num_training_batches
    per_epoch = None
    if isinstance(batches, (int, float)) and math.isfinite(batches):
        per_epoch = math.ceil(batches / max(1, int(getattr(trainer, "accumulate_grad_batches", 1) or 1)))
    return step_budget(trainer.max_steps, trainer.max_epochs, per_epoch)


def epoch_ends_after_batch(trainer) -> bool:
    """Whether the batch being finished is the last of its epoch."""
    progress = trainer.fit_loop.epoch_loop.batch_progress
    per_epoch = trainer.num_training_batches
    return bool(progress.is_last_batch) or (math.isfinite(per_epoch) and progress.current.ready >= per_epoch)


def training_ends_after_batch(trainer) -> bool:
    """Whether training stops after the batch being finished: max_steps reached, the last epoch's
    last batch, or a callback asked to stop (``trainer.should_stop``)."""
    if trainer.should_stop:
        return True
    if trainer.max_steps is not None and trainer.max_steps >= 0 and trainer.global_step >= trainer.max_steps:
        return True
    max_epochs = trainer.max_epochs
    return max_epochs is not None and max_epochs >= 0 and trainer.current_epoch + 1 >= max_epochs \
        and epoch_ends_after_batch(trainer)
