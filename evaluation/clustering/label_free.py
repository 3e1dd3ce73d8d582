"""Clustering quality without labels: internal criteria, assignment stability and cluster balance.

Every clustering evaluation of a run logs these (``val/kmeans_silhouette`` ...), ``evaluation.clustering.choose_k``
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

Silhouette, Calinski-Harabasz, Davies-Bouldin and Dunn compare clusters with each other, so they are
undefined for fewer than 2 clusters or as many clusters as texts (2 <= K <= N - 1), for embeddings with
NaN, and (all but the silhouette) when no cluster has any spread; such a score is None (null in
results.json) and :func:`label_free_report` gives the reason, so a run on two texts still trains.

Calinski-Harabasz and Dunn follow ``torchmetrics.functional.clustering``'s definitions and Davies-Bouldin
:func:`davies_bouldin`'s; all three are computed here from per-cluster sums over blocks of rows
(:func:`spread_statistics`, tested equal to those), so that a million embeddings cost two linear passes and no
float64 copy. :func:`davies_bouldin` does not use ``torch.cdist``, whose matrix-product path (used beyond 25 rows)
leaves the diagonal slightly above zero, so that from 26 clusters on each cluster's ratio to itself dominates (on
SearchSnippets at K = 30: 3192 against scikit-learn's 4.16; docs/history/results_2026-11.md, "Without labels"). Only the
silhouette is quadratic: it is computed on a seeded sample.

Their names, titles and directions are entries of ``evaluation.clustering.catalogue``.
"""
from __future__ import annotations

import math

import numpy as np

from evaluation.clustering.catalogue import cluster_accuracy


def silhouette_cosine(embeddings: np.ndarray, assignments: np.ndarray, sample: int = 2000, seed: int = 0,
                      metric: str = "cosine") -> float:
    """Mean cosine silhouette (or another scikit-learn ``metric``) on a seeded sample of ``sample`` rows (all rows when
    fewer); NaN unless the sample holds 2 <= K <= n - 1 clusters (the range where it is defined)."""
    from sklearn.metrics import silhouette_score

    assignments = np.asarray(assignments)
    rows = _silhouette_rows(len(assignments), sample, seed)
    if partition_problem(len(rows), len(np.unique(assignments[rows]))) is not None:
        return float("nan")
    return float(silhouette_score(np.asarray(embeddings[rows]), assignments[rows], metric=metric))


def _silhouette_rows(n: int, sample: int, seed: int) -> np.ndarray:
    return np.arange(n) if n <= sample else np.random.default_rng(seed).choice(n, sample, replace=False)


def partition_problem(n_texts: int, n_clusters: int) -> str | None:
    """Why silhouette, Calinski-Harabasz, Davies-Bouldin and Dunn are undefined for ``n_clusters`` non-empty
    clusters of ``n_texts`` texts (they compare clusters with each other and need a text that shares its
    cluster), or None when 2 <= K <= N - 1."""
    if n_clusters < 2:
        return f"{n_clusters} cluster among {n_texts} texts: they compare clusters, so they need K >= 2"
    if n_clusters >= n_texts:
        return (f"{n_clusters} clusters among {n_texts} texts: each text is alone in its cluster, so they need "
                "K <= N - 1")
    return None


def size_entropy(assignments: np.ndarray, num_clusters: int) -> float:
    """Entropy of the cluster-size distribution divided by log K (K = ``num_clusters``, or the number of distinct
    ids when the assignments hold more)."""
    counts = np.unique(np.asarray(assignments), return_counts=True)[1].astype(np.float64)
    k = max(int(num_clusters), len(counts))
    if k < 2 or counts.sum() == 0:
        return 0.0
    p = counts / counts.sum()
    return float(-(p * np.log(p)).sum() / math.log(k))


def changed_share(previous: np.ndarray, current: np.ndarray) -> float:
    """Share of texts in a different cluster, after the best one-to-one matching of cluster ids."""
    return 1.0 - cluster_accuracy(previous, current)


def davies_bouldin(embeddings: np.ndarray, assignments: np.ndarray) -> float:
    """Mean over clusters of max_j (s_i + s_j) / ||c_i - c_j|| (Euclidean, float64), s_i the mean distance of
    cluster i's points to its centroid c_i. Centroid distances are differences, not a Gram-matrix trick.
    NaN when two clusters share a centroid: their ratio has no finite value (scikit-learn skips such a pair,
    which turns clusters stacked on each other into a perfect score of 0)."""
    x = np.asarray(embeddings, dtype=np.float64)  # [N, d]
    ids, labels = np.unique(np.asarray(assignments), return_inverse=True)
    centroids = np.stack([x[labels == k].mean(axis=0) for k in range(len(ids))])  # [K, d]
    spread = np.array([np.linalg.norm(x[labels == k] - centroids[k], axis=1).mean() for k in range(len(ids))])
    distance = np.linalg.norm(centroids[:, None, :] - centroids[None, :, :], axis=2)  # [K, K]
    np.fill_diagonal(distance, np.inf)  # a cluster is not compared with itself
    if (distance == 0).any():
        return float("nan")
    ratio = (spread[:, None] + spread[None, :]) / distance  # [K, K]
    return float(np.max(ratio, axis=1).mean())


BLOCK_ROWS = 65536  # rows converted to float64 at a time: the scores of a million texts need no float64 copy


def spread_statistics(embeddings: np.ndarray, assignments: np.ndarray) -> dict[str, np.ndarray | float]:
    """What Calinski-Harabasz, Davies-Bouldin and Dunn are made of, in two passes over blocks of rows (float64
    sums; ``embeddings`` may be a memory-mapped file): cluster ``counts`` [K] and ``centroids`` [K, d] (ids in
    sorted order), ``mean`` [d], ``within`` (sum of squared distances to the own centroid), per cluster the
    ``spread`` (mean distance to the centroid) and ``farthest`` (largest distance) [K], and ``identical`` (no text
    differs from its centroid)."""
    ids, inverse = np.unique(np.asarray(assignments), return_inverse=True)
    k, n, d = len(ids), len(inverse), embeddings.shape[1]
    sums, counts = np.zeros((k, d)), np.bincount(inverse, minlength=k)
    for start in range(0, n, BLOCK_ROWS):
        np.add.at(sums, inverse[start:start + BLOCK_ROWS],
                  np.asarray(embeddings[start:start + BLOCK_ROWS], dtype=np.float64))
    centroids = sums / counts[:, None]
    within, distance_sums, farthest = 0.0, np.zeros(k), np.zeros(k)
    for start in range(0, n, BLOCK_ROWS):
        labels = inverse[start:start + BLOCK_ROWS]
        x = np.asarray(embeddings[start:start + BLOCK_ROWS], dtype=np.float64)
        distances = np.linalg.norm(x - centroids[labels], axis=1)  # [b]
        within += float((distances**2).sum())
        distance_sums += np.bincount(labels, weights=distances, minlength=k)
        np.maximum.at(farthest, labels, distances)
    return {"counts": counts, "centroids": centroids, "mean": sums.sum(axis=0) / n, "within": within,
            "spread": distance_sums / counts, "farthest": farthest, "identical": not farthest.any()}


def _spread_scores(x: np.ndarray, assignments: np.ndarray) -> tuple[dict[str, float | None], dict[str, str]]:
    """Calinski-Harabasz and Dunn (torchmetrics' definitions) and Davies-Bouldin (:func:`davies_bouldin`'s) for a
    partition with 2 <= K <= N - 1, from :func:`spread_statistics` (linear time, blocks of rows: tested equal to
    torchmetrics and :func:`davies_bouldin`); a score without a finite value is None, with its reason."""
    stats = spread_statistics(x, assignments)
    centroids, counts, k, n = stats["centroids"], stats["counts"], len(stats["counts"]), len(assignments)
    gaps = np.linalg.norm(centroids[:, None, :] - centroids[None, :, :], axis=2)  # [K, K]
    np.fill_diagonal(gaps, np.inf)  # a cluster is not compared with itself
    if (gaps == 0).any():
        db = float("nan")
    else:
        db = float(np.max((stats["spread"][:, None] + stats["spread"][None, :]) / gaps, axis=1).mean())
    if stats["identical"]:
        # torchmetrics answers 1.0 (Calinski-Harabasz) and NaN or inf (Dunn): numbers that mean nothing here
        why = "every cluster's texts have identical embeddings (no spread within clusters)"
        return {"calinski_harabasz": None, "davies_bouldin": db, "dunn": None}, {"calinski_harabasz": why, "dunn": why}
    between = float((counts * ((centroids - stats["mean"]) ** 2).sum(axis=1)).sum())
    with np.errstate(divide="ignore", invalid="ignore"):
        dunn = float(np.min(gaps) / np.max(stats["farthest"]))
    return {
        "calinski_harabasz": between * (n - k) / (stats["within"] * (k - 1.0)),
        "davies_bouldin": db,
        "dunn": dunn,
    }, {}


def _all_finite(embeddings: np.ndarray) -> bool:
    return all(np.isfinite(embeddings[s:s + BLOCK_ROWS]).all() for s in range(0, len(embeddings), BLOCK_ROWS))


GEOMETRIC = ("silhouette", "calinski_harabasz", "davies_bouldin", "dunn")


def label_free_report(
    embeddings: np.ndarray,
    assignments: np.ndarray,
    num_clusters: int,
    previous: np.ndarray | None = None,
    sample: int = 2000,
    seed: int = 0,
    previous_rows: np.ndarray | None = None,
    metric: str = "cosine",
) -> tuple[dict[str, float | None], dict[str, str]]:
    """(scores, reasons): all criteria of the module docstring for one clustering (``changed`` only with
    ``previous``, the assignments of the rows ``previous_rows`` of these, every row when None: the last
    evaluation of a large corpus compares the sample the earlier ones evaluated). A criterion that is undefined for
    this partition is None in ``scores`` and ``reasons[name]`` says why (e.g. K = N, identical embeddings, NaN in
    the embeddings). ``metric``: the silhouette's distance (cosine for embeddings, euclidean for UMAP coordinates)."""
    assignments = np.asarray(assignments)
    x = embeddings if getattr(embeddings, "ndim", 0) == 2 else np.asarray(embeddings).reshape(len(assignments), -1)
    scores: dict[str, float | None] = dict.fromkeys(GEOMETRIC)
    reasons: dict[str, str] = {}
    problem = partition_problem(len(assignments), len(np.unique(assignments)))
    if problem is None and not _all_finite(x):
        problem = "the embeddings hold NaN or inf values"
    if problem is not None:
        reasons.update(dict.fromkeys(GEOMETRIC, problem))
    else:
        rows = _silhouette_rows(len(assignments), sample, seed)
        sampled = partition_problem(len(rows), len(np.unique(assignments[rows])))
        if sampled is None:  # quadratic in N: on the sample only, in float64 as the scores below
            scores["silhouette"] = silhouette_cosine(np.asarray(x[rows], dtype=np.float64), assignments[rows],
                                                     len(rows), seed, metric=metric)
        else:
            reasons["silhouette"] = f"{sampled} (in the sample of {len(rows)} texts it is computed on)"
        spread, why = _spread_scores(x, assignments)
        scores.update(spread)
        reasons.update(why)
        for name in GEOMETRIC:
            value = scores[name]
            if value is not None and not math.isfinite(value):
                scores[name] = None
                reasons.setdefault(name, "two clusters share a centroid" if name == "davies_bouldin"
                                   else f"no finite value ({value})")
    scores["size_entropy"] = size_entropy(assignments, num_clusters)
    compared = assignments if previous_rows is None else assignments[previous_rows]
    if previous is not None and len(previous) == len(compared):
        scores["changed"] = changed_share(previous, compared)
    return scores, reasons


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
