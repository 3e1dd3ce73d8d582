"""Periodic clustering evaluation: KMeans on embeddings and the module's own cluster head.

One job: evaluate (and keep the history results.json reports). Two callbacks act on what it found, each with its
own configuration section: ``callbacks.evaluation.clustering_stop`` stops training once the clusters are stable,
``callbacks.evaluation.clustering_predictions`` writes predictions.csv, the final embeddings and centroids."""
from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
import torch

from evaluation.clustering import catalogue
from evaluation.clustering.label_free import best_index, label_free_report
from evaluation.clustering.metrics import clustering_scores
from lightning_modules.shared.eval_outputs import cached_eval_outputs, outputs_kmeans
from lightning_modules.shared.periodic_evaluation import PeriodicEvaluation
from lightning_modules.shared.step_budget import training_ends_after_batch
from textcore.cluster_space import SpaceSettings, space_record
from textcore.console import format_duration
from textcore.encoding.backends import check_backend
from textcore.errors import ConfigError
from textcore.kmeans import check_kmeans_backend, kmeans_fit, sample_rows
from validation.renamed_keys import refuse_renamed

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


CONFIG_SECTION = "dataset.callbacks.clustering_eval"  # where conf/ keeps this callback's settings (error messages)

# the settings this section held before early stopping became a callback of its own (validation.renamed_keys)
MOVED_SETTINGS = ("stop_when_changed_below", "stop_patience", "stop_key")


def whole_number(section: str, name: str, value, minimum: int, meaning: str) -> None:
    """A count from the configuration; a text, a fraction or None would fail later, inside training."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{section}.{name}={value!r}: a whole number >= {minimum} ({meaning}).")


def monitor_direction(monitor: str) -> str:
    """``max`` or ``min`` for a metric name such as ``kmeans_acc``, ``head_davies_bouldin`` (the catalogue's)."""
    base = catalogue.split_prefixed(monitor)[1]
    known = catalogue.by_name()
    free = "|".join(catalogue.selectable(label_free_only=True))
    if base not in known:
        raise ConfigError(f"monitor={monitor}: unknown metric; use <kmeans|head>_<{'|'.join(catalogue.label_names())}> "
                          f"(labels) or <kmeans|head>_<{free}> (no labels).")
    if known[base].direction is None:
        raise ConfigError(f"monitor={monitor}: {base} has no better direction; monitor another metric "
                          f"({', '.join(catalogue.selectable(label_free_only=True))} or "
                          f"{'/'.join(catalogue.label_names())}).")
    return known[base].direction


def uses_labels(monitor: str) -> bool:
    metric = catalogue.by_name().get(monitor.split("_", 1)[-1])
    return metric is not None and metric.needs_labels


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
        output_dir: the run folder: an evaluation pass too large for memory is mapped into its ``embeddings/``.
        encode_backend: what embeds the texts of the end-of-run evaluation (every text; predictions.csv,
            ``embeddings/after.npy`` and the report come from it): ``torch``, or ``onnx`` / ``onnx-int8``, the trained
            encoder exported to ONNX into the run folder's ``onnx/`` and run by ONNX Runtime
            (``textcore.encoding.onnx_runtime``), checked against torch on a few texts first. The evaluations
            before and during training stay on torch (the weights still change). ONNX Runtime runs here on the
            CPU: a run on a GPU (or in several processes) keeps torch and says so in the log.
        stop_when_changed_below, stop_patience, stop_key: moved to ``dataset.callbacks.clustering_stop``
            (``validation.renamed_keys``); only None is accepted, anything else is an error naming the new key.
    The final evaluation's partitions, embeddings and KMeans centres stay here (``predictions``, ``outputs``,
    ``kmeans_centers``) for the callbacks that write and describe them.
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
        cluster_space: str = "embeddings",
        umap: dict | None = None,
        encode_backend: str = "torch",
        stop_when_changed_below: float | None = None,
        stop_patience: int | None = None,
        stop_key: str | None = None,
    ):
        for name, value in zip(MOVED_SETTINGS, (stop_when_changed_below, stop_patience, stop_key)):
            refuse_renamed(f"{CONFIG_SECTION}.{name}", value)
        whole_number(CONFIG_SECTION, "every_n_steps", every_n_steps, 0, "0: only before and after training")
        whole_number(CONFIG_SECTION, "sample", sample, 0, "texts of the evaluations before and during training; 0: all")
        whole_number(CONFIG_SECTION, "kmeans_sample", kmeans_sample, 0, "rows KMeans fits its centres on; 0: all")
        super().__init__(every_n_steps=every_n_steps, evaluate_before=evaluate_before)
        monitor_direction(monitor)  # an unknown name fails now
        self.monitor = monitor
        self.label_free_sample = label_free_sample if label_free else None
        self.previous: dict = {}  # {prediction name: assignments of the last evaluation}, for `changed`
        self.told_undefined: set = set()  # reasons for null criteria that the log gave already
        # {step, rule} once an early-stopping callback (clustering_stop) ended training: part of this run's
        # evaluation record (results.json ``clustering.stopped_early``), so it is checkpointed with the history
        self.stopped_early: dict | None = None
        self.kmeans_seed = kmeans_seed
        self.kmeans_n_init = kmeans_n_init
        self.kmeans_backend = check_kmeans_backend(kmeans_backend)
        self.kmeans_sample = kmeans_sample
        self.encode_backend = check_backend(encode_backend, "encode_backend")
        self.final_backend = "torch"  # what embeds the end-of-run pass in this process (``setup`` decides)
        self.final_check: dict | None = None  # the export's differences to torch on the check texts
        self.space = SpaceSettings.from_config(cluster_space, umap)  # where KMeans clusters (conf cluster_space)
        self.space_map = None  # the final evaluation's UMAP (cluster_space=umap), for predictions and new texts
        self.sample = sample
        self._final = False  # set while the end-of-training evaluation (every text) runs
        # wall time of this process's evaluations (embedding passes included; a pass shared with another callback
        # that made it first counts as nothing here): results.json ``clustering.seconds``
        self.seconds = {"embedding": 0.0, "evaluations": 0.0}
        self.output_dir = Path(output_dir) if output_dir else None
        self.predictions: dict | None = None
        self.before_predictions: dict | None = None  # KMeans of the embeddings before training
        self.outputs: dict | None = None  # evaluation outputs behind ``predictions``
        # [K, d] centres of the KMeans behind ``predictions["kmeans"]`` (in a refined UMAP, umap.refine=linear, the
        # predictions are its linear classifier's, not the nearest of these centres: space_map holds the classifier)
        self.kmeans_centers = None
        self.kmeans_device: str | None = None  # where the last KMeans ran (cpu, cuda:0): results.json's protocol

    def state_dict(self) -> dict:
        state = super().state_dict()
        # tensors, not lists: a million Python ints made each checkpoint slow and large
        state["previous"] = {k: torch.as_tensor(np.asarray(v, dtype=np.int64)) for k, v in self.previous.items()}
        state["stopped"] = self.stopped_early  # the key of checkpoints written before the split, kept
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)
        self.previous = {k: np.asarray(v, dtype=np.int64) for k, v in (state_dict.get("previous") or {}).items()}
        self.stopped_early = state_dict.get("stopped")

    # -- hooks (schedule and persistence in PeriodicEvaluation) ------------------------------------------
    def setup(self, trainer, pl_module, stage: str) -> None:
        if self.output_dir is not None:  # an evaluation pass too large for memory is mapped into the run folder
            pl_module._eval_spill_dir = self.output_dir / "embeddings"
        self.final_backend = final_pass_backend(self.encode_backend, trainer, pl_module)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        # the last step of a corpus larger than the sample, or of a run whose end-of-run pass is an export's: the
        # final evaluation (every text, on its backend) is this step's, so this one would be a pass for nothing
        if training_ends_after_batch(trainer) and (self.sample_rows(len(trainer.datamodule.texts)) is not None
                                                   or self.final_backend != "torch"):
            return
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)

    def on_train_end(self, trainer, pl_module) -> None:
        last = self._evaluated(trainer.global_step)
        # an entry of the sample, or of torch where the end-of-run pass is an export's (training stopped early
        # after it): the final evaluation (every text, on its backend) replaces it
        if last is not None and (last.get("texts", len(trainer.datamodule.texts)) != len(trainer.datamodule.texts)
                                 or last.get("encode_backend", "torch") != self.final_backend):
            self.history.remove(last)
        self._final = True
        try:
            super().on_train_end(trainer, pl_module)
        finally:
            self._final = False

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
        embedder = self._final_embedder(pl_module) if self._final and self.final_backend != "torch" else None
        outputs = cached_eval_outputs(trainer, pl_module, rows, embedder)
        embedded = time.perf_counter()
        labels = dm.labels if dm.labels is None or rows is None else dm.labels[rows]
        kmeans = outputs_kmeans(outputs, dm.num_clusters, self.kmeans_seed, self.kmeans_n_init, self.kmeans_backend,
                                self.kmeans_sample, self.space)
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
        if outputs.backend != "torch":
            entry["encode_backend"] = outputs.backend
        self.kmeans_device = kmeans.device
        entry["eval_seconds"] = round(time.perf_counter() - start, 3)
        embedding = embedded - start
        self.seconds["embedding"] += embedding
        self.seconds["evaluations"] += entry["eval_seconds"]
        if record:
            self.history.append(entry)
            self.predictions = predictions
            # for the end-of-run report (callbacks.evaluation.run_report): the embeddings and KMeans behind them
            self.outputs, self.kmeans_centers = outputs, kmeans.cluster_centers_
            self.space_map = getattr(kmeans, "space", None)  # a KMeansResult of textcore.kmeans has none
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
        return entry

    def _final_embedder(self, pl_module):
        """The trained encoder's export for the end-of-run pass: written into (or found in) the run folder's
        ``onnx/``, where ``tools.py predict`` looks for a run's export, and checked against torch first."""
        from textcore.encoding.onnx_runtime import embedder

        onnx_encoder = embedder(pl_module.encoder, pl_module.eval_pooling, self.final_backend, self.output_dir)
        self.final_check = onnx_encoder.agreement
        return onnx_encoder

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

    def record_stop(self, step: int, rule: str) -> None:
        """Training stops after the evaluation of ``step`` (an early-stopping callback decided): the summary says so."""
        self.stopped_early = {"step": step, "rule": rule}

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
                         "kmeans_backend": self.kmeans_backend, "kmeans_device": self.kmeans_device,
                         "kmeans_n_init": self.kmeans_n_init,
                         "kmeans_seed": self.kmeans_seed, "label_free_sample": self.label_free_sample,
                         "cluster_space": space_record(self.space),
                         # what embedded the end-of-run pass (every text): torch, onnx or onnx-int8
                         "encode_backend": self.final.get("encode_backend", "torch") if self.final else None},
        }
        if self.final_check is not None:
            out["protocol"]["encode_check"] = {k: float(f"{v:.3g}") for k, v in self.final_check.items()}
        if monitor != self.monitor:
            out["best_monitor_note"] = f"monitor {self.monitor} needs labels; chosen by {monitor} instead"
        if self.stopped_early:
            out["stopped_early"] = self.stopped_early
        return out


def final_pass_backend(backend: str, trainer, pl_module) -> str:
    """What embeds the end-of-run pass: ``backend`` (conf ``encode_backend``), or torch where ONNX Runtime does
    not run the pass here (a GPU run, several processes), which the log says. A pooling the export cannot take,
    or ONNX Runtime missing, stops before training."""
    if backend == "torch":
        return backend
    device, world = trainer.strategy.root_device, trainer.world_size
    if device.type != "cpu" or world > 1:
        log.info("encode_backend=%s ignored: ONNX Runtime embeds on the CPU in one process, this run is on %s%s; "
                 "the end-of-run pass stays on torch", backend, device.type,
                 f" in {world} processes" if world > 1 else "")
        return "torch"
    from textcore.encoding.onnx_runtime import ONNX_POOLINGS, _onnxruntime

    if pl_module.eval_pooling not in ONNX_POOLINGS:
        raise ConfigError(f"encode_backend={backend}: the evaluation pooling '{pl_module.eval_pooling}' takes "
                          f"several backbone calls and is not exported (poolings {', '.join(ONNX_POOLINGS)} are); "
                          "use encode_backend=torch.")
    _onnxruntime()  # not installed: one line naming the extra, now rather than after training
    return backend


def evaluator_before(trainer, follower, follower_section: str) -> ClusteringEvaluator | None:
    """The run's clustering evaluator (None without one), checked to come before ``follower`` in
    ``trainer.callbacks``: Lightning calls each hook on the callbacks in that order, and the follower acts in the
    same hook on what the evaluator has just found (stop after this step's evaluation, write the final one)."""
    callbacks = list(trainer.callbacks)
    evaluator = next((cb for cb in callbacks if isinstance(cb, ClusteringEvaluator)), None)
    if evaluator is not None and callbacks.index(follower) < callbacks.index(evaluator):
        raise ConfigError(f"{follower_section} comes before {CONFIG_SECTION} among the callbacks, but acts on its "
                          f"evaluations: list it after {CONFIG_SECTION}.")
    return evaluator
