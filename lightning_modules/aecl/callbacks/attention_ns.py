"""NS: how much sample-level attention goes to samples of other true classes (AECL §4.7, eq 18)."""
from __future__ import annotations

import time
from typing import Iterable, Sequence

import numpy as np
import torch

from lightning_modules.shared.eval_outputs import cached_eval_outputs
from lightning_modules.shared.periodic_evaluation import PeriodicEvaluation
from lightning_modules.shared.step_budget import training_ends_after_batch
from textcore.errors import WrongMethodError
from textcore.kmeans import sample_rows


def off_class_attention(s: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Per row i, Σ_j 1[y_i ≠ y_j] S_ij: the attention mass sample i puts on other classes.

    Args:
        s: [N, N] attention matrix of one batch (rows sum to 1).
        labels: [N] integer true labels of the batch's samples.
    Returns [N]; NS of the batch (eq 18) is its mean, PS = 1 - NS (eq 19).
    """
    different = labels.view(-1, 1) != labels.view(1, -1)  # [N, N]
    return (s * different).sum(dim=1)  # [N]


def negative_similarity(
    projections: torch.Tensor, labels: Sequence, batches: Iterable[Sequence[int]], attention
) -> float:
    """NS over a whole set evaluated in ``batches`` (lists of row indices).

    The attention is recomputed from each batch's projections Z (``attention(z) -> (H, S)``),
    as the module computed it in that evaluation batch. Every row counts once: the result is
    the mean over all rows of their off-class attention mass, i.e. the batches' NS weighted by
    batch size.
    """
    _, codes = np.unique(np.asarray(labels), return_inverse=True)
    y = torch.as_tensor(codes.reshape(-1), dtype=torch.long)  # [n]
    total, rows = 0.0, 0
    with torch.no_grad():
        for batch in batches:
            index = torch.as_tensor(list(batch), dtype=torch.long)  # [b]
            if index.numel() == 0:
                continue
            _, s = attention(projections[index])  # [b, b]
            total += float(off_class_attention(s.float().cpu(), y[index]).sum())
            rows += index.numel()
    if rows == 0:
        raise ValueError("negative_similarity got no rows: the evaluation batches are empty")
    return total / rows


class AttentionNS(PeriodicEvaluation):
    """Logs ``val/ns`` (and ``val/ps`` = 1 - NS) before training, every ``every_n_steps`` steps
    and at the end, when the datamodule has labels; stored under ``attention`` in results.json.

    Needs on the module: ``attention`` (``z -> (H, S)``, the sample-level attention) and
    ``eval_step`` returning ``projections`` (Z of the original texts); on the datamodule:
    ``eval_dataloader(rows=)`` with a list-like ``batch_sampler`` of positions (the batches
    ``eval_step`` saw) and ``labels``. It diagnoses the texts the clustering evaluator evaluates during
    training (``sample`` texts drawn with ``seed``: conf ``eval_sample`` and ``seed``), and reuses that
    evaluation pass (``cached_eval_outputs``), so it costs no extra encoder pass when its interval
    matches the clustering evaluator's. Without labels it records nothing.
    """

    results_key = "attention"

    def __init__(self, every_n_steps: int = 100, evaluate_before: bool = True, *, sample: int, seed: int):
        super().__init__(every_n_steps=every_n_steps, evaluate_before=evaluate_before)
        self.sample, self.seed = sample, seed  # the clustering evaluator's texts (conf eval_sample), its pass
        self._final = False  # set while the end-of-training evaluation (every text) runs
        self.labels_available: bool | None = None

    def setup(self, trainer, pl_module, stage: str) -> None:
        if not callable(getattr(pl_module, "attention", None)):
            raise WrongMethodError(
                f"AttentionNS needs a sample-level `attention` module on {type(pl_module).__name__} "
                "(lightning_modules.aecl.AECL has one); remove the callback for other methods."
            )

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        # as the clustering evaluator: at the last step of a corpus larger than the sample, the final evaluation
        # (every text, the evaluator's pass) stands for the step
        if training_ends_after_batch(trainer) and self._rows(trainer) is not None:
            return
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)

    def on_train_end(self, trainer, pl_module) -> None:
        self._final = True
        try:
            super().on_train_end(trainer, pl_module)
        finally:
            self._final = False

    def _rows(self, trainer):
        return sample_rows(len(trainer.datamodule.texts), self.sample, self.seed)

    def _evaluate(self, trainer, pl_module, record: bool = True) -> dict | None:
        dm = trainer.datamodule
        self.labels_available = dm.labels is not None
        if not self.labels_available:
            return None
        start = time.perf_counter()
        rows = None if self._final else self._rows(trainer)
        outputs = cached_eval_outputs(trainer, pl_module, rows)
        if "projections" not in outputs:
            raise KeyError(f"AttentionNS: {type(pl_module).__name__}.eval_step must return 'projections' (Z)")
        labels = dm.labels if rows is None else dm.labels[rows]
        ns = negative_similarity(outputs["projections"].to(pl_module.device), labels, outputs.batches,
                                 pl_module.attention)
        entry = {"step": trainer.global_step, "epoch": trainer.current_epoch, "ns": ns, "ps": 1.0 - ns,
                 "eval_seconds": round(time.perf_counter() - start, 3)}
        if record:
            self.history.append(entry)
        if trainer.is_global_zero:
            for logger in trainer.loggers:
                logger.log_metrics({"val/ns": ns, "val/ps": 1.0 - ns}, step=trainer.global_step)
        return entry

    def summary(self) -> dict:
        return {
            "before": self.before,
            "final": self.final,
            "history": self.history,
            "labels_available": self.labels_available,
        }
