"""The clustering metrics, each once: its name, title, better direction and whether it needs labels.

Every reader of clustering scores asks this catalogue which ones there are: the evaluation during training
(``callbacks.evaluation.clustering_eval``: what it computes and which direction a ``monitor`` wants), the
aggregate and paper tables, the W&B dashboard, the model card, a run's summary table and the sweep objective's
shorthands. A new metric with labels is one :class:`Metric` in :data:`METRICS` whose ``score(labels, predictions)``
gives a number; a label-free criterion is computed by ``evaluation.clustering.label_free`` (they share
per-cluster statistics) under its catalogue name.

Consumers read :data:`METRICS` through the functions below at call time, so that a metric added to it (a test
does) is seen everywhere.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.metrics import adjusted_mutual_info_score, adjusted_rand_score, normalized_mutual_info_score


def _as_int_labels(values) -> np.ndarray:
    """Map arbitrary label values (strings, 1-based ints) to 0..C-1."""
    _, inverse = np.unique(np.asarray(values), return_inverse=True)
    return inverse.astype(np.int64)


def cluster_accuracy(labels, predictions) -> float:
    """Share of samples correctly labelled under the best one-to-one cluster→class mapping."""
    y = _as_int_labels(labels)
    p = _as_int_labels(predictions)
    if y.shape != p.shape:
        raise ValueError(f"labels and predictions differ in length: {y.shape} vs {p.shape}")
    size = max(y.max(), p.max()) + 1
    counts = np.zeros((size, size), dtype=np.int64)
    np.add.at(counts, (p, y), 1)
    rows, cols = linear_sum_assignment(counts, maximize=True)
    return float(counts[rows, cols].sum() / len(y))


@dataclass(frozen=True)
class Metric:
    name: str  # results.json's key after the prediction's prefix: kmeans_<name>, head_<name>
    title: str  # a table's column
    direction: str | None  # "max", "min"; None: reported, never used to select a step or a sweep's trial
    needs_labels: bool
    # with labels: score(labels, predictions) -> float; None for the label-free criteria (label_free computes them)
    score: Callable | None = None
    papers: bool = False  # one of the numbers the papers' short-text tables report (ACC and NMI)
    in_summary: bool = True  # a column of a run's before/after table (summary_rows) when the run has no labels
    percent: bool = True  # shown x100 in a run's table; else as the number itself (3 decimals)


METRICS: tuple[Metric, ...] = (
    Metric("acc", "ACC", "max", True, cluster_accuracy, papers=True),
    # NMI with scikit-learn's default arithmetic normalisation
    Metric("nmi", "NMI", "max", True, lambda y, p: float(normalized_mutual_info_score(y, p)), papers=True),
    Metric("ari", "ARI", "max", True, lambda y, p: float(adjusted_rand_score(y, p))),
    Metric("ami", "AMI", "max", True, lambda y, p: float(adjusted_mutual_info_score(y, p))),
    # label-free (evaluation.clustering.label_free's docstring says what each measures)
    Metric("silhouette", "silhouette", "max", False, percent=False),
    Metric("calinski_harabasz", "Calinski-Harabasz", "max", False, in_summary=False, percent=False),
    Metric("davies_bouldin", "Davies-Bouldin", "min", False, percent=False),
    Metric("dunn", "Dunn", "max", False, in_summary=False, percent=False),
    Metric("size_entropy", "size entropy", None, False, percent=False),
    Metric("changed", "changed %", "min", False),
)


def by_name() -> dict[str, Metric]:
    return {m.name: m for m in METRICS}


def with_labels() -> tuple[Metric, ...]:
    """The metrics that compare a clustering with the labels, in table order."""
    return tuple(m for m in METRICS if m.needs_labels)


def label_free() -> tuple[Metric, ...]:
    return tuple(m for m in METRICS if not m.needs_labels)


def label_names() -> tuple[str, ...]:
    return tuple(m.name for m in with_labels())


def paper_names() -> tuple[str, ...]:
    """The metrics of the papers' tables (ACC, NMI): the benchmarks' headline and averages."""
    return tuple(m.name for m in METRICS if m.papers)


def selectable(label_free_only: bool = False) -> tuple[str, ...]:
    """Names with a better direction (they can pick a step or be an objective)."""
    return tuple(m.name for m in METRICS if m.direction and not (label_free_only and m.needs_labels))


def direction(name: str) -> str | None:
    """``max``, ``min`` or None for a metric name (``acc``, ``davies_bouldin``); KeyError for an unknown one."""
    return by_name()[name].direction


def label_scores(labels, predictions) -> dict[str, float]:
    """Every metric with labels for one clustering: {name: score}."""
    return {m.name: m.score(labels, predictions) for m in with_labels()}


def split_prefixed(key: str) -> tuple[str, str]:
    """``kmeans_acc`` -> (``kmeans``, ``acc``); a name without a prediction's prefix -> ("", name)."""
    if key.startswith(("kmeans_", "head_")):
        prefix, name = key.split("_", 1)
        return prefix, name
    return "", key
