"""Model selection on STS-B dev during training, with early stopping (SimCSE / ClusterNS, docs/methods/clusterns.md).

Every ``every_n_steps`` optimizer steps the module's encoder is scored on STS-B dev (Spearman of
cosine similarities, the module's evaluation pooling, no 32-token truncation). An improvement saves
the weights to ``<output_dir>/checkpoints/best.ckpt``; ``patience`` evaluations in a row without
one stop training. The paper evaluates every 125 steps with patience 3.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from lightning.pytorch.callbacks import Callback

from evaluation.benchmarks.sts import encoder_encode_fn, stsb_dev_spearman
from textcore import run_folder
from textcore.errors import ConfigError, MissingFileError


@dataclass(frozen=True)
class Selection:
    """Outcome of one evaluation: whether it improved, the new best, the run of bad evaluations, stop."""

    improved: bool
    best: float | None
    bad_count: int
    stop: bool


def selection_update(best: float | None, bad_count: int, score: float, patience: int | None,
                     min_delta: float = 0.0) -> Selection:
    """Early-stopping bookkeeping after one evaluation (pure).

    An evaluation improves when ``score > best + min_delta`` (the first finite score always does;
    NaN never does). Each evaluation without improvement adds one to ``bad_count``; an improvement
    resets it. ``stop`` once ``bad_count`` reaches ``patience`` (None or 0: never stop).
    """
    finite = score is not None and not math.isnan(score)
    improved = finite and (best is None or score > best + min_delta)
    new_best = score if improved else best
    new_bad = 0 if improved else bad_count + 1
    stop = bool(patience) and new_bad >= patience
    return Selection(improved, new_best, new_bad, stop)


class StsSelection(Callback):
    """Scores STS-B dev every ``every_n_steps`` steps; keeps the best weights; stops early.

    Args:
        data_dir: SentEval 'downstream' folder (needs ``STS/STSBenchmark/sts-dev.csv``).
        every_n_steps: evaluation period in optimizer steps (paper: 125).
        patience: evaluations without gain before ``trainer.should_stop`` (paper: 3; 0 = never).
        output_dir: the run folder; the best weights go to ``<output_dir>/checkpoints/best.ckpt``
            (None: nothing is saved).
        pooling: evaluation pooling; default the module's ``eval_pooling``.
        max_length: evaluation truncation; default the backbone's limit.
        evaluate_at_end: score the final weights too when the last step was not an evaluation step.
        save_weights_only: best.ckpt without optimizer state (enough for evaluation; much smaller).

    Logs ``val/stsb_spearman`` (fraction in [-1, 1]). Under DDP rank 0 evaluates and broadcasts
    the score so every rank takes the same stop decision; all ranks call ``save_checkpoint``
    (Lightning writes the file on rank 0).
    """

    results_key = "sts_selection"

    def __init__(
        self,
        data_dir: str,
        every_n_steps: int = 125,
        patience: int | None = 3,
        min_delta: float = 0.0,
        output_dir: str | None = None,
        pooling: str | None = None,
        max_length: int | None = None,
        batch_size: int = 128,
        evaluate_at_end: bool = True,
        save_weights_only: bool = True,
    ):
        if every_n_steps < 1:
            raise ConfigError(f"method.callbacks.sts_selection.every_n_steps must be >= 1, got {every_n_steps}")
        if patience is not None and patience < 0:
            raise ConfigError(
                f"method.callbacks.sts_selection.patience must be >= 0 (0 disables early stopping), got {patience}"
            )
        self.data_dir = Path(data_dir)
        self.every_n_steps = every_n_steps
        self.patience = patience
        self.min_delta = min_delta
        self.output_dir = Path(output_dir) if output_dir else None
        self.pooling = pooling
        self.max_length = max_length
        self.batch_size = batch_size
        self.evaluate_at_end = evaluate_at_end
        self.save_weights_only = save_weights_only
        self.best_score: float | None = None
        self.best_step: int | None = None
        self.bad_count = 0
        self.stopped_step: int | None = None
        self.history: list[dict] = []
        # where the best weights are: this run's best.ckpt, or the one of the run it resumed from
        self.best_file: Path | None = None

    @property
    def best_checkpoint_path(self) -> Path | None:
        """Where this run writes a new best (``<output_dir>/checkpoints/best.ckpt``)."""
        return self.output_dir / run_folder.BEST_CHECKPOINT if self.output_dir else None

    # -- persistence ----------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"best_score": self.best_score, "best_step": self.best_step, "bad_count": self.bad_count,
                "stopped_step": self.stopped_step, "history": self.history,
                "best_file": str(self.best_file.resolve()) if self.best_file else None}

    def load_state_dict(self, state_dict: dict) -> None:
        self.best_score = state_dict.get("best_score")
        self.best_step = state_dict.get("best_step")
        self.bad_count = int(state_dict.get("bad_count", 0))
        self.stopped_step = state_dict.get("stopped_step")
        self.history = list(state_dict.get("history", []))
        best_file = state_dict.get("best_file")
        self.best_file = Path(best_file) if best_file else None

    # -- hooks ----------------------------------------------------------------------------------------
    def on_fit_start(self, trainer, pl_module) -> None:
        path = self.data_dir / "STS" / "STSBenchmark" / "sts-dev.csv"
        if not path.is_file():  # fail before hours of training, not at the first evaluation
            raise MissingFileError(
                f"STS-B dev file {path} not found; set sts_data_dir to SentEval's 'downstream' folder "
                "(holding STS/STSBenchmark/sts-dev.csv)."
            )

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        if step > 0 and step % self.every_n_steps == 0 and not self._evaluated(step):
            self.evaluate(trainer, pl_module)

    def on_train_end(self, trainer, pl_module) -> None:
        step = trainer.global_step
        if self.evaluate_at_end and step > 0 and not self._evaluated(step) and self.stopped_step is None:
            self.evaluate(trainer, pl_module)

    # -- internals ------------------------------------------------------------------------------------
    def _evaluated(self, step: int) -> bool:
        return any(h["step"] == step for h in self.history)

    def score(self, trainer, pl_module) -> float:
        """STS-B dev Spearman of the module's encoder; computed on rank 0, broadcast to all."""
        value = float("nan")
        if trainer.is_global_zero:
            encode = encoder_encode_fn(pl_module.encoder, self.pooling or getattr(pl_module, "eval_pooling", None),
                                       self.batch_size, self.max_length)
            value = stsb_dev_spearman(encode, self.data_dir)
        return float(trainer.strategy.broadcast(value, src=0))

    def evaluate(self, trainer, pl_module) -> dict:
        start = time.perf_counter()
        step = trainer.global_step
        value = self.score(trainer, pl_module)
        decision = selection_update(self.best_score, self.bad_count, value, self.patience, self.min_delta)
        self.best_score, self.bad_count = decision.best, decision.bad_count
        if decision.improved:
            self.best_step = step
        entry = {"step": step, "stsb_dev": value, "improved": decision.improved,
                 "eval_seconds": round(time.perf_counter() - start, 2)}
        self.history.append(entry)
        if decision.stop:
            self.stopped_step = step
            trainer.should_stop = True
        if decision.improved and self.best_checkpoint_path is not None:
            # after the bookkeeping, so the saved callback state already knows this step is the best
            self.best_file = self.best_checkpoint_path
            trainer.save_checkpoint(self.best_checkpoint_path, weights_only=self.save_weights_only)
        trainer.callback_metrics["val/stsb_spearman"] = torch.tensor(value)
        if trainer.is_global_zero:
            for logger in trainer.loggers:
                logger.log_metrics({"val/stsb_spearman": value}, step=step)
        return entry

    def summary(self) -> dict:
        best = self.best_file if self.best_step is not None else None
        return {
            "metric": "STS-B dev Spearman (cosine)",
            "best": self.best_score,
            "best_step": self.best_step,
            "best_checkpoint": str(best) if best else None,
            "every_n_steps": self.every_n_steps,
            "patience": self.patience,
            "early_stopped_at": self.stopped_step,
            "history": self.history,
        }
