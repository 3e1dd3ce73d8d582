import numpy as np
import pytest

from evaluation.clustering.catalogue import cluster_accuracy
from evaluation.clustering.metrics import clustering_scores, kmeans_scores
from tests.helpers.speed import KMEANS
from textcore.kmeans import kmeans_fit


def test_permuted_labelling_scores_one():
    labels = np.array([0, 0, 1, 1, 2, 2, 2])
    permuted = np.array([2, 2, 0, 0, 1, 1, 1])
    scores = clustering_scores(labels, permuted)
    assert scores["acc"] == 1.0 and scores["nmi"] == pytest.approx(1.0)
    assert scores["ari"] == pytest.approx(1.0) and scores["ami"] == pytest.approx(1.0)


def test_accuracy_hand_value_and_string_labels():
    # best mapping: cluster 0 -> a (2 right), cluster 1 -> b (1 right) -> 3/5
    assert cluster_accuracy(["a", "a", "a", "b", "b"], [0, 0, 1, 1, 0]) == pytest.approx(3 / 5)
    # more clusters than classes: each class gets one cluster, the rest count as errors
    assert cluster_accuracy([1, 1, 2, 2], [0, 1, 2, 3]) == pytest.approx(2 / 4)


def test_accuracy_rejects_length_mismatch():
    with pytest.raises(ValueError, match="differ in length"):
        cluster_accuracy([0, 1], [0])


def test_kmeans_scores_mean_and_std_over_seeds():
    rng = np.random.default_rng(0)
    centres = np.array([[0, 0], [10, 0], [0, 10]])
    x = np.concatenate([c + rng.normal(size=(20, 2)) for c in centres])
    y = np.repeat([0, 1, 2], 20)
    scores = kmeans_scores(x, y, 3, seeds=range(3), backend=KMEANS)
    assert scores["acc"] == 1.0 and scores["acc_std"] == 0.0
    assert set(scores) >= {"nmi", "nmi_std", "ari", "ami"}


def test_kmeans_is_repeatable_and_checks_cluster_count():
    x = np.random.default_rng(1).normal(size=(30, 4))
    assert (kmeans_fit(x, 4, seed=3, backend=KMEANS).labels_ == kmeans_fit(x, 4, seed=3, backend=KMEANS).labels_).all()
    with pytest.raises(ValueError, match="only 30 samples"):
        kmeans_fit(x, 31, backend=KMEANS)
