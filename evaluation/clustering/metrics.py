"""Clustering metrics (docs/evaluation.md): Hungarian accuracy, NMI, ARI, AMI, and KMeans protocols."""
from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.metrics import adjusted_mutual_info_score, adjusted_rand_score, normalized_mutual_info_score

from textcore.kmeans import kmeans_fit


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


def clustering_scores(labels, predictions) -> dict[str, float]:
    """ACC, NMI (sklearn's default arithmetic normalisation), ARI and AMI."""
    return {
        "acc": cluster_accuracy(labels, predictions),
        "nmi": float(normalized_mutual_info_score(labels, predictions)),
        "ari": float(adjusted_rand_score(labels, predictions)),
        "ami": float(adjusted_mutual_info_score(labels, predictions)),
    }


def kmeans_scores(
    embeddings, labels, num_clusters: int, seeds=(0,), *, backend: str, n_init: int = 10,
    dtype: str = "float32",
) -> dict[str, float]:
    """KMeans over several seeds; mean and standard deviation of each score.

    With seeds 0..9 this is the PairSupCon protocol (Table 1: mean (std) of 10 runs).
    ``backend``, ``n_init`` and ``dtype`` go to ``kmeans_fit``.
    """
    data = np.asarray(embeddings)
    return mean_and_std([clustering_scores(labels, kmeans_fit(data, num_clusters, seed, n_init, backend, dtype).labels_)
                         for seed in seeds])


def sparse_kmeans_scores(features, labels, num_clusters: int, seeds=(0,), n_init: int = 10) -> dict[str, float]:
    """``kmeans_scores`` for a sparse matrix (bag-of-words / TF-IDF baselines): scikit-learn's KMeans works on
    the sparse rows directly (k-means++, ``n_init`` restarts, ``random_state`` = each seed), so a vocabulary
    of tens of thousands of words costs what its non-zeros cost."""
    from sklearn.cluster import KMeans

    return mean_and_std([clustering_scores(labels, KMeans(num_clusters, n_init=n_init, random_state=seed)
                                           .fit(features).labels_) for seed in seeds])


def mean_and_std(runs: list[dict[str, float]]) -> dict[str, float]:
    """Each score of ``runs`` (one dict per seed) as its mean, and its standard deviation as ``<score>_std``."""
    out: dict[str, float] = {}
    for key in runs[0]:
        values = np.array([r[key] for r in runs])
        out[key] = float(values.mean())
        out[f"{key}_std"] = float(values.std())
    return out
