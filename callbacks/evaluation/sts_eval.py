"""STS at the end of training (docs/evaluation.md), on the best or the final weights: the seven test tasks and,
when asked, STS-B dev (the score a method that selects no checkpoint is tuned on). The one end-of-training STS
callback: FinalEvaluation leaves STS to it."""
from __future__ import annotations

import copy
import json
import logging
import time
from pathlib import Path
from typing import Sequence

from lightning.pytorch.callbacks import Callback

from callbacks.evaluation.sts_selection import StsSelection
from evaluation.benchmarks.sts import STS_TASKS, encoder_encode_fn, evaluate_sts, markdown_table, stsb_dev_spearman
from evaluation.model_io.load import checkpoint_encoder_weights
from textcore.errors import ConfigError, MissingFileError

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
        dev: also score STS-B **dev** with the same weights (``sts.dev.spearman`` in results.json: PairSupCon's
            objective, which keeps its last step and so has no selection score to tune on); its file is checked
            when fitting starts, so a wrong folder does not cost a training run.

    The module itself is left untouched: best weights are loaded into a copy of its encoder.
    Rank 0 evaluates and prints the table; the dev score is broadcast, so every rank returns the same objective.
    """

    results_key = "sts"

    def __init__(
        self,
        data_dir: str,
        output_dir: str | None = None,
        weights: str = "best",
        tasks: Sequence[str] = STS_TASKS,
        aggregation: str = "all",
        pooling: str | None = None,
        max_length: int | None = None,
        batch_size: int = 128,
        print_table: bool = True,
        dev: bool = False,
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
        self.dev = dev
        self.results: dict | None = None
        self.dev_result: dict | None = None

    def on_fit_start(self, trainer, pl_module) -> None:
        if not self.data_dir.is_dir():
            raise MissingFileError(
                f"STS data folder {self.data_dir} not found; set sts_data_dir to SentEval's 'downstream' folder."
            )
        dev_file = self.data_dir / "STS" / "STSBenchmark" / "sts-dev.csv"
        if self.dev and not dev_file.is_file():
            raise MissingFileError(
                f"STS-B dev file {dev_file} not found (method.callbacks.sts_eval.dev=true, data from sts_data_dir); "
                "point sts_data_dir at SentEval's 'downstream' folder, or set method.callbacks.sts_eval.dev=false "
                "(the run then has no default objective)."
            )

    def on_train_end(self, trainer, pl_module) -> None:
        selection = next((cb for cb in trainer.callbacks if isinstance(cb, StsSelection)), None)
        if selection is not None:
            selection.on_train_end(trainer, pl_module)  # idempotent: a last evaluation may find a new best
        dev, step = float("nan"), trainer.global_step
        if trainer.is_global_zero:
            dev, step = self._evaluate(trainer, pl_module, selection)
        if self.dev:
            self.dev_result = {"spearman": float(trainer.strategy.broadcast(dev, src=0)),
                               "step": int(trainer.strategy.broadcast(step, src=0))}

    def _evaluate(self, trainer, pl_module, selection) -> tuple[float, int]:
        """The test tasks (and the dev score) of the chosen weights, on rank 0: (dev Spearman or NaN, step)."""
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
        if not self.dev:
            return float("nan"), step
        dev = stsb_dev_spearman(encode, self.data_dir)
        log.info("STS-B dev Spearman of the %s weights (step %d): %.2f", used, step, 100 * dev)
        return dev, step

    def summary(self) -> dict | None:
        dev = {"dev": self.dev_result} if self.dev_result is not None else {}
        if self.results is None:  # ranks other than 0: the dev score alone, for the objective
            return dev or None
        r = self.results
        return {
            **dev,
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
