"""STS-B dev Spearman of the final weights, for methods that select no checkpoint (PairSupCon).

PairSupCon keeps its last step (docs/methods/pairsupcon.md), so nothing in a run scores it on a development set;
its STS and clustering numbers are test scores. A sweep needs a number it may tune on: this
callback scores STS-B **dev** once when training ends (1,500 pairs, seconds on a GPU). results.json
gets ``sts_dev: {spearman, step, ...}``, the default objective of ``method=pairsupcon``.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path

from lightning.pytorch.callbacks import Callback

from errors import ConfigError, MissingFileError
from evaluation.benchmarks.sts import encoder_encode_fn, stsb_dev_spearman

log = logging.getLogger(__name__)


class FinalStsDev(Callback):
    """Scores ``pl_module.encoder`` on STS-B dev (cosine Spearman) at the end of training.

    Args:
        data_dir: SentEval's ``downstream`` folder (needs ``STS/STSBenchmark/sts-dev.csv``;
            checked when fitting starts, so a wrong folder does not cost a training run).
        pooling: evaluation pooling; default the module's ``eval_pooling``.
        max_length: evaluation truncation; default the backbone's limit (as StsSelection).

    Needs ``pl_module.encoder`` (a ``TextEncoder``). Rank 0 evaluates and broadcasts the score.
    """

    results_key = "sts_dev"

    def __init__(self, data_dir: str, pooling: str | None = None, max_length: int | None = None,
                 batch_size: int = 128):
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        self.data_dir = Path(data_dir)
        self.pooling = pooling
        self.max_length = max_length
        self.batch_size = batch_size
        self.result: dict | None = None

    def on_fit_start(self, trainer, pl_module) -> None:
        path = self.data_dir / "STS" / "STSBenchmark" / "sts-dev.csv"
        if not path.is_file():
            raise MissingFileError(
                f"STS-B dev file {path} not found (method.callbacks.sts_dev.data_dir, from sts_data_dir); "
                "point sts_data_dir at SentEval's 'downstream' folder, or remove the callback with "
                "'~method.callbacks.sts_dev' (the run then has no default objective)."
            )

    def on_train_end(self, trainer, pl_module) -> None:
        start = time.perf_counter()
        value = float("nan")
        if trainer.is_global_zero:
            pooling = self.pooling or getattr(pl_module, "eval_pooling", None)
            encode = encoder_encode_fn(pl_module.encoder, pooling, self.batch_size, self.max_length)
            value = stsb_dev_spearman(encode, self.data_dir)
        value = float(trainer.strategy.broadcast(value, src=0))  # every rank returns the same objective
        self.result = {
            "metric": "STS-B dev Spearman (cosine), final weights",
            "spearman": float(value),
            "step": trainer.global_step,
            "eval_seconds": round(time.perf_counter() - start, 2),
        }
        if trainer.is_global_zero:
            log.info("STS-B dev Spearman of the final weights: %.2f", 100 * value)

    def summary(self) -> dict | None:
        return self.result
