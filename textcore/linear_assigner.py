"""A linear classifier taught a partition of embeddings, as plain arrays (``umap.refine=linear``,
``textcore.cluster_space``; docs/clusters.md, "Clustering space").

:func:`fit` teaches scikit-learn's multinomial logistic regression (lbfgs) the clusters of a set of embeddings and
returns its ``weights`` [K, d] and ``bias`` [K] for every one of the K clusters: a cluster absent from the training
labels gets zero weights and a bias of -inf, so its probability is 0 and it never wins. :func:`assign` is then a
matrix product and a softmax, block by block, so that assigning a million texts holds one block of logits at a time.
"""
from __future__ import annotations

import numpy as np

C = 1.0  # scikit-learn's default regularisation; the setting the refinement was measured with
MAX_ITER = 300  # lbfgs iterations (the measured setting)
BLOCK_ROWS = 8192  # rows per block of logits: [block, d] and [block, K] float64 at a time


def fit(features, labels, num_clusters: int, seed: int, c: float = C, max_iter: int = MAX_ITER
        ) -> tuple[np.ndarray, np.ndarray]:
    """(weights [K, d] float32, bias [K] float32) of a multinomial logistic regression of ``labels`` [n] (cluster
    ids in 0..K-1) on ``features`` [n, d]. lbfgs is deterministic; ``seed`` is passed as its ``random_state``."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    x = np.asarray(features, dtype=np.float32)
    y = np.asarray(labels, dtype=np.int64)
    weights = np.zeros((num_clusters, x.shape[1]), dtype=np.float32)
    bias = np.full(num_clusters, -np.inf, dtype=np.float32)
    present = np.unique(y)
    if len(present) == 1:  # one cluster holds every row: it wins everywhere (scikit-learn refuses one class)
        bias[present[0]] = 0.0
        return weights, bias
    with warnings.catch_warnings():  # stopping at max_iter is the measured setting, not a failure
        warnings.filterwarnings("ignore", category=ConvergenceWarning)
        model = LogisticRegression(C=c, max_iter=max_iter, random_state=seed).fit(x, y)
    coef, intercept = model.coef_, model.intercept_
    if coef.shape[0] == 1:  # two classes: one logistic, P(second) = sigmoid(w.x + b); as a softmax of two rows
        coef, intercept = np.vstack([-coef / 2, coef / 2]), np.array([-intercept[0] / 2, intercept[0] / 2])
    weights[model.classes_] = coef
    bias[model.classes_] = intercept
    return weights, bias


def assign(embeddings, weights: np.ndarray, bias: np.ndarray, block_rows: int = BLOCK_ROWS, prepare=None
           ) -> tuple[np.ndarray, np.ndarray]:
    """(labels [n] int64, probabilities [n, 2] float32: of the chosen cluster and of the runner-up) of each row of
    ``embeddings`` [n, d] under the classifier ``weights`` [K, d], ``bias`` [K]; ``prepare`` (a function of a
    float32 block), when given, is applied to each block first (unit length for the cosine metric). The label is the
    argmax of the logits (the first on ties); computed in float64, in blocks of ``block_rows`` rows."""
    data = embeddings if hasattr(embeddings, "shape") else np.asarray(embeddings)  # a memory map stays one
    w = np.asarray(weights, dtype=np.float64).T  # [d, K]
    b = np.asarray(bias, dtype=np.float64)
    labels = np.empty(len(data), dtype=np.int64)
    top = np.zeros((len(data), 2), dtype=np.float32)
    for start in range(0, len(data), block_rows):
        block = np.asarray(data[start:start + block_rows], dtype=np.float32)
        if prepare is not None:
            block = prepare(block)
        logits = block.astype(np.float64) @ w + b  # [block, K]
        chosen = logits.argmax(axis=1)
        p = np.exp(logits - logits[np.arange(len(chosen)), chosen][:, None])
        p /= p.sum(axis=1, keepdims=True)
        end = start + len(block)
        labels[start:end] = chosen
        top[start:end, 0] = p[np.arange(len(chosen)), chosen]
        if p.shape[1] > 1:
            top[start:end, 1] = np.partition(p, -2, axis=1)[:, -2]
    return labels, top
