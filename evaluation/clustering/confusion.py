"""Confusion matrix of true classes against predicted clusters, columns in Hungarian-matched order."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment


@dataclass
class MatchedConfusion:
    """``matrix[i, j]``: texts of class ``classes[i]`` in cluster ``clusters[j]``.

    Columns are ordered so that the cluster matched to class i (the one-to-one mapping that
    maximises the matched count, as in the accuracy of docs/evaluation.md) is column i; clusters matched to
    no class (more clusters than classes) follow, by id. With fewer clusters than classes, the
    classes without a cluster have no diagonal cell (``matched[i]`` is False). The trace over the
    matched cells divided by N is the Hungarian accuracy.
    """

    matrix: np.ndarray  # [C, K] int
    classes: list  # C class values, sorted (classes left without a cluster last)
    clusters: list[int]  # K cluster ids in column order
    matched: np.ndarray  # [C] bool: class i has a matched cluster in column i

    @property
    def accuracy(self) -> float:
        rows = np.flatnonzero(self.matched)
        return float(self.matrix[rows, rows].sum() / max(self.matrix.sum(), 1))


def matched_confusion(labels, predictions, num_clusters: int | None = None) -> MatchedConfusion:
    """Counts of (true class, predicted cluster) pairs with the clusters reordered by the Hungarian match.

    ``labels``: any hashable class values; ``predictions``: integer cluster ids 0..K-1 (clusters
    listed by ``num_clusters`` but never predicted get an empty column).
    """
    labels = np.asarray(labels)
    predictions = np.asarray(predictions, dtype=np.int64)
    if labels.shape != predictions.shape:
        raise ValueError(f"labels and predictions differ in length: {labels.shape} vs {predictions.shape}")
    classes, y = np.unique(labels, return_inverse=True)
    k = int(max(num_clusters or 0, predictions.max() + 1 if len(predictions) else 0))
    counts = np.zeros((len(classes), k), dtype=np.int64)
    np.add.at(counts, (y.reshape(-1), predictions), 1)
    class_rows, cluster_cols = linear_sum_assignment(counts, maximize=True)
    order = np.full(len(classes), -1)
    order[class_rows] = cluster_cols
    matched = order >= 0
    if matched.all():
        columns = list(order)
    else:  # fewer clusters than classes: matched clusters at their class's position, from the left
        columns = [int(c) for c in order if c >= 0]
    columns += [c for c in range(k) if c not in set(columns)]
    if not matched.all():  # rows of unmatched classes go last so that the diagonal stays the matched cells
        row_order = np.concatenate([np.flatnonzero(matched), np.flatnonzero(~matched)])
        counts, classes, matched = counts[row_order], classes[row_order], matched[row_order]
    return MatchedConfusion(counts[:, columns], classes.tolist(), [int(c) for c in columns], matched)
