"""Seven-task STS evaluation at the end of training (docs/evaluation.md), on the best or the final weights."""
from __future__ import annotations

import copy
import json
import logging
import time
from pathlib import Path
from typing import Sequence

from lightning.pytorch.callbacks import Callback

from callbacks.evaluation.sts_selection import StsSelection
from errors import ConfigError, MissingFileError
from evaluation.benchmarks.sts import SEVEN, encoder_encode_fn, evaluate_sts, markdown_table
from evaluation.model_io.load import checkpoint_encoder_weights

WEIGHTS = ("best", "final")
log = logging.getLogger(__name__)


def encoder_with_checkpoint_weights(encoder, checkpoint_path: Path):
    """A copy of ``encoder`` holding the ``encoder.*`` weights of a Lightning checkpoint."""
    copied = copy.deepcopy(encoder)
    copied.load_state_dict(checkpoint_encoder_weights(checkpoint_path))
    return copied


class FinalStsEvaluation(Callback):
    """At the end of training, STS12-16, STS-B test and SICK-R with the module's eval pooling.

    Args:
        data_dir: SentEval 'downstream' folder; tasks whose data is missing are skipped with a
            warning (``evaluation.benchmarks.sts``).
        output_dir: where ``sts.md`` and ``sts.json`` are written (None: not written).
        weights: ``best`` — the weights ``StsSelection`` kept (``best.ckpt``; the final weights
            when there is no selection callback or no best yet); ``final`` — the last weights.
        aggregation: STS12-16 aggregation (``all``, as SimCSE and ClusterNS report).

    The module itself is left untouched: best weights are loaded into a copy of its encoder.
    Runs on rank 0 only; prints the table.
    """

    results_key = "sts"

    def __init__(
        self,
        data_dir: str,
        output_dir: str | None = None,
        weights: str = "best",
        tasks: Sequence[str] = SEVEN,
        aggregation: str = "all",
        pooling: str | None = None,
        max_length: int | None = None,
        batch_size: int = 128,
        print_table: bool = True,
    ):
        if weights not in WEIGHTS:
            raise ConfigError(f"method.callbacks.sts_eval.weights must be one of {WEIGHTS}, got '{weights}'")
        self.data_dir = Path(data_dir)
        self.output_dir = Path(output_dir) if output_dir else None
        self.weights = weights
        self.tasks = list(tasks)
        self.aggregation = aggregation
        self.pooling = pooling
        self.max_length = max_length
        self.batch_size = batch_size
        self.print_table = print_table
        self.results: dict | None = None

    def on_fit_start(self, trainer, pl_module) -> None:
        if not self.data_dir.is_dir():
            raise MissingFileError(
                f"STS data folder {self.data_dir} not found; set sts_data_dir to SentEval's 'downstream' folder."
            )

    def on_train_end(self, trainer, pl_module) -> None:
        selection = next((cb for cb in trainer.callbacks if isinstance(cb, StsSelection)), None)
        if selection is not None:
            selection.on_train_end(trainer, pl_module)  # idempotent: a last evaluation may find a new best
        if not trainer.is_global_zero:
            return
        encoder, used, step = pl_module.encoder, "final", trainer.global_step
        best = selection.best_file if selection is not None else None  # also a resumed run's earlier best.ckpt
        if self.weights == "best" and best is not None and selection.best_step is not None:
            if best.is_file():
                encoder, used = encoder_with_checkpoint_weights(pl_module.encoder, best), "best"
                step = selection.best_step
            else:
                log.warning("best weights (step %s) not found at %s; evaluating the final weights",
                            selection.best_step, best)
        pooling = self.pooling or getattr(pl_module, "eval_pooling", None) or encoder.pooling
        encode = encoder_encode_fn(encoder, pooling, self.batch_size, self.max_length)
        start = time.perf_counter()
        log.info("STS evaluation of the %s weights (step %d, %s pooling)", used, step, pooling)
        results = evaluate_sts(encode, self.data_dir, self.tasks, self.aggregation, log=log.info)
        wall = time.perf_counter() - start
        label = f"{type(pl_module).__name__} ({used} weights, step {step}, {pooling})"
        table = markdown_table(results, label)
        self.results = {"weights": used, "step": step, "pooling": pooling, "eval_seconds": round(wall, 1), **results}
        if self.output_dir is not None:
            self.output_dir.mkdir(parents=True, exist_ok=True)
            (self.output_dir / "sts.md").write_text(table, encoding="utf-8")
            (self.output_dir / "sts.json").write_text(json.dumps(self.results, indent=2), encoding="utf-8")
        if self.print_table:
            print(table, flush=True)

    def summary(self) -> dict | None:
        if self.results is None:
            return None
        r = self.results
        return {
            "weights": r["weights"],
            "step": r["step"],
            "pooling": r["pooling"],
            "aggregation": r["aggregation"],
            "max_length": self.max_length,  # None: the backbone's limit
            "spearman": {task: v["spearman"] for task, v in r["tasks"].items()},
            "avg": r["avg"],
            "avg_over": r["avg_over"],
            "skipped": r["skipped"],
            "eval_seconds": r["eval_seconds"],
        }
