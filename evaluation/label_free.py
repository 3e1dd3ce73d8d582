"""Clustering quality without labels: internal criteria, assignment stability and cluster balance.

Every clustering evaluation of a run logs these (``val/kmeans_silhouette`` ...), ``evaluation.choose_k``
compares them across K, and they can select a step, stop a run or be a sweep's objective
(docs/clusters.md, "Without labels").

- ``silhouette``: mean silhouette with cosine distance (the geometry the methods train), on a seeded
  sample of at most ``sample`` texts (it is quadratic in N). Higher is better, in [-1, 1].
- ``calinski_harabasz``: between- over within-cluster dispersion (Euclidean). Higher is better.
- ``davies_bouldin``: mean over clusters of the worst (spread_i + spread_j) / distance(i, j). Lower is better.
- ``dunn``: smallest distance between centroids over the largest distance of a point to its centroid
  (torchmetrics' definition). Higher is better.
- ``size_entropy``: entropy of the cluster sizes over log K: 1 for equal sizes, 0 for one cluster.
  Neither direction is better in general; a collapse shows as a drop.
- ``changed``: share of texts whose cluster changed since the previous evaluation, after matching the
  two sets of cluster ids one-to-one (KMeans numbers its clusters arbitrarily at each fit). SCCL's
  authors stop "when the predictions stay roughly the same"; ``callbacks.evaluation.clustering_eval``
  turns that into a rule. Lower is more stable.

Calinski-Harabasz and Dunn come from ``torchmetrics.functional.clustering``. Davies-Bouldin is computed
here (:func:`davies_bouldin`): torchmetrics's takes the centroid distances from ``torch.cdist``, whose
matrix-product path (used beyond 25 rows) leaves the diagonal slightly above zero, so from 26 clusters on
each cluster's ratio to itself dominates (on SearchSnippets at K = 30: 3192 against scikit-learn's 4.16;
scripts/davies_bouldin_check.py).
"""
from __future__ import annotations

import math

import numpy as np
import torch

# name -> direction (None: no better direction; reported, never used to select)
DIRECTIONS = {
    "silhouette": "max",
    "calinski_harabasz": "max",
    "davies_bouldin": "min",
    "dunn": "max",
    "size_entropy": None,
    "changed": "min",
}
NAMES = tuple(DIRECTIONS)


def silhouette_cosine(embeddings: np.ndarray, assignments: np.ndarray, sample: int = 2000, seed: int = 0) -> float:
    """Mean cosine silhouette on a seeded sample of ``sample`` rows (all rows when fewer); NaN for < 2 clusters."""
    from sklearn.metrics import silhouette_score

    assignments = np.asarray(assignments)
    n = len(assignments)
    rows = np.arange(n) if n <= sample else np.random.default_rng(seed).choice(n, sample, replace=False)
    if len(np.unique(assignments[rows])) < 2 or len(np.unique(assignments[rows])) >= len(rows):
        return float("nan")
    return float(silhouette_score(np.asarray(embeddings)[rows], assignments[rows], metric="cosine"))


def size_entropy(assignments: np.ndarray, num_clusters: int) -> float:
    """Entropy of the cluster-size distribution divided by log K (K = ``num_clusters``)."""
    if num_clusters < 2:
        return 0.0
    counts = np.bincount(np.asarray(assignments, dtype=np.int64), minlength=num_clusters).astype(np.float64)
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum() / math.log(num_clusters))


def changed_share(previous: np.ndarray, current: np.ndarray) -> float:
    """Share of texts in a different cluster, after the best one-to-one matching of cluster ids."""
    from evaluation.metrics import cluster_accuracy

    return 1.0 - cluster_accuracy(previous, current)


def davies_bouldin(embeddings: np.ndarray, assignments: np.ndarray) -> float:
    """Mean over clusters of max_j (s_i + s_j) / ||c_i - c_j|| (Euclidean, float64), s_i the mean distance of
    cluster i's points to its centroid c_i. Centroid distances are differences, not a Gram-matrix trick."""
    x = np.asarray(embeddings, dtype=np.float64)  # [N, d]
    ids, labels = np.unique(np.asarray(assignments), return_inverse=True)
    centroids = np.stack([x[labels == k].mean(axis=0) for k in range(len(ids))])  # [K, d]
    spread = np.array([np.linalg.norm(x[labels == k] - centroids[k], axis=1).mean() for k in range(len(ids))])
    distance = np.linalg.norm(centroids[:, None, :] - centroids[None, :, :], axis=2)  # [K, K]
    distance[distance == 0] = np.inf  # the diagonal, and coinciding centroids (scikit-learn does the same)
    ratio = (spread[:, None] + spread[None, :]) / distance  # [K, K]
    return float(np.max(ratio, axis=1).mean())


def _spread_scores(embeddings: np.ndarray, assignments: np.ndarray) -> dict[str, float]:
    """Calinski-Harabasz and Dunn (torchmetrics) and Davies-Bouldin (:func:`davies_bouldin`); NaN for one cluster."""
    from torchmetrics.functional.clustering import calinski_harabasz_score, dunn_index

    if len(np.unique(assignments)) < 2:
        return {"calinski_harabasz": float("nan"), "davies_bouldin": float("nan"), "dunn": float("nan")}
    data = torch.as_tensor(np.asarray(embeddings), dtype=torch.float64)
    # torchmetrics expects ids 0..C-1 without gaps (an empty cluster would divide by zero)
    labels = torch.as_tensor(np.unique(np.asarray(assignments), return_inverse=True)[1], dtype=torch.long)
    return {
        "calinski_harabasz": float(calinski_harabasz_score(data, labels)),
        "davies_bouldin": davies_bouldin(embeddings, assignments),
        "dunn": float(dunn_index(data, labels)),
    }


def label_free_scores(
    embeddings: np.ndarray,
    assignments: np.ndarray,
    num_clusters: int,
    previous: np.ndarray | None = None,
    sample: int = 2000,
    seed: int = 0,
) -> dict[str, float]:
    """All criteria of the module docstring for one clustering (``changed`` only with ``previous``)."""
    assignments = np.asarray(assignments)
    scores = {"silhouette": silhouette_cosine(embeddings, assignments, sample, seed)}
    scores.update(_spread_scores(embeddings, assignments))
    scores["size_entropy"] = size_entropy(assignments, num_clusters)
    if previous is not None and len(previous) == len(assignments):
        scores["changed"] = changed_share(previous, assignments)
    return scores


def best_index(values, direction: str) -> int | None:
    """Index of the best finite value (first on ties); None when there is none."""
    finite = [(v, i) for i, v in enumerate(values) if v is not None and math.isfinite(v)]
    if not finite or direction not in ("max", "min"):
        return None
    sign = 1 if direction == "max" else -1
    return max(finite, key=lambda vi: (sign * vi[0], -vi[1]))[1]


def stable_step(history: list[dict], key: str, threshold: float, patience: int) -> int | None:
    """Index of the first evaluation that closes a run of ``patience`` consecutive evaluations with
    ``history[i][key] < threshold`` (the early-stopping rule); None if no such run exists yet."""
    streak = 0
    for i, entry in enumerate(history):
        value = entry.get(key)
        streak = streak + 1 if value is not None and math.isfinite(value) and value < threshold else 0
        if streak >= patience:
            return i
    return None
