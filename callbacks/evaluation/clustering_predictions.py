"""Writes what the end-of-training clustering evaluation found: the files a person and ``python tools.py predict``
read from a run folder.

Into ``output_dir``, after the clustering evaluator's final evaluation (``callbacks.evaluation.clustering_eval``):
``predictions.csv`` (row, file line, text, clusters, label), ``embeddings/after.npy`` (float16),
``embeddings/before_kmeans.npy`` and ``kmeans_centroids.npy`` + ``kmeans_centroids.json`` (the final KMeans: what
``evaluation.model_io.predict`` assigns new texts with; with ``cluster_space=umap`` the centres are UMAP coordinates
and the map is in ``cluster_space/``, ``textcore.cluster_space``). File names: ``evaluation.model_io.run_files``. The
report (``callbacks.evaluation.run_report``) describes and draws these files afterwards.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
from lightning.pytorch.callbacks import Callback

from callbacks.evaluation.clustering_eval import evaluator_before
from evaluation.model_io import run_files
from textcore.cluster_space import FOLDER
from textcore.errors import writing

CONFIG_SECTION = "dataset.callbacks.clustering_predictions"  # where conf/ keeps this callback's settings
PREDICTION_CHUNK = 100_000  # rows of predictions.csv written at a time


def prediction_columns(datamodule, predictions: dict) -> tuple[list[str], list]:
    """predictions.csv's header and its columns (sequences of one value per text), in the file's order.

    ``line``: the file line of the text (rows without text are dropped when the data is read, so ``row``, the
    position among the texts trained on, is not the position in the file)."""
    labels = datamodule.labels
    lines = getattr(datamodule, "lines", None)
    columns = ["row"] + (["line"] if lines is not None else []) + ["text", "kmeans_cluster"]
    columns += ["head_cluster"] if "head" in predictions else []
    columns += ["label"] if labels is not None else []
    texts = datamodule.texts
    parts = [range(len(texts))] + ([lines] if lines is not None else []) + [texts, predictions["kmeans"]]
    parts += [predictions["head"]] if "head" in predictions else []
    parts += [labels] if labels is not None else []
    return columns, parts


def write_predictions_csv(path: Path, columns: list[str], parts: list) -> None:
    """The table, written in blocks of rows (no second copy of the corpus), complete or not at all."""
    rows = len(parts[0])
    with writing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(columns)
            for start in range(0, rows, PREDICTION_CHUNK):
                end = start + PREDICTION_CHUNK
                writer.writerows(zip(*(_plain(part[start:end]) for part in parts)))


def run_predictions(datamodule, predictions: dict) -> run_files.RunPredictions:
    """What predictions.csv holds, as ``run_files.RunPredictions`` (the report reads it from here instead of
    reading the file back)."""
    labels = datamodule.labels
    labels = None if labels is None else np.asarray(labels, dtype=str).astype(object)  # as the file reads back
    partitions = {name: np.asarray(predictions[name], dtype=np.int64)  # the file's order: head first
                  for name in ("head", "kmeans") if name in predictions}
    return run_files.RunPredictions(datamodule.texts, labels, partitions)


def centroid_metadata(centres: np.ndarray, evaluator, pl_module) -> dict:
    """kmeans_centroids.json: how the centres were made and in which space new texts are assigned to them."""
    encoder = getattr(pl_module, "encoder", None)
    history = evaluator.history
    return {
        "num_clusters": int(centres.shape[0]),
        "dim": int(centres.shape[1]),
        "step": history[-1]["step"] if history else None,
        "kmeans_seed": evaluator.kmeans_seed,
        "kmeans_n_init": evaluator.kmeans_n_init,
        "kmeans_fitted_on": history[-1].get("kmeans_fitted_on") if history else None,
        "pooling": getattr(pl_module, "eval_pooling", None),
        "max_length": getattr(encoder, "max_length", None),
        "space": "evaluation embeddings of the trained encoder (unnormalised); assignment: nearest centroid "
                 "(Euclidean), as KMeans; kmeans_cluster in predictions.csv",
    } | space_metadata(evaluator.space_map)


def space_metadata(space_map) -> dict:
    """The clustering space of the centres when it is a UMAP (cluster_space=umap): nothing otherwise."""
    if space_map is None:
        return {}
    settings = space_map.settings
    maps = f"{settings.fits} UMAPs side by side" if settings.fits > 1 else "UMAP"
    where = (f"{maps} ({settings.n_components} dimensions each) of the evaluation embeddings of the trained "
             f"encoder, saved in {FOLDER}/")
    if space_map.refined:  # the centres made the KMeans; the classifier made (and makes) the assignments
        how = ("the KMeans clusters of these centres refined by a linear classifier of the embeddings (umap.refine="
               f"linear; weights.npy and bias.npy in {FOLDER}/): new texts are assigned by that classifier, not by "
               "the nearest centroid")
    else:
        how = ("new texts are placed by their nearest fitted texts (textcore.cluster_space), then assigned to the "
               "nearest centroid (Euclidean)")
    return {"cluster_space": "umap", "space": f"{where}; {how}; kmeans_cluster in predictions.csv"}


class ClusteringPredictionWriter(Callback):
    """After the final clustering evaluation, writes its partitions, embeddings and centres into ``output_dir``
    (None: nothing is written). Rank 0 writes; the other ranks hold the same evaluation.

    Needs the clustering evaluator (``dataset.callbacks.clustering_eval``) listed before it; without one (e.g.
    ``~dataset.callbacks.clustering_eval``) there is nothing to write."""

    def __init__(self, output_dir: str | None = None):
        self.output_dir = Path(output_dir) if output_dir else None
        self._evaluator = None
        self.files: list[str] = []

    def setup(self, trainer, pl_module, stage: str) -> None:
        self._evaluator = evaluator_before(trainer, self, CONFIG_SECTION)

    def on_train_end(self, trainer, pl_module) -> None:
        evaluator = self._evaluator
        if self.output_dir is None or evaluator is None or evaluator.predictions is None or not trainer.is_global_zero:
            return
        out = self.output_dir
        columns, parts = prediction_columns(trainer.datamodule, evaluator.predictions)
        write_predictions_csv(out / run_files.PREDICTIONS, columns, parts)
        run_files.save_embeddings(out / run_files.EMBEDDINGS_AFTER, evaluator.outputs["embeddings"].numpy())
        if evaluator.before_predictions is not None:
            np.save(out / run_files.BEFORE_KMEANS, evaluator.before_predictions["kmeans"].astype(np.int32))
        centres = np.asarray(evaluator.kmeans_centers, dtype=np.float32)
        np.save(out / run_files.CENTROIDS, centres)
        if evaluator.space_map is not None:  # cluster_space=umap: the map new texts go through, as arrays
            evaluator.space_map.save(out)
        meta = centroid_metadata(centres, evaluator, pl_module)
        (out / run_files.CENTROIDS_META).write_text(json.dumps(meta, indent=2))
        self.files = [run_files.PREDICTIONS, run_files.EMBEDDINGS_AFTER, run_files.CENTROIDS, run_files.CENTROIDS_META]
        self.files += [FOLDER] if evaluator.space_map is not None else []


def _plain(values) -> list:
    """Python values for csv: numpy integers as ints (a label column keeps its own type)."""
    return values.tolist() if isinstance(values, np.ndarray) else list(values)
