"""The two callbacks the lifecycle adds to every Trainer: ``EvaluateOnly`` (``eval_only=true``) and ``PhaseClock``
(results.json ``seconds``)."""
from __future__ import annotations

import statistics
import time
from collections import deque

from lightning.pytorch.callbacks import Callback

STEP_WINDOW = 1000  # the last optimizer steps whose durations give ``step_median``


class EvaluateOnly(Callback):
    """Ends ``trainer.fit`` before its first training step, so that a run restored from a
    checkpoint goes straight to the end-of-training hooks (the evaluations)."""

    def on_train_start(self, trainer, pl_module) -> None:
        trainer.should_stop = True
        for callback in trainer.callbacks:  # periodic evaluations: evaluate the checkpoint anew, not from history
            if hasattr(callback, "reevaluate_final"):
                callback.reevaluate_final = True


class PhaseClock(Callback):
    """Where a run's time went, for results.json ``seconds`` (``scripts/bench/scale.py`` reads it): ``start_up``
    (from the start of the fit to the first training step: the evaluation before training, SCCL's centroids),
    ``training`` (first to last step, evaluations during training included: ``clustering.seconds`` tells
    how much they took), ``end`` (after the last step: the final evaluation, predictions.csv, the report), and
    ``step_median``: the median time between consecutive optimizer steps over the last ``STEP_WINDOW`` of them, the
    steady cost of a step. An evaluation, a checkpoint or the slow first steps of a GPU (its kernels chosen, the
    loader's workers starting) are a few long steps among many and barely move it, so a short run's ``training``
    minus its evaluations overstates a step's cost and ``step_median`` does not (the time to a paper table is
    estimated from it: scripts/bench/gpu_session.py)."""

    def __init__(self, clock=time.perf_counter):
        self.clock = clock
        self.marks: dict[str, float] = {}
        self.step_seconds: deque[float] = deque(maxlen=STEP_WINDOW)
        self._step_at: tuple[int, float] | None = None  # (global step, when it was reached)

    def on_fit_start(self, trainer, pl_module) -> None:
        self.marks = {"fit_start": self.clock()}
        self.step_seconds.clear()
        self._step_at = None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        now = self.clock()
        self.marks.setdefault("first_step", now)
        if self._step_at is None:
            self._step_at = (trainer.global_step, now)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        now = self.clock()
        self.marks["last_step"] = now
        step, then = self._step_at  # set by on_train_batch_start, which Lightning calls first
        if trainer.global_step > step:  # an optimizer step ended (not a batch accumulated into the next one)
            self.step_seconds.append((now - then) / (trainer.global_step - step))
            self._step_at = (trainer.global_step, now)

    def on_fit_end(self, trainer, pl_module) -> None:  # the last callback: after the report
        self.marks["fit_end"] = self.clock()

    def seconds(self) -> dict[str, float]:
        marks = self.marks
        order = ("fit_start", "first_step", "last_step", "fit_end")
        names = ("start_up", "training", "end")
        out = {}
        for name, (a, b) in zip(names, zip(order, order[1:])):
            if a in marks and b in marks:
                out[name] = round(marks[b] - marks[a], 1)
        if "first_step" not in marks and "fit_start" in marks and "fit_end" in marks:  # no step (eval_only)
            out["end"] = round(marks["fit_end"] - marks["fit_start"], 1)
        if self.step_seconds:
            out["step_median"] = round(statistics.median(self.step_seconds), 5)
        return out
