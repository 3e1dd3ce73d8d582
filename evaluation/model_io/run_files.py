"""The files a run folder holds for looking at its clusters, and how to read them.

Written at the end of a clustering run by ``callbacks.evaluation.clustering_predictions`` (``predictions.csv``,
the final embeddings and KMeans) and ``callbacks.evaluation.run_report.RunReport`` (the rest):

- ``embeddings/before.npy``, ``embeddings/after.npy``: evaluation embeddings, float16 ([N, d], N·d·2 bytes
  each), before the first step and at the end: after.npy of every text in the row order of ``predictions.csv``,
  before.npy of the texts the evaluation before training embedded (every text, or for a corpus larger than
  ``eval_sample`` the rows listed in ``embeddings/before_rows.npy``);
- ``embeddings/before_kmeans.npy``: KMeans clusters of the "before" embeddings (int32 [N]);
- ``kmeans_centroids.npy`` (float32 [K, d]) + ``kmeans_centroids.json``: the final KMeans of the
  evaluation embeddings, for ``evaluation.model_io.predict`` (with ``cluster_space=umap`` its centres in UMAP
  coordinates; with ``umap.refine=linear`` the clusters of ``predictions.csv`` are those of the classifier in
  ``cluster_space/``, not these centres' nearest);
- ``clusters.md``, ``clusters.json``: cluster descriptions (``evaluation.run_report.describe``);
- ``plots/*.png``: ``evaluation.run_report.plots``;
- ``report.html``: one self-contained page with the map, the clusters, the summary and the curves
  (``evaluation.run_report.html``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from textcore import run_folder
from textcore.errors import UserError

EMBEDDINGS_BEFORE = "embeddings/before.npy"
EMBEDDINGS_AFTER = "embeddings/after.npy"
EMBEDDINGS_BEFORE_ROWS = "embeddings/before_rows.npy"  # the rows of before.npy when it holds a sample
BEFORE_KMEANS = "embeddings/before_kmeans.npy"
CENTROIDS = run_folder.CENTRES
CENTROIDS_META = run_folder.CENTRES_META
CLUSTERS_MD = "clusters.md"
CLUSTERS_JSON = "clusters.json"
PLOTS_DIR = "plots"
PREDICTIONS = run_folder.PREDICTIONS
METRICS_CSV = "csv/metrics.csv"
REPORT_HTML = "report.html"
RESULTS_JSON = run_folder.RESULTS


class RunFolderError(UserError, ValueError):
    """A folder that is not (or not yet) what a command needs from a run; the message says what is missing."""


@dataclass
class RunPredictions:
    """``predictions.csv`` of a clustering run: texts, labels (or None) and each partition's clusters."""

    texts: list[str]
    labels: np.ndarray | None
    partitions: dict[str, np.ndarray] = field(default_factory=dict)  # "head", "kmeans" -> int [N]
    kmeans_first: bool = False  # the run clustered in a UMAP (cluster_space=umap): its KMeans is what it stands for

    @property
    def primary(self) -> str:
        """The partition the run stands for: the method's cluster head when it has one, else KMeans; KMeans when the
        run clustered in a UMAP (the head's centroids live in the embeddings, the run's clusters in the UMAP)."""
        return "head" if "head" in self.partitions and not self.kmeans_first else "kmeans"


SAVE_BLOCK_ROWS = 65536  # rows converted at a time: a million embeddings are never copied whole


def save_embeddings(path: Path, embeddings) -> Path:
    """Store [N, d] embeddings as float16 (float32 when float16 would overflow), block by block."""
    blocks = range(0, len(embeddings), SAVE_BLOCK_ROWS)

    def block(start: int) -> np.ndarray:
        return np.asarray(embeddings[start:start + SAVE_BLOCK_ROWS], dtype=np.float32)

    def overflows(x: np.ndarray) -> bool:  # a finite value that float16 cannot hold
        return bool(np.any(~np.isfinite(x.astype(np.float16)) & np.isfinite(x)))

    dtype = np.float32 if any(overflows(block(s)) for s in blocks) else np.float16
    path.parent.mkdir(parents=True, exist_ok=True)
    stored = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=tuple(np.shape(embeddings)))
    for start in blocks:
        stored[start:start + SAVE_BLOCK_ROWS] = block(start)
    stored.flush()
    del stored
    return path


def load_array(run_dir: Path, name: str) -> np.ndarray | None:
    """The array ``name`` of the run folder, memory-mapped as stored (embeddings: float16), or None. Take the rows
    you need, then convert them (``rows_float32``): a million embeddings are never copied whole."""
    path = Path(run_dir) / name
    return np.load(path, mmap_mode="r") if path.is_file() and name.endswith(".npy") else None


def rows_float32(array, rows=None) -> np.ndarray:
    """``array[rows]`` (every row when None) as float32: what the report computes on, from a float16 file."""
    return np.asarray(array if rows is None else array[rows], dtype=np.float32)


def run_embeddings(run_dir: Path, texts, trust_checkpoint: bool = False) -> np.ndarray:
    """The run's final evaluation embeddings: ``embeddings/after.npy``, or the run's encoder embeds ``texts``
    (``trust_checkpoint``: the user's opt-in for a checkpoint holding more than tensors and plain values)."""
    import logging

    saved = load_array(run_dir, EMBEDDINGS_AFTER)
    if saved is not None:
        if len(saved) != len(texts):
            raise RunFolderError(
                f"'{Path(run_dir) / EMBEDDINGS_AFTER}' has {len(saved)} rows but predictions.csv {len(texts)}: "
                "they come from different runs; delete the .npy to re-embed."
            )
        return saved
    from evaluation.model_io.load import load_encoder

    logging.getLogger(__name__).info("%s has no %s: embedding %d texts with the run's encoder", run_dir,
                                     EMBEDDINGS_AFTER, len(texts))
    encoder, pooling = load_encoder(run_dir, trust_checkpoint=trust_checkpoint)
    return encoder.encode(list(texts), pooling=pooling).numpy()


def load_predictions(run_dir: str | Path) -> RunPredictions:
    """Read ``<run>/predictions.csv`` (written after the clustering evaluator's final evaluation)."""
    run_dir = Path(run_dir)
    path = run_dir / PREDICTIONS
    if not run_dir.is_dir():
        raise RunFolderError(f"Run folder '{run_dir}' does not exist.")
    if not path.is_file():
        raise RunFolderError(
            f"'{run_dir}' has no {PREDICTIONS}: pass the folder of a finished clustering run "
            "(logs/train/runs/<method>_<dataset>/<time>); STS runs (wiki, nli) have no clusters."
        )
    frame = run_folder.RunFolder(run_dir).predictions()
    partitions = {name: frame[f"{name}_cluster"].to_numpy(dtype=np.int64)
                  for name in ("head", "kmeans") if f"{name}_cluster" in frame.columns}
    labels = frame["label"].to_numpy(dtype=object) if "label" in frame.columns else None
    from textcore.cluster_space import FOLDER

    return RunPredictions(frame["text"].tolist(), labels, partitions,
                          kmeans_first="kmeans" in partitions and (run_dir / FOLDER / "space.json").is_file())


def load_config(run_dir: str | Path):
    """The run's resolved config (an OmegaConf object), or None."""
    return run_folder.RunFolder(run_dir).config()


def num_clusters(run_dir: str | Path, predictions: RunPredictions) -> int:
    """K of the run (so that empty clusters are reported too): the method's, else the dataset's,
    else the KMeans centroids', else the largest cluster id + 1."""
    cfg = load_config(run_dir)
    for key in ("method.num_clusters", "dataset.num_clusters"):
        value = config_value(cfg, key)
        if isinstance(value, int) and value > 0:
            return max(value, _largest_id(predictions) + 1)
    meta = Path(run_dir) / CENTROIDS_META
    if meta.is_file():
        return max(int(json.loads(meta.read_text())["num_clusters"]), _largest_id(predictions) + 1)
    return _largest_id(predictions) + 1


def run_title(run_dir: str | Path) -> str:
    """'sccl on demo (minilm)' from the run's config, or the folder name."""
    cfg = load_config(run_dir)
    method, dataset, backbone = (config_value(cfg, f"{k}.name") for k in ("method", "dataset", "backbone"))
    if method and dataset:
        return f"{method} on {dataset}" + (f" ({backbone})" if backbone else "")
    return Path(run_dir).name


def _largest_id(predictions: RunPredictions) -> int:
    return max((int(p.max()) for p in predictions.partitions.values() if len(p)), default=-1)


def config_value(cfg, key: str):
    """``key`` (dotted) of a run config, or None."""
    if cfg is None:
        return None
    from omegaconf import OmegaConf

    return OmegaConf.select(cfg, key, default=None)
