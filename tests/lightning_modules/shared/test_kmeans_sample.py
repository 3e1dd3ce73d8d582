"""KMeans of a large corpus: centres fitted on a seeded sample, every row then assigned to its nearest centre."""
from __future__ import annotations

import numpy as np
import pytest

from textcore.kmeans import assign_nearest, kmeans_fit, sample_rows


def blobs(n: int, k: int = 4, d: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    truth = rng.integers(k, size=n)
    centres = rng.normal(scale=10.0, size=(k, d))
    return (centres[truth] + rng.normal(size=(n, d))).astype(np.float32), truth


@pytest.mark.parametrize("backend", ["fast", "sklearn", "torch"])
def test_a_corpus_no_larger_than_the_sample_is_clustered_exactly_as_without_one(backend):
    x, _ = blobs(500)
    plain = kmeans_fit(x, 4, seed=3, n_init=2, backend=backend)
    for sample in (500, 10_000, 0, None):
        same = kmeans_fit(x, 4, seed=3, n_init=2, backend=backend, sample=sample)
        np.testing.assert_array_equal(same.labels_, plain.labels_)
        np.testing.assert_array_equal(same.cluster_centers_, plain.cluster_centers_)
        assert same.fitted_rows == 500


def test_the_centres_come_from_the_sample_and_every_row_goes_to_its_nearest_centre():
    x, _ = blobs(3000)
    result = kmeans_fit(x, 4, seed=1, n_init=2, backend="fast", sample=300)
    rows = sample_rows(3000, 300, 1)
    assert result.fitted_rows == 300 and len(rows) == 300 and len(set(rows.tolist())) == 300
    on_sample = kmeans_fit(x[rows], 4, seed=1, n_init=2, backend="fast")
    np.testing.assert_array_equal(result.cluster_centers_, on_sample.cluster_centers_)
    # nearest centre and inertia, by a loop over rows and centres
    expected, inertia = [], 0.0
    for row in x.astype(np.float64):
        distances = [float(((row - c) ** 2).sum()) for c in result.cluster_centers_.astype(np.float64)]
        expected.append(int(np.argmin(distances)))
        inertia += min(distances)
    np.testing.assert_array_equal(result.labels_, expected)
    assert result.inertia_ == pytest.approx(inertia, rel=1e-4)
    assert result.labels_.shape == (3000,)


def test_the_sample_is_seeded_and_the_blocks_do_not_change_the_assignment():
    np.testing.assert_array_equal(sample_rows(10_000, 50, 7), sample_rows(10_000, 50, 7))
    assert not np.array_equal(sample_rows(10_000, 50, 7), sample_rows(10_000, 50, 8))
    assert sample_rows(50, 50, 0) is None and sample_rows(10_000, 0, 0) is None
    x, _ = blobs(1000, d=5)
    centres = x[:6]
    whole, whole_inertia = assign_nearest(x, centres, chunk_rows=10_000)
    blocked, blocked_inertia = assign_nearest(x, centres, chunk_rows=7)
    np.testing.assert_array_equal(whole, blocked)
    assert blocked_inertia == pytest.approx(whole_inertia, rel=1e-6)


def test_a_sample_of_a_few_thousand_finds_well_separated_clusters_of_a_large_set():
    from evaluation.clustering.catalogue import cluster_accuracy

    x, truth = blobs(100_000, k=6, d=16)
    result = kmeans_fit(x, 6, seed=0, n_init=3, backend="fast", sample=2000)
    assert cluster_accuracy(truth, result.labels_) == 1.0


def test_bad_samples_are_refused():
    x, _ = blobs(100)
    with pytest.raises(ValueError, match="sample"):
        kmeans_fit(x, 4, backend="fast", sample=-1)
    with pytest.raises(ValueError, match="smaller than the 4 clusters"):
        kmeans_fit(x, 4, backend="fast", sample=3)
