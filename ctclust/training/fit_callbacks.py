"""The two callbacks the lifecycle adds to every Trainer: ``EvaluateOnly`` (``eval_only=true``) and ``PhaseClock``
(results.json ``seconds``)."""
from __future__ import annotations

import time

from lightning.pytorch.callbacks import Callback


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
    how much they took), ``end`` (after the last step: the final evaluation, predictions.csv, the report)."""

    def __init__(self, clock=time.perf_counter):
        self.clock = clock
        self.marks: dict[str, float] = {}

    def on_fit_start(self, trainer, pl_module) -> None:
        self.marks = {"fit_start": self.clock()}

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.marks.setdefault("first_step", self.clock())

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.marks["last_step"] = self.clock()

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
        return out
