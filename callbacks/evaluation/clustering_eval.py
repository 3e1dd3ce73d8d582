"""Periodic clustering evaluation: KMeans on embeddings and the module's own cluster head."""
from __future__ import annotations

import csv
import logging
import time
from pathlib import Path

import numpy as np
import torch

from evaluation.clustering.label_free import DIRECTIONS as LABEL_FREE_DIRECTIONS
from evaluation.clustering.label_free import best_index, label_free_report, stable_step
from evaluation.clustering.metrics import clustering_scores
from lightning_modules.shared.eval_outputs import cached_eval_outputs, outputs_kmeans
from lightning_modules.shared.periodic_evaluation import PeriodicEvaluation
from textcore.console import format_duration
from textcore.errors import ConfigError, writing
from textcore.kmeans import check_kmeans_backend, kmeans_fit, sample_rows

log = logging.getLogger(__name__)


def evaluate_outputs(
    outputs: dict, labels, num_clusters: int, seed: int = 0, n_init: int = 10, kmeans=None,
    kmeans_backend: str | None = None, previous: dict | None = None, label_free_sample: int | None = 2000,
    undefined: dict | None = None, previous_rows: np.ndarray | None = None,
) -> tuple[dict, dict]:
    """Scores and predictions from evaluation outputs.

    ``outputs`` has ``embeddings`` [N, d] and optionally ``head_pred`` [N]. Returns
    (metrics, predictions): metrics ``kmeans_acc``/``kmeans_nmi``/... and ``head_...`` when labels
    are known (empty otherwise); predictions ``kmeans`` and ``head`` as integer arrays.
    ``kmeans``: a KMeans already fitted on these embeddings (its ``labels_`` are used), else one is
    fitted with ``kmeans_backend`` (``textcore.kmeans.kmeans_fit``, which refuses None).
    Label-free criteria (``evaluation.clustering.label_free``; ``kmeans_silhouette``, ``head_changed``, ...) are
    added for every prediction unless ``label_free_sample`` is None; ``previous`` ({name: assignments} of the last
    evaluation, of the rows ``previous_rows`` of these when given) gives ``<name>_changed``. A criterion undefined
    for a partition (two texts in two clusters, identical embeddings, ...) is None; ``undefined``, when given,
    receives ``{"<name>_<criterion>": reason}``.
    """
    if kmeans is None:
        kmeans = kmeans_fit(outputs["embeddings"].numpy(), num_clusters, seed, n_init, kmeans_backend)
    predictions = {"kmeans": kmeans.labels_}
    if "head_pred" in outputs:
        predictions["head"] = outputs["head_pred"].long().numpy()
    metrics = {}
    if labels is not None:
        for name, pred in predictions.items():
            metrics.update({f"{name}_{k}": v for k, v in clustering_scores(labels, pred).items()})
    if label_free_sample is not None:
        embeddings = outputs["embeddings"].numpy()
        for name, pred in predictions.items():
            scores, reasons = label_free_report(embeddings, pred, num_clusters, (previous or {}).get(name),
                                                label_free_sample, seed, previous_rows)
            metrics.update({f"{name}_{k}": v for k, v in scores.items()})
            if undefined is not None:
                undefined.update({f"{name}_{k}": why for k, why in reasons.items()})
    return metrics, predictions


KEY = "dataset.callbacks.clustering_eval"


def _whole_number(name: str, value, minimum: int, meaning: str) -> None:
    """A count from the configuration; a text, a fraction or None would fail later, inside training."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{KEY}.{name}={value!r}: a whole number >= {minimum} ({meaning}).")


def monitor_direction(monitor: str) -> str:
    """``max`` or ``min`` for a metric name such as ``kmeans_acc``, ``head_davies_bouldin``."""
    base = monitor.split("_", 1)[1] if monitor.startswith(("kmeans_", "head_")) else monitor
    if base in LABEL_FREE_DIRECTIONS:
        if LABEL_FREE_DIRECTIONS[base] is None:
            raise ConfigError(f"monitor={monitor}: {base} has no better direction; monitor another metric "
                              f"({', '.join(n for n, d in LABEL_FREE_DIRECTIONS.items() if d)} or acc/nmi/ari/ami).")
        return LABEL_FREE_DIRECTIONS[base]
    if base in ("acc", "nmi", "ari", "ami"):
        return "max"
    raise ConfigError(f"monitor={monitor}: unknown metric; use <kmeans|head>_<acc|nmi|ari|ami> (labels) or "
                      f"<kmeans|head>_<{'|'.join(n for n, d in LABEL_FREE_DIRECTIONS.items() if d)}> (no labels).")


def uses_labels(monitor: str) -> bool:
    return monitor.split("_", 1)[-1] in ("acc", "nmi", "ari", "ami")


class ClusteringEvaluator(PeriodicEvaluation):
    """Evaluates clustering before training, every ``every_n_steps`` steps and at the end.

    Logs ``val/kmeans_acc``, ``val/kmeans_nmi``, ``val/kmeans_ari``, ``val/kmeans_ami`` (with labels) and
    the label-free ``val/kmeans_silhouette``, ``_calinski_harabasz``, ``_davies_bouldin``, ``_dunn``,
    ``_size_entropy``, ``_changed`` (``evaluation.clustering.label_free``), and the same for the cluster head
    (``val/head_*``) when the module's ``eval_step`` returns ``head_pred``.
    Needs the datamodule's ``eval_dataloader()``, ``labels`` (or None) and ``num_clusters``.

    Args:
        monitor: the metric that picks the best step (``best_step`` in results.json): a label metric
            (``kmeans_acc``: an oracle, recorded as ``best_selected_with_labels``) or a label-free one
            (``kmeans_silhouette``, ``head_davies_bouldin`` (lower is better), ...). Without labels a label
            metric falls back to ``kmeans_silhouette``, and the summary says so.
        label_free: log the label-free criteria (their cost: a silhouette on ``label_free_sample`` texts
            and three torchmetrics scores per prediction).
        stop_when_changed_below: stop training once ``stop_patience`` consecutive evaluations changed the
            cluster of fewer than this share of texts (``stop_key``, default ``kmeans_changed``; e.g. 0.01).
            None: never stop early.
    At the end it writes ``predictions.csv`` into ``output_dir``.
    """

    results_key = "clustering"

    def __init__(
        self,
        every_n_steps: int = 100,
        monitor: str = "kmeans_acc",
        kmeans_seed: int = 0,
        kmeans_n_init: int = 10,
        evaluate_before: bool = True,
        output_dir: str | None = None,
        *,
        kmeans_backend: str,
        kmeans_sample: int,
        sample: int,
        label_free: bool = True,
        label_free_sample: int = 2000,
        stop_when_changed_below: float | None = None,
        stop_patience: int = 3,
        stop_key: str = "kmeans_changed",
    ):
        _whole_number("every_n_steps", every_n_steps, 0, "0: only before and after training")
        _whole_number("sample", sample, 0, "texts of the evaluations before and during training; 0: all")
        _whole_number("kmeans_sample", kmeans_sample, 0, "rows KMeans fits its centres on; 0: all")
        super().__init__(every_n_steps=every_n_steps, evaluate_before=evaluate_before)
        monitor_direction(monitor)  # an unknown name fails now
        share = stop_when_changed_below
        if share is not None and (isinstance(share, (bool, str)) or not 0 < share < 1):
            raise ConfigError(f"{KEY}.stop_when_changed_below={share!r}: a share in (0, 1), e.g. 0.01, "
                              "or null to never stop early")
        _whole_number("stop_patience", stop_patience, 1, "evaluations in a row")
        if stop_when_changed_below is not None and not label_free:
            raise ConfigError("stop_when_changed_below needs label_free=true (the share of changed assignments)")
        if not stop_key.endswith("_changed"):
            raise ConfigError(f"stop_key={stop_key}: kmeans_changed or head_changed")
        self.monitor = monitor
        self.label_free_sample = label_free_sample if label_free else None
        self.stop_when_changed_below = stop_when_changed_below
        self.stop_patience = stop_patience
        self.stop_key = stop_key
        self.previous: dict = {}  # {prediction name: assignments of the last evaluation}, for `changed`
        self.told_undefined: set = set()  # reasons for null criteria that the log gave already
        self.stopped: dict | None = None
        self.kmeans_seed = kmeans_seed
        self.kmeans_n_init = kmeans_n_init
        self.kmeans_backend = check_kmeans_backend(kmeans_backend)
        self.kmeans_sample = kmeans_sample
        self.sample = sample
        self._final = False  # set while the end-of-training evaluation (every text) runs
        # wall time of this process's evaluations (embedding passes included; a pass shared with another callback
        # that made it first counts as nothing here): results.json ``clustering.seconds``
        self.seconds = {"embedding": 0.0, "evaluations": 0.0}
        self.output_dir = Path(output_dir) if output_dir else None
        self.predictions: dict | None = None
        self.before_predictions: dict | None = None  # KMeans of the embeddings before training
        self.outputs: dict | None = None  # evaluation outputs behind ``predictions``
        self.kmeans_centers = None  # [K, d] centres of the KMeans behind ``predictions["kmeans"]``

    def state_dict(self) -> dict:
        state = super().state_dict()
        # tensors, not lists: a million Python ints made each checkpoint slow and large
        state["previous"] = {k: torch.as_tensor(np.asarray(v, dtype=np.int64)) for k, v in self.previous.items()}
        state["stopped"] = self.stopped
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)
        self.previous = {k: np.asarray(v, dtype=np.int64) for k, v in (state_dict.get("previous") or {}).items()}
        self.stopped = state_dict.get("stopped")

    # -- hooks (schedule and persistence in PeriodicEvaluation) ------------------------------------------
    def setup(self, trainer, pl_module, stage: str) -> None:
        if self.output_dir is not None:  # an evaluation pass too large for memory is mapped into the run folder
            pl_module._eval_spill_dir = self.output_dir / "embeddings"

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        # the last step of a corpus larger than the sample: the final evaluation (every text) is this step's, so
        # the sample's would be a pass for nothing (20,000 texts of MiniLM are minutes on a CPU)
        last_step = trainer.max_steps is not None and trainer.global_step == trainer.max_steps
        if last_step and self.sample_rows(len(trainer.datamodule.texts)) is not None:
            return
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)

    def on_train_end(self, trainer, pl_module) -> None:
        last = self._evaluated(trainer.global_step)
        if last is not None and last.get("texts", len(trainer.datamodule.texts)) != len(trainer.datamodule.texts):
            self.history.remove(last)  # an entry of the sample: the final evaluation (every text) replaces it
        self._final = True
        try:
            super().on_train_end(trainer, pl_module)
        finally:
            self._final = False
        if self.output_dir is not None and trainer.is_global_zero:
            self.write_predictions(trainer.datamodule, self.output_dir / "predictions.csv")

    def sample_rows(self, n: int) -> np.ndarray | None:
        """The rows of the evaluations before and during training (sorted; None: every row): a sample fixed by
        ``sample`` and ``kmeans_seed``, the same at every evaluation so that they compare."""
        return sample_rows(n, self.sample, self.kmeans_seed)

    # -- internals ------------------------------------------------------------------------------------------
    def _evaluate(self, trainer, pl_module, record: bool = True) -> dict:
        start = time.perf_counter()
        dm = trainer.datamodule
        n = len(dm.texts)
        sampled = self.sample_rows(n)
        rows = None if self._final else sampled
        outputs = cached_eval_outputs(trainer, pl_module, rows)
        embedded = time.perf_counter()
        labels = dm.labels if dm.labels is None or rows is None else dm.labels[rows]
        kmeans = outputs_kmeans(outputs, dm.num_clusters, self.kmeans_seed, self.kmeans_n_init, self.kmeans_backend,
                                self.kmeans_sample)
        undefined: dict = {}
        # `changed` compares the rows of the sample: the final evaluation's rows are picked out of every text
        compare = sampled if rows is None and sampled is not None else None
        metrics, predictions = evaluate_outputs(outputs, labels, dm.num_clusters, self.kmeans_seed, kmeans=kmeans,
                                                previous=self.previous, label_free_sample=self.label_free_sample,
                                                undefined=undefined, previous_rows=compare)
        on_sample = {k: (v if compare is None else v[compare]) for k, v in predictions.items()}
        self._explain_undefined(undefined, trainer.is_global_zero)
        self.previous = {k: np.asarray(v, dtype=np.int64) for k, v in on_sample.items()}
        entry = {"step": trainer.global_step, "epoch": trainer.current_epoch, **metrics}
        entry["texts"] = n if rows is None else len(rows)
        entry["kmeans_fitted_on"] = kmeans.fitted_rows
        entry["eval_seconds"] = round(time.perf_counter() - start, 3)
        embedding = embedded - start
        self.seconds["embedding"] += embedding
        self.seconds["evaluations"] += entry["eval_seconds"]
        if record:
            self.history.append(entry)
            self.predictions = predictions
            # for the end-of-run report (callbacks.evaluation.run_report): the embeddings and KMeans behind them
            self.outputs, self.kmeans_centers = outputs, kmeans.cluster_centers_
        else:
            self.before_predictions = predictions
        if trainer.is_global_zero and metrics:
            for logger in trainer.loggers:
                logger.log_metrics({f"val/{k}": v for k, v in metrics.items() if v is not None},
                                   step=trainer.global_step)
        if trainer.is_global_zero and entry["eval_seconds"] > 5:  # a pass a person waited for: where it went
            embedded = f"embedding {format_duration(embedding)}" if embedding >= 0.5 else "the encoder pass made before"
            log.info("evaluation at step %d: %s texts in %s (%s, KMeans and scores %s)", entry["step"],
                     f"{entry['texts']:,}", format_duration(entry["eval_seconds"]), embedded,
                     format_duration(entry["eval_seconds"] - embedding))
        if record and self.stop_when_changed_below is not None:
            self._maybe_stop(trainer)
        return entry

    def _explain_undefined(self, undefined: dict, rank_zero: bool) -> None:
        """Each reason for a null criterion once in the log: every evaluation of a small file would repeat it."""
        by_reason: dict[str, list[str]] = {}
        for name, why in undefined.items():
            if why not in self.told_undefined:
                by_reason.setdefault(why, []).append(name)
        self.told_undefined.update(by_reason)
        if rank_zero:
            for why, names in by_reason.items():
                log.warning("%s reported as null (undefined for this clustering): %s", ", ".join(names), why)

    def _maybe_stop(self, trainer) -> None:
        done = stable_step(self.history, self.stop_key, self.stop_when_changed_below, self.stop_patience)
        stop = done is not None and done == len(self.history) - 1 and self.stopped is None
        stop = trainer.strategy.reduce_boolean_decision(stop, all=False)
        if stop:
            self.stopped = {
                "step": trainer.global_step,
                "rule": f"{self.stop_key} < {self.stop_when_changed_below} in {self.stop_patience} consecutive "
                        "evaluations",
            }
            trainer.should_stop = True
            log.info("stopping at step %d: %s", trainer.global_step, self.stopped["rule"])

    def effective_monitor(self) -> str:
        """``monitor``, or ``kmeans_silhouette`` when it needs labels that this run's data lacks."""
        if uses_labels(self.monitor) and not any(self.monitor in h for h in self.history) \
                and any("kmeans_silhouette" in h for h in self.history):
            return "kmeans_silhouette"
        return self.monitor

    def best(self, monitor: str | None = None) -> dict | None:
        monitor = monitor or self.effective_monitor()
        scored = [h for h in self.history if monitor in h]
        i = best_index([h[monitor] for h in scored], monitor_direction(monitor))
        return scored[i] if i is not None else None

    def summary(self) -> dict:
        monitor = self.effective_monitor()
        best = self.best(monitor)
        out = {
            "before": self.before,
            "final": self.final,
            "best": best,
            "best_step": best["step"] if best else None,
            "best_selected_with_labels": best is not None and uses_labels(monitor),
            "best_monitor": monitor if best else None,
            "history": self.history,
            "seconds": {k: round(v, 1) for k, v in self.seconds.items()},
            # how the numbers were made: the texts of each evaluation and KMeans' rows are in each entry
            "protocol": {"sample": self.sample, "kmeans_sample": self.kmeans_sample,
                         "kmeans_backend": self.kmeans_backend, "kmeans_n_init": self.kmeans_n_init,
                         "kmeans_seed": self.kmeans_seed, "label_free_sample": self.label_free_sample},
        }
        if monitor != self.monitor:
            out["best_monitor_note"] = f"monitor {self.monitor} needs labels; chosen by {monitor} instead"
        if self.stopped:
            out["stopped_early"] = self.stopped
        return out

    def run_predictions(self, datamodule):
        """What :meth:`write_predictions` wrote, as ``evaluation.model_io.run_files.RunPredictions`` (the report
        reads it from here instead of reading predictions.csv back)."""
        from evaluation.model_io.run_files import RunPredictions

        labels = datamodule.labels
        labels = None if labels is None else np.asarray(labels, dtype=str).astype(object)  # as the file reads back
        partitions = {name: np.asarray(self.predictions[name], dtype=np.int64)  # the file's order: head first
                      for name in ("head", "kmeans") if name in self.predictions}
        return RunPredictions(datamodule.texts, labels, partitions)

    def write_predictions(self, datamodule, path: Path) -> None:
        if self.predictions is None:
            return
        labels = datamodule.labels
        # `line`: the file line of the text (rows without text are dropped when the data is read, so `row`,
        # the position among the texts trained on, is not the position in the file)
        lines = getattr(datamodule, "lines", None)
        columns = ["row"] + (["line"] if lines is not None else []) + ["text", "kmeans_cluster"]
        columns += ["head_cluster"] if "head" in self.predictions else []
        columns += ["label"] if labels is not None else []
        texts = datamodule.texts
        parts = [range(len(texts))] + ([lines] if lines is not None else []) + [texts, self.predictions["kmeans"]]
        parts += [self.predictions["head"]] if "head" in self.predictions else []
        parts += [labels] if labels is not None else []
        with writing(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "w", newline="", encoding="utf-8") as handle:
                writer = csv.writer(handle)
                writer.writerow(columns)
                for start in range(0, len(texts), PREDICTION_CHUNK):  # blocks of rows: no second copy of the corpus
                    end = start + PREDICTION_CHUNK
                    writer.writerows(zip(*(_plain(part[start:end]) for part in parts)))


PREDICTION_CHUNK = 100_000  # rows of predictions.csv written at a time


def _plain(values) -> list:
    """Python values for csv: numpy integers as ints (a label column keeps its own type)."""
    return values.tolist() if isinstance(values, np.ndarray) else list(values)
