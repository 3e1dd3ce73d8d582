"""The linear classifier of ``umap.refine=linear`` (textcore/linear_assigner.py): scikit-learn fits it, a matrix
product and a softmax in blocks assign with it."""
from __future__ import annotations

import numpy as np
import pytest

from textcore import linear_assigner


def separable(n: int = 600, k: int = 4, d: int = 16, seed: int = 0):
    """Rows whose cluster is the largest of k fixed linear scores: a partition a linear classifier can learn."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype(np.float32)
    directions = rng.normal(size=(k, d))
    scores = x @ directions.T
    keep = np.sort(scores, axis=1)[:, -1] - np.sort(scores, axis=1)[:, -2] > 2.0  # away from the boundaries
    return x[keep], scores[keep].argmax(1)


def test_a_linearly_separable_partition_is_reproduced():
    x, labels = separable()
    weights, bias = linear_assigner.fit(x, labels, 4, seed=0)  # the settings of umap.refine
    assert weights.shape == (4, x.shape[1]) and bias.shape == (4,)
    found, _ = linear_assigner.assign(x, weights, bias)
    assert (found == labels).all()


def test_the_probabilities_are_scikit_learns():
    """The matrix product and softmax give the probabilities of the fitted model (as it would predict them)."""
    from sklearn.linear_model import LogisticRegression

    x, labels = separable(seed=1)
    weights, bias = linear_assigner.fit(x, labels, 4, seed=0)
    reference = LogisticRegression(C=1.0, max_iter=300, random_state=0).fit(x, labels).predict_proba(x)
    found, top = linear_assigner.assign(x, weights, bias)
    assert (found == reference.argmax(1)).all()
    ordered = np.sort(reference, axis=1)
    np.testing.assert_allclose(top[:, 0], ordered[:, -1], atol=1e-5)
    np.testing.assert_allclose(top[:, 1], ordered[:, -2], atol=1e-5)


def test_two_clusters_as_a_softmax_of_two_rows():
    """scikit-learn keeps one logistic for two classes; the softmax rows give its probabilities."""
    from sklearn.linear_model import LogisticRegression

    x, labels = separable(k=2, seed=2)
    weights, bias = linear_assigner.fit(x, labels, 2, seed=0)
    reference = LogisticRegression(C=1.0, max_iter=300, random_state=0).fit(x, labels).predict_proba(x)
    found, top = linear_assigner.assign(x, weights, bias)
    assert (found == reference.argmax(1)).all()
    np.testing.assert_allclose(top[:, 0], reference.max(1), atol=1e-5)
    np.testing.assert_allclose(top[:, 1], reference.min(1), atol=1e-5)


def test_a_cluster_absent_from_the_training_labels_keeps_its_row_and_never_wins():
    x, labels = separable(k=3, seed=3)
    relabelled = np.array([0, 2, 4])[labels]  # K = 5: clusters 1 and 3 are empty
    weights, bias = linear_assigner.fit(x, relabelled, 5, seed=0)
    assert weights.shape == (5, x.shape[1]) and bias.shape == (5,)
    assert np.isneginf(bias[[1, 3]]).all() and not weights[[1, 3]].any()
    found, top = linear_assigner.assign(np.random.default_rng(0).normal(size=(500, x.shape[1])), weights, bias)
    assert set(np.unique(found)) <= {0, 2, 4} and np.isfinite(top).all()


def test_one_cluster_takes_every_row():
    x = np.random.default_rng(0).normal(size=(20, 5)).astype(np.float32)
    weights, bias = linear_assigner.fit(x, np.full(20, 2), 3, seed=0)
    found, top = linear_assigner.assign(x, weights, bias)
    assert (found == 2).all() and (top[:, 0] == 1).all() and (top[:, 1] == 0).all()


def test_the_same_seed_gives_the_same_classifier():
    x, labels = separable(seed=4)
    first = linear_assigner.fit(x, labels, 4, seed=7)
    again = linear_assigner.fit(x, labels, 4, seed=7)
    assert all(np.array_equal(a, b) for a, b in zip(first, again))


@pytest.mark.parametrize("block_rows", [1, 7, 64])
def test_blocked_assignment_equals_one_block(block_rows):
    x, labels = separable(seed=5)
    weights, bias = linear_assigner.fit(x, labels, 4, seed=0)
    unit = lambda b: b / np.linalg.norm(b, axis=1, keepdims=True)  # noqa: E731  (a preparation applied per block)
    whole = linear_assigner.assign(x, weights, bias, block_rows=len(x), prepare=unit)
    blocked = linear_assigner.assign(x, weights, bias, block_rows=block_rows, prepare=unit)
    assert np.array_equal(whole[0], blocked[0])
    np.testing.assert_allclose(whole[1], blocked[1], rtol=1e-6)
    # the preparation is applied: unit rows, not the raw ones, were assigned
    assert np.array_equal(whole[0], linear_assigner.assign(unit(x), weights, bias)[0])
