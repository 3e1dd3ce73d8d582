"""The schedule of evaluations made during training: before the first step, every N steps and at the end.

Here, below the callbacks, because a method's own callbacks (AECL's NS diagnostic) follow it as the shared
clustering evaluator does, and a method's folder imports nothing above its layer (docs/architecture.md)."""
from __future__ import annotations

from lightning.pytorch.callbacks import Callback

from textcore.errors import ConfigError


class PeriodicEvaluation(Callback):
    """Runs ``_evaluate`` before the first step, every ``every_n_steps`` optimizer steps and once at
    the end (reusing the entry of the last step when it was just evaluated).

    Subclasses implement ``_evaluate(trainer, pl_module, record=True) -> dict | None``, which must
    append its entry (a dict with ``step``) to ``self.history`` when ``record`` is true; the entry
    taken before training is kept in ``self.before`` and not recorded. ``before`` and ``history``
    are checkpointed, so a resumed run neither re-evaluates the untrained model nor loses the
    evaluations made before the interruption.
    """

    def __init__(self, every_n_steps: int = 100, evaluate_before: bool = True):
        if every_n_steps < 0:
            raise ConfigError(
                f"{type(self).__name__}: every_n_steps must be >= 0 (0: only before and after training), "
                f"got {every_n_steps}"
            )
        self.every_n_steps = every_n_steps
        self.evaluate_before = evaluate_before
        self.before: dict | None = None
        self.history: list[dict] = []
        self.final: dict | None = None
        # eval_only=true sets this: the checkpoint's last step is evaluated again with this run's settings
        # (e.g. another evaluation batch order) instead of reusing the entry restored from the checkpoint
        self.reevaluate_final = False

    def state_dict(self) -> dict:
        return {"before": self.before, "history": self.history}

    def load_state_dict(self, state_dict: dict) -> None:
        self.before = state_dict.get("before")
        self.history = list(state_dict.get("history", []))

    def on_train_start(self, trainer, pl_module) -> None:
        if self.evaluate_before and self.before is None and trainer.global_step == 0:
            self.before = self._evaluate(trainer, pl_module, record=False)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        if self.every_n_steps and step % self.every_n_steps == 0 and not self._evaluated(step):
            self._evaluate(trainer, pl_module)

    def on_train_end(self, trainer, pl_module) -> None:
        if self.reevaluate_final:
            self.history = [h for h in self.history if h["step"] != trainer.global_step]
        self.final = self._evaluated(trainer.global_step) or self._evaluate(trainer, pl_module)

    def _evaluated(self, step: int) -> dict | None:
        return next((h for h in self.history if h["step"] == step), None)

    def _evaluate(self, trainer, pl_module, record: bool = True) -> dict | None:
        raise NotImplementedError
