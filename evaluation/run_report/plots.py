"""Pictures of a run: 2-D maps of the embeddings, the matched confusion matrix, training curves.

    python tools.py plots --run <run folder> [--projection tsne|umap|pca] [--max-points 3000] [--seed 0]

writes PNG files into ``<run>/plots/`` (a run writes them itself at the end of training, with
``callbacks.report.projection``, t-SNE by default):

- ``embeddings_<projection>.png``: the evaluation embeddings before and after training, projected
  to 2-D, coloured by true label (when known) and by predicted cluster; at most ``max-points``
  texts, drawn at random with ``seed`` (the same texts in every panel). Each projection is fitted on
  its own embeddings. Clusters take the colour of the class they are matched to (Hungarian match),
  so a well-separated run shows the same colours in the label and cluster panels. Up to 20 classes
  get distinct colours and a legend; beyond that a continuous colour scale and no legend.
- ``confusion.png`` (labels known): true classes against predicted clusters, the clusters in
  Hungarian-matched order (the diagonal holds the matched texts), shaded by the share of the class;
- ``training_curves.png``: from ``csv/metrics.csv`` (the default CSV logger): the loss and its
  terms, clustering accuracy/NMI of the evaluation passes, STS-B dev (SimCSE/ClusterNS/PairSupCon
  with STS selection), ClusterNS's in-batch similarities (``train/sim_*``, the paper's Figs. 3-4), AECL's
  NS (``val/ns``) with its stage boundaries (``train/stage``) marked on every panel. Steps whose
  batch was smaller than the full batch (``train/batch_size``; the last batch of an epoch) are left
  out of the loss panels, and the panel title says how many: with fewer in-batch negatives the loss
  is lower, which drew a dip at every epoch end.

t-SNE (scikit-learn, PCA-initialised, 500 iterations, after PCA to 50 dimensions, one thread) is
the default because UMAP's first call compiles its numba code (about 10 s); ``--projection umap``
uses umap-learn, ``pca`` is instant.
"""
from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np

from evaluation.clustering.confusion import matched_confusion
from evaluation.figures import new_figure, save_figure
from evaluation.model_io import run_files

log = logging.getLogger(__name__)

PROJECTIONS = ("tsne", "umap", "pca")
MAX_LEGEND = 20
TSNE_ITERATIONS = 500  # the map of 1000 iterations looks the same on the demo (checked), at twice the cost


# -- maths -------------------------------------------------------------------------------------------------
def map_rows(n: int, max_points: int, seed: int = 0, among: np.ndarray | None = None) -> np.ndarray:
    """The rows a map of ``n`` texts draws: a seeded sample of at most ``max_points``, taken from ``among`` (the rows
    the evaluation before training embedded, ``embeddings/before_rows.npy``) when given, so that the "before" and
    "after" panels and report.html show the same texts."""
    if among is None:
        return subsample(n, max_points, seed)
    return np.asarray(among[subsample(len(among), max_points, seed)], dtype=np.int64)


def subsample(n: int, max_points: int, seed: int = 0) -> np.ndarray:
    """Sorted indices of at most ``max_points`` of ``n`` rows, drawn without replacement with ``seed``."""
    if max_points <= 0 or n <= max_points:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=max_points, replace=False))


# the latest two projections (a map's "after" and "before" panels): the run's report.html maps the same texts as
# embeddings_<projection>.png's "after" panel, and a t-SNE of 3000 texts costs about 10 s on 2 cores
_last_projection: dict = {}
KEPT_PROJECTIONS = 2


def project_2d(embeddings: np.ndarray, method: str = "tsne", seed: int = 0) -> np.ndarray:
    """[n, 2] coordinates of [n, d] embeddings by t-SNE (PCA-initialised, on the first 50 principal
    components), UMAP or PCA; deterministic for a seed. Repeating the latest call returns its result."""
    if method not in PROJECTIONS:
        raise ValueError(f"projection must be one of {PROJECTIONS}, got '{method}'")
    import hashlib

    x = np.asarray(embeddings, dtype=np.float32)
    key = (hashlib.sha1(np.ascontiguousarray(x).tobytes()).hexdigest(), x.shape, method, seed)
    if key not in _last_projection:
        while len(_last_projection) >= KEPT_PROJECTIONS:
            _last_projection.pop(next(iter(_last_projection)))  # the oldest
        _last_projection[key] = np.asarray(_project(x, method, seed))
    return _last_projection[key].copy()


def _project(x: np.ndarray, method: str, seed: int) -> np.ndarray:
    from sklearn.decomposition import PCA

    n = len(x)
    if n < 5 or method == "pca":
        if n < 2:
            return np.zeros((n, 2))
        coords = PCA(n_components=min(2, x.shape[1], n), random_state=seed).fit_transform(x)
        return np.pad(coords, ((0, 0), (0, 2 - coords.shape[1])))
    if method == "umap":
        with warnings.catch_warnings():  # "n_jobs value 1 overridden ... by setting random_state": wanted
            warnings.simplefilter("ignore", UserWarning)
            import umap

            return umap.UMAP(n_neighbors=min(15, n - 1), random_state=seed).fit_transform(x)
    from sklearn.manifold import TSNE
    from threadpoolctl import threadpool_limits

    if x.shape[1] > 50 and n > 50:
        x = PCA(n_components=50, random_state=seed).fit_transform(x)
    perplexity = float(min(30.0, (n - 1) / 3))
    tsne = TSNE(n_components=2, init="pca", perplexity=perplexity, learning_rate="auto", max_iter=TSNE_ITERATIONS,
                random_state=seed)
    # one OpenMP thread: t-SNE's many short parallel regions, next to torch's spinning OpenMP threads
    # (or any other load), cost up to 40x more time than they save (17 s instead of 0.4 s for 36 points)
    with threadpool_limits(1, user_api="openmp"):
        return tsne.fit_transform(x)


def palette(n: int) -> list[tuple]:
    """``n`` RGBA colours: tab10 up to 10, tab20 up to 20, beyond that a continuous scale (turbo)
    visited in a stride so that neighbouring ids get far-apart colours."""
    from matplotlib import colormaps

    if n <= 10:
        return [colormaps["tab10"](i) for i in range(n)]
    if n <= 20:
        tab20 = colormaps["tab20"]
        # dark shades first, then the light ones: the first ten stay as distinct as tab10
        return [tab20(2 * i) for i in range(10)] + [tab20(2 * i + 1) for i in range(n - 10)]
    stride = _coprime_stride(n)
    scale = colormaps["turbo"]
    return [scale(0.05 + 0.9 * ((i * stride) % n) / (n - 1)) for i in range(n)]


def _coprime_stride(n: int) -> int:
    stride = max(2, int(round(n * 0.381966)))  # golden-ratio step
    while np.gcd(stride, n) != 1:
        stride += 1
    return stride


def cluster_colour_index(labels, clusters, num_clusters: int) -> dict[int, int]:
    """Colour index of each cluster: the index of the class it is matched to, unmatched clusters after the classes."""
    confusion = matched_confusion(labels, clusters, num_clusters)
    n_matched = int(confusion.matched.sum())
    return {cluster: (i if i < n_matched else len(confusion.classes) + i - n_matched)
            for i, cluster in enumerate(confusion.clusters)}


# -- figures ---------------------------------------------------------------------------------------------
def _scatter(ax, xy: np.ndarray, colour_ids: np.ndarray, colours: list, title: str) -> None:
    size = 4 if len(xy) > 2000 else 9
    ax.scatter(xy[:, 0], xy[:, 1], c=[colours[i] for i in colour_ids], s=size, linewidths=0, alpha=0.8,
               rasterized=True)
    ax.set_title(title, fontsize=10)
    ax.set_xticks([])
    ax.set_yticks([])


def _short(value, limit: int = 22) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def plot_embedding_maps(
    path: Path,
    after: np.ndarray,
    clusters_after: np.ndarray,
    before: np.ndarray | None = None,
    clusters_before: np.ndarray | None = None,
    labels: Sequence | None = None,
    num_clusters: int | None = None,
    projection: str = "tsne",
    seed: int = 0,
    after_name: str = "cluster head",
    title: str = "",
) -> Path:
    """2-D maps before/after training (columns) coloured by true label and by predicted cluster (rows).

    All arrays are row-aligned and already subsampled. ``clusters_before`` may be None (the
    "before" column then shows labels only)."""
    from matplotlib.lines import Line2D

    k = int(num_clusters or clusters_after.max() + 1)
    stages = [("after training", after, clusters_after, after_name)]
    if before is not None:
        stages.insert(0, ("before training", before, clusters_before, "KMeans"))
    coords = [project_2d(emb, projection, seed) for _, emb, _, _ in stages]
    has_labels = labels is not None
    if has_labels:
        classes, label_ids = np.unique(np.asarray(labels).astype(str), return_inverse=True)
        label_ids = label_ids.reshape(-1)
    else:
        classes, label_ids = np.array([]), None
    colours = palette(max(len(classes), 1) + k)
    rows = (["label"] if has_labels else []) + ["cluster"]
    legend_width = 2.2 if len(classes) <= MAX_LEGEND else 0.0
    fig = new_figure(4.2 * len(stages) + legend_width, 3.9 * len(rows))
    axes = np.array(fig.subplots(len(rows), len(stages), squeeze=False))
    for col, ((when, _, clusters, source), xy) in enumerate(zip(stages, coords)):
        for row, kind in enumerate(rows):
            ax = axes[row, col]
            if kind == "label":
                _scatter(ax, xy, label_ids, colours, f"{when}: true label")
            elif clusters is None:
                ax.set_axis_off()
                ax.set_title(f"{when}: no cluster assignments saved", fontsize=10)
            else:
                index = cluster_colour_index(labels, clusters, k) if has_labels else {c: c for c in range(k)}
                ids = np.array([index[int(c)] for c in clusters])
                what = f"{when}: {source} clusters" + (" (colour of matched class)" if has_labels else "")
                _scatter(ax, xy, ids, colours, what)
    if has_labels and len(classes) <= MAX_LEGEND:
        handles = [Line2D([], [], marker="o", linestyle="", color=colours[i], markersize=6,
                          label=_short(name)) for i, name in enumerate(classes)]
        fig.legend(handles=handles, loc="outside right upper", fontsize=8, title="true label", title_fontsize=9,
                   frameon=False)
    name = {"tsne": "t-SNE", "umap": "UMAP", "pca": "PCA"}[projection]
    heading = f"{title}: {name} of {len(after)} texts" if title else f"{name} of {len(after)} texts"
    if has_labels and len(classes) > MAX_LEGEND:
        heading += f" ({len(classes)} classes: continuous colour scale, no legend)"
    fig.suptitle(heading, fontsize=11)
    return save_figure(fig, path)


def plot_confusion(path: Path, labels, clusters, num_clusters: int | None = None, title: str = "") -> Path:
    """Heatmap of the Hungarian-matched confusion matrix (``evaluation.clustering.confusion``), shaded by the
    share of each class; counts written in the cells up to 20x20."""
    confusion = matched_confusion(labels, clusters, num_clusters)
    matrix = confusion.matrix
    n_classes, n_clusters = matrix.shape
    share = matrix / np.maximum(matrix.sum(axis=1, keepdims=True), 1)
    annotate = n_classes <= 20 and n_clusters <= 20
    cell = 0.45 if annotate else max(0.06, min(0.3, 9.0 / max(n_classes, n_clusters)))
    fig = new_figure(min(16, 2.5 + cell * n_clusters + 1.2), min(16, 1.8 + cell * n_classes))
    ax = fig.subplots()
    image = ax.imshow(share, cmap="Blues", vmin=0, vmax=1, aspect="auto", interpolation="nearest")
    fig.colorbar(image, ax=ax, label="share of the class", shrink=0.8)
    step_x = max(1, n_clusters // 40)
    step_y = max(1, n_classes // 40)
    ax.set_xticks(range(0, n_clusters, step_x), [str(c) for c in confusion.clusters[::step_x]],
                  fontsize=8 if annotate else 6, rotation=90 if n_clusters > 20 else 0)
    ax.set_yticks(range(0, n_classes, step_y), [_short(c) for c in confusion.classes[::step_y]],
                  fontsize=8 if annotate else 6)
    ax.set_xlabel("predicted cluster (Hungarian-matched order)")
    ax.set_ylabel("true label")
    if annotate:
        for i in range(n_classes):
            for j in range(n_clusters):
                if matrix[i, j]:
                    ax.text(j, i, str(matrix[i, j]), ha="center", va="center", fontsize=7,
                            color="white" if share[i, j] > 0.55 else "black")
    ax.set_title(f"{title}\nmatched accuracy {100 * confusion.accuracy:.1f}%" if title else
                 f"matched accuracy {100 * confusion.accuracy:.1f}%", fontsize=10)
    return save_figure(fig, path)


def curve_panels(columns: Sequence[str]) -> list[tuple[str, list[str]]]:
    """(panel title, metric keys) for the metrics a run logged, in display order; empty panels dropped."""
    columns = list(columns)

    def keys(predicate) -> list[str]:
        return [c for c in columns if predicate(c)]

    terms = keys(lambda c: c.startswith("train/") and c != "train/loss" and c.endswith(("_loss", "_term")))
    panels = [
        ("training loss", keys(lambda c: c == "train/loss")),
        *[(f"loss term: {c.split('/', 1)[1]}", [c]) for c in terms],  # one panel each: their scales differ
        ("clustering of the evaluation set", [c for c in ("val/kmeans_acc", "val/head_acc", "val/kmeans_nmi",
                                                          "val/head_nmi") if c in columns]),
        ("STS-B dev Spearman", keys(lambda c: c == "val/stsb_spearman")),
        ("in-batch cosine similarities (ClusterNS Figs. 3-4)", keys(lambda c: c.startswith("train/sim_"))),
        ("AECL attention NS (off-class attention mass)", keys(lambda c: c == "val/ns")),
        ("shares", keys(lambda c: c.startswith("train/") and (c.endswith("_share") or c.endswith("_rate")
                                                           or c == "train/confidence_mean"))),
    ]
    return [(name, cols) for name, cols in panels if cols]


def stage_boundaries(frame) -> list[tuple[int, str]]:
    """(step, label) where AECL's ``train/stage`` changes or ClusterNS's clustering starts."""
    marks = []
    for column, describe in (("train/stage", lambda v: f"stage {int(v)}"),
                             ("train/clustering_active", lambda v: "clustering on" if v else "clustering off")):
        if column not in frame.columns:
            continue
        series = frame[["step", column]].dropna().sort_values("step")
        previous = None
        for step, value in zip(series["step"], series[column]):
            if previous is not None and value != previous:
                marks.append((int(step), describe(value)))
            previous = value
    return marks


def partial_batch_steps(frame) -> list[int]:
    """Steps whose batch was smaller than the run's full batch (``train/batch_size``), usually the
    last batch of an epoch. An in-batch contrastive loss over fewer negatives is lower, so those
    points would draw a dip at every epoch end that says nothing about training: they are left out."""
    if "train/batch_size" not in frame.columns:
        return []
    sizes = frame[["step", "train/batch_size"]].dropna()
    if sizes.empty:
        return []
    return sorted(int(s) for s in sizes.loc[sizes["train/batch_size"] < sizes["train/batch_size"].max(), "step"])


def plot_training_curves(path: Path, metrics_csv: Path, title: str = "") -> Path | None:
    """One panel per group of ``curve_panels``; None when the file holds no curve."""
    import pandas as pd

    frame = pd.read_csv(metrics_csv)
    if "step" not in frame.columns:
        return None
    panels = curve_panels(frame.columns)
    if not panels:
        return None
    marks = stage_boundaries(frame)
    partial = partial_batch_steps(frame)
    ncols = 1 if len(panels) == 1 else 2
    nrows = -(-len(panels) // ncols)
    fig = new_figure(6.2 * ncols, 3.1 * nrows)
    axes = np.array(fig.subplots(nrows, ncols, squeeze=False)).reshape(-1)
    for ax, (name, keys) in zip(axes, panels):
        for key in keys:
            series = frame[["step", key]].dropna().sort_values("step")
            series = series.groupby("step", as_index=False).last()  # one value per step
            if key.startswith("train/"):  # evaluations do not depend on the training batch
                series = series[~series["step"].isin(partial)]
            marker = "o" if len(series) <= 30 else None
            ax.plot(series["step"], series[key], marker=marker, markersize=3, linewidth=1.2,
                    label=key.split("/", 1)[1])
        for step, label in marks:
            ax.axvline(step, color="grey", linestyle="--", linewidth=0.8)
            ax.annotate(label, (step, 1.0), xycoords=("data", "axes fraction"), fontsize=7, color="dimgrey",
                        rotation=90, ha="right", va="top")
        dropped = partial and any(key.startswith("train/") for key in keys)
        ax.set_title(name + (f" ({len(partial)} smaller last batches left out)" if dropped else ""), fontsize=10)
        ax.set_xlabel("step", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
        if len(keys) > 1:
            ax.legend(fontsize=7, loc="best", framealpha=0.7)
    for ax in axes[len(panels):]:
        ax.set_axis_off()
    if title:
        fig.suptitle(title, fontsize=11)
    return save_figure(fig, path)


# -- a run folder -------------------------------------------------------------------------------------------
def make_plots(run_dir: str | Path, projection: str = "tsne", max_points: int = 3000, seed: int = 0,
               partition: str | None = None, embeddings=None,
               predictions: run_files.RunPredictions | None = None) -> list[Path]:
    """Every picture the run's files allow; returns the PNG paths written under ``<run>/plots``."""
    if projection not in PROJECTIONS:
        raise run_files.RunFolderError(f"--projection must be one of {PROJECTIONS}, got '{projection}'")
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise run_files.RunFolderError(f"Run folder '{run_dir}' does not exist.")
    out = run_dir / run_files.PLOTS_DIR
    title = run_files.run_title(run_dir)
    written = []
    if (run_dir / run_files.PREDICTIONS).is_file():
        written += _cluster_plots(run_dir, out, title, projection, max_points, seed, partition, embeddings,
                                  predictions)
    metrics = run_dir / run_files.METRICS_CSV
    if metrics.is_file():
        curves = plot_training_curves(out / "training_curves.png", metrics, title)
        written += [curves] if curves else []
    if not written:
        raise run_files.RunFolderError(
            f"Nothing to plot in '{run_dir}': it has neither {run_files.PREDICTIONS} (clustering runs) nor "
            f"{run_files.METRICS_CSV} (the CSV logger)."
        )
    return written


def _cluster_plots(run_dir, out, title, projection, max_points, seed, partition, embeddings,
                   predictions=None) -> list[Path]:
    predictions = predictions if predictions is not None else run_files.load_predictions(run_dir)
    name = partition or predictions.primary
    if name not in predictions.partitions:
        raise run_files.RunFolderError(
            f"'{run_dir}' has no '{name}' clusters; it has {sorted(predictions.partitions)}."
        )
    clusters = predictions.partitions[name]
    k = run_files.num_clusters(run_dir, predictions)
    after = embeddings if embeddings is not None else run_files.run_embeddings(run_dir, predictions.texts)
    before = run_files.load_array(run_dir, run_files.EMBEDDINGS_BEFORE)
    before_clusters = run_files.load_array(run_dir, run_files.BEFORE_KMEANS)
    before_rows = run_files.load_array(run_dir, run_files.EMBEDDINGS_BEFORE_ROWS)
    if before_rows is None:  # "before" embedded every text
        before_rows = np.arange(len(clusters))
    if before is None or len(before) != len(before_rows) or (len(before_rows) and before_rows[-1] >= len(clusters)):
        before = before_clusters = None  # from another corpus or another run: left out
    # the map's texts: a sample of those the "before" evaluation embedded, so both panels show the same texts
    positions = subsample(len(before_rows), max_points, seed)
    rows = map_rows(len(clusters), max_points, seed, before_rows)
    labels = predictions.labels[rows] if predictions.labels is not None else None
    source = "cluster head" if name == "head" else "KMeans"
    written = [plot_embedding_maps(
        out / f"embeddings_{projection}.png", run_files.rows_float32(after, rows), clusters[rows],
        run_files.rows_float32(before, positions) if before is not None else None,
        np.asarray(before_clusters[positions], dtype=np.int64)
        if before_clusters is not None and len(before_clusters) == len(before_rows) else None,
        labels, k, projection, seed, source, title,
    )]
    if predictions.labels is not None:
        written.append(plot_confusion(out / "confusion.png", predictions.labels, clusters, k,
                                      f"{title}: {source} clusters"))
    return written


def plot_run(*, run: Path, projection: str, max_points: int, seed: int, partition: str | None,
             trust_checkpoint: bool) -> list[Path]:
    """``python tools.py plots`` (its options, ctclust.commands.plots): :func:`make_plots`, the run's encoder embedding
    the texts when ``trust_checkpoint`` lets it load a run without saved embeddings."""
    embeddings = None
    if trust_checkpoint and (run / run_files.PREDICTIONS).is_file():
        embeddings = run_files.run_embeddings(run, run_files.load_predictions(run).texts, True)
    paths = make_plots(run, projection, max_points, seed, partition, embeddings)
    for path in paths:
        print(f"wrote {path}")
    return paths

