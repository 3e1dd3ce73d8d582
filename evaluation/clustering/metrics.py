"""A clustering scored with labels (the catalogue's metrics, docs/evaluation.md) and the KMeans protocols."""
from __future__ import annotations

import numpy as np

from evaluation.clustering import catalogue
from textcore.kmeans import kmeans_fit


def clustering_scores(labels, predictions) -> dict[str, float]:
    """Every metric of the catalogue that compares a clustering with labels (ACC, NMI, ARI, AMI)."""
    return catalogue.label_scores(labels, predictions)


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
