"""Periodic clustering evaluation: KMeans on embeddings and the module's own cluster head."""
from __future__ import annotations

import csv
import time
from pathlib import Path

from callbacks.evaluation.eval_outputs import cached_eval_outputs
from callbacks.evaluation.periodic import PeriodicEvaluation
from errors import writing
from evaluation.metrics import clustering_scores
from lightning_modules.shared.kmeans import kmeans_fit, resolve_kmeans_backend


def evaluate_outputs(
    outputs: dict, labels, num_clusters: int, seed: int = 0, n_init: int = 10, kmeans=None,
    kmeans_backend: str | None = None,
) -> tuple[dict, dict]:
    """Scores and predictions from evaluation outputs.

    ``outputs`` has ``embeddings`` [N, d] and optionally ``head_pred`` [N]. Returns
    (metrics, predictions): metrics ``kmeans_acc``/``kmeans_nmi``/... and ``head_...`` when labels
    are known (empty otherwise); predictions ``kmeans`` and ``head`` as integer arrays.
    ``kmeans``: a KMeans already fitted on these embeddings (its ``labels_`` are used), else one is
    fitted with ``kmeans_backend`` (``lightning_modules.shared.kmeans.kmeans_fit``; None: the default backend).
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
    return metrics, predictions


class ClusteringEvaluator(PeriodicEvaluation):
    """Evaluates clustering before training, every ``every_n_steps`` steps and at the end.

    Logs ``val/kmeans_acc``, ``val/kmeans_nmi``, ``val/kmeans_ari``, ``val/kmeans_ami`` and the same
    for the cluster head (``val/head_*``) when the module's ``eval_step`` returns ``head_pred``.
    Needs the datamodule's ``eval_dataloader()``, ``labels`` (or None) and ``num_clusters``.
    The best step is chosen by ``monitor`` (which uses the labels) and recorded as such.
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
        kmeans_backend: str | None = None,
    ):
        super().__init__(every_n_steps=every_n_steps, evaluate_before=evaluate_before)
        self.monitor = monitor
        self.kmeans_seed = kmeans_seed
        self.kmeans_n_init = kmeans_n_init
        self.kmeans_backend = resolve_kmeans_backend(kmeans_backend)
        self.output_dir = Path(output_dir) if output_dir else None
        self.predictions: dict | None = None
        self.before_predictions: dict | None = None  # KMeans of the embeddings before training
        self.outputs: dict | None = None  # evaluation outputs behind ``predictions``
        self.kmeans_centers = None  # [K, d] centres of the KMeans behind ``predictions["kmeans"]``

    # -- hooks (schedule and persistence in PeriodicEvaluation) ------------------------------------------
    def on_train_end(self, trainer, pl_module) -> None:
        super().on_train_end(trainer, pl_module)
        if self.output_dir is not None and trainer.is_global_zero:
            self.write_predictions(trainer.datamodule, self.output_dir / "predictions.csv")

    # -- internals ------------------------------------------------------------------------------------------
    def _evaluate(self, trainer, pl_module, record: bool = True) -> dict:
        start = time.perf_counter()
        outputs = cached_eval_outputs(trainer, pl_module)
        dm = trainer.datamodule
        kmeans = kmeans_fit(
            outputs["embeddings"].numpy(), dm.num_clusters, self.kmeans_seed, self.kmeans_n_init, self.kmeans_backend
        )
        metrics, predictions = evaluate_outputs(outputs, dm.labels, dm.num_clusters, kmeans=kmeans)
        entry = {"step": trainer.global_step, "epoch": trainer.current_epoch, **metrics}
        entry["eval_seconds"] = round(time.perf_counter() - start, 3)
        if record:
            self.history.append(entry)
            self.predictions = predictions
            # for the end-of-run report (callbacks.evaluation.run_report): the embeddings and KMeans behind them
            self.outputs, self.kmeans_centers = outputs, kmeans.cluster_centers_
        else:
            self.before_predictions = predictions
        if trainer.is_global_zero and metrics:
            for logger in trainer.loggers:
                logger.log_metrics({f"val/{k}": v for k, v in metrics.items()}, step=trainer.global_step)
        return entry

    def best(self) -> dict | None:
        scored = [h for h in self.history if self.monitor in h]
        return max(scored, key=lambda h: (h[self.monitor], -h["step"])) if scored else None

    def summary(self) -> dict:
        best = self.best()
        return {
            "before": self.before,
            "final": self.final,
            "best": best,
            "best_step": best["step"] if best else None,
            "best_selected_with_labels": best is not None,
            "best_monitor": self.monitor if best else None,
            "history": self.history,
        }

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
        with writing(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "w", newline="", encoding="utf-8") as handle:
                writer = csv.writer(handle)
                writer.writerow(columns)
                for i, text in enumerate(datamodule.texts):
                    row = [i] + ([lines[i]] if lines is not None else []) + [text, int(self.predictions["kmeans"][i])]
                    if "head" in self.predictions:
                        row.append(int(self.predictions["head"][i]))
                    if labels is not None:
                        row.append(labels[i])
                    writer.writerow(row)
