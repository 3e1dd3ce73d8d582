"""textcore.kmeans.nearest_centres, the one nearest-centre assignment, against the three formulas it replaced
(written out here as they stood): NumPy's blocks, torch's iterations and prediction's float64 distances."""
import numpy as np
import pytest
import torch

from textcore.kmeans import assign_nearest, kmeans_fit, nearest_centres


def data(n=600, d=16, k=7, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, d)).astype(np.float32)
    x = (centres[rng.integers(0, k, n)] + 0.6 * rng.normal(size=(n, d))).astype(np.float32)
    x[:k] = centres  # rows exactly at a centre: distances that rounding can leave below zero
    return x, centres


def numpy_blocks(x, c):  # assign_nearest before
    squared_centres = (c.astype(np.float64) ** 2).sum(1).astype(c.dtype)
    distances = (x * x).sum(1, keepdims=True) - 2 * x @ c.T + squared_centres
    index = distances.argmin(axis=1)
    return index, float(np.maximum(distances[np.arange(len(x)), index], 0).sum(dtype=np.float64))


def torch_iterations(data, squared, centres):  # _torch_kmeans's _nearest before
    distances = squared[:, None] - 2 * data @ centres.T + (centres * centres).sum(1)[None, :]
    values, labels = distances.clamp_min(0).min(dim=1)
    return values, labels


def prediction_float64(x, c):  # predict.nearest_centroid's cluster before
    x, c = torch.as_tensor(x, dtype=torch.float64), torch.as_tensor(c, dtype=torch.float64)
    sq = (x**2).sum(1, keepdim=True) - 2 * x @ c.T + (c**2).sum(1)
    return sq.clamp_min(0.0).sqrt().argmin(dim=1).numpy()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_one_assignment_equals_each_formula_it_replaced(seed):
    x, centres = data(seed=seed)
    labels, inertia = assign_nearest(x, centres, chunk_rows=128)
    expected, expected_inertia = numpy_blocks(x, centres)
    assert np.array_equal(labels, expected) and inertia == pytest.approx(expected_inertia, rel=1e-12)

    tx, tc = torch.as_tensor(x), torch.as_tensor(centres)
    squared = (tx * tx).sum(1)
    values, index = nearest_centres(tx, tc, x_squared=squared)
    old_values, old_index = torch_iterations(tx, squared, tc)
    assert torch.equal(index, old_index) and torch.equal(values, old_values)

    x64, c64 = torch.as_tensor(x, dtype=torch.float64), torch.as_tensor(centres, dtype=torch.float64)
    assert np.array_equal(nearest_centres(x64, c64)[1].numpy(), prediction_float64(x, centres))


def test_prediction_assigns_each_text_as_the_kmeans_that_made_the_centres():
    from evaluation.model_io.predict import nearest_centroid

    x, _ = data(seed=3)
    fitted = kmeans_fit(x, 7, seed=0, n_init=2, backend="fast")
    cluster, _, _ = nearest_centroid(x, fitted.cluster_centers_)
    assert np.array_equal(cluster, fitted.labels_)
