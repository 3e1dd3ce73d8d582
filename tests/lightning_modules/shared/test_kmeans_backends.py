"""KMeans backends: deterministic per seed, same fields for every backend, float32 by default."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from evaluation.clustering.metrics import clustering_scores, kmeans_scores
from textcore.errors import UserError
from textcore.kmeans import (
    KMEANS_BACKENDS,
    check_kmeans_backend,
    greedy_kmeans_plusplus,
    kmeans_fit,
)


def blobs(n_per: int = 60, k: int = 5, d: int = 16, seed: int = 0):
    """``k`` well separated Gaussian blobs: [k * n_per, d] float32 and their labels."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=8.0, size=(k, d))
    x = np.concatenate([c + rng.normal(size=(n_per, d)) for c in centres]).astype(np.float32)
    return x, np.repeat(np.arange(k), n_per)


def overlapping(n: int = 400, d: int = 8, seed: int = 1) -> np.ndarray:
    """No clear clusters: restarts and seeds matter, so determinism is actually tested."""
    return np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32)


@pytest.mark.parametrize("backend", KMEANS_BACKENDS)
def test_same_seed_same_clusters_and_other_seeds_differ(backend):
    x = overlapping()
    first = kmeans_fit(x, 7, seed=3, n_init=3, backend=backend)
    again = kmeans_fit(x.copy(), 7, seed=3, n_init=3, backend=backend)
    assert np.array_equal(first.labels_, again.labels_)
    assert np.array_equal(first.cluster_centers_, again.cluster_centers_)
    others = [kmeans_fit(x, 7, seed=s, n_init=1, backend=backend).labels_ for s in range(4)]
    assert len({tuple(o) for o in others}) > 1  # the seed reaches the initialisation


@pytest.mark.parametrize("backend", KMEANS_BACKENDS)
def test_every_backend_returns_labels_centres_and_inertia(backend):
    x, y = blobs()
    fitted = kmeans_fit(x, 5, seed=0, n_init=2, backend=backend)
    assert fitted.backend == backend
    assert fitted.labels_.shape == (len(x),) and fitted.labels_.dtype == np.int64
    assert fitted.cluster_centers_.shape == (5, x.shape[1])
    assert clustering_scores(y, fitted.labels_)["acc"] == 1.0  # separable blobs are found exactly
    # labels are the nearest centres, inertia their summed squared distances
    assert np.array_equal(fitted.predict(x), fitted.labels_)
    nearest = ((x - fitted.cluster_centers_[fitted.labels_]) ** 2).sum()
    assert fitted.inertia_ == pytest.approx(float(nearest), rel=1e-3)


@pytest.mark.parametrize("backend", KMEANS_BACKENDS)
def test_backends_agree_on_separable_data_and_restarts_lower_inertia(backend):
    x, y = blobs(k=6)
    assert kmeans_scores(x, y, 6, seeds=range(3), backend=backend, n_init=3)["acc"] == 1.0
    noisy = overlapping(n=600)
    one = kmeans_fit(noisy, 12, seed=0, n_init=1, backend=backend).inertia_
    many = kmeans_fit(noisy, 12, seed=0, n_init=8, backend=backend).inertia_
    assert many <= one


def test_greedy_kmeans_plusplus_picks_one_data_point_per_blob():
    x, y = blobs(k=8, n_per=40)
    for seed in range(5):
        centres = greedy_kmeans_plusplus(x, 8, np.random.default_rng(seed))
        rows = [int(np.flatnonzero((x == c).all(axis=1))[0]) for c in centres]  # every centre is a row of x
        assert sorted(y[rows]) == list(range(8))  # far-apart blobs: one centre in each
    first = greedy_kmeans_plusplus(x, 8, np.random.default_rng(3))
    assert np.array_equal(first, greedy_kmeans_plusplus(x, 8, np.random.default_rng(3)))


def test_sklearn_float64_is_still_available_and_close_to_float32():
    x, _ = blobs()
    f32 = kmeans_fit(x, 5, seed=1, n_init=2, backend="sklearn")
    f64 = kmeans_fit(x, 5, seed=1, n_init=2, backend="sklearn", dtype="float64")
    assert f32.cluster_centers_.dtype == np.float32 and f64.cluster_centers_.dtype == np.float64
    assert np.array_equal(f32.labels_, f64.labels_)


def test_backend_names_are_checked():
    with pytest.raises(UserError, match="no KMeans backend given"):
        check_kmeans_backend(None)
    with pytest.raises(UserError, match="unknown KMeans backend .scipy.*fast, sklearn, faiss"):
        kmeans_fit(blobs()[0], 3, backend="scipy")
    with pytest.raises(ValueError, match="only 3 samples"):
        kmeans_fit(np.zeros((3, 2), dtype=np.float32), 4, backend="fast")


@pytest.mark.parametrize("backend", KMEANS_BACKENDS)
def test_evaluate_clustering_uses_and_records_the_backend(tmp_path, backend):
    from evaluation.benchmarks.clustering_tasks import clustering_markdown, clustering_set, evaluate_clustering
    from tests.helpers.data_files import write_csv

    (tmp_path / "toy.yaml").write_text(
        "name: toy\nfile: toy.csv\ntext_column: text\nlabel_column: label\nnum_clusters: 3\n"
    )
    x, y = blobs(k=3, n_per=20)
    texts = [f"t{i}" for i in range(len(x))]
    write_csv(tmp_path / "toy.csv", ["label", "text"], [[int(label), t] for label, t in zip(y, texts)])
    rows = dict(zip(texts, x))
    result = evaluate_clustering(lambda batch: np.stack([rows[t] for t in batch]),
                                 [clustering_set("toy", tmp_path, tmp_path)], seeds=(0, 1), kmeans_backend=backend)
    assert result["kmeans"] == {"backend": backend, "n_init": 10}
    assert result["datasets"]["toy"]["acc"] == 1.0
    assert f"{backend} float32, 10 restarts each" in clustering_markdown(result, "toy")


def test_the_assignment_on_a_device_equals_the_plain_one():
    from textcore.kmeans import assign_nearest

    x = overlapping(n=1000)
    centres = kmeans_fit(x, 6, seed=0, n_init=1, backend="fast").cluster_centers_.astype(np.float32)
    labels, inertia = assign_nearest(x, centres, chunk_rows=300)
    on_device, inertia_on_device = assign_nearest(x, centres, chunk_rows=300, device="cpu")
    assert np.array_equal(on_device, labels) and inertia_on_device == pytest.approx(inertia, rel=1e-6)


@pytest.mark.parametrize("backend", KMEANS_BACKENDS)
def test_every_result_says_where_it_ran(backend):
    import torch

    from textcore.kmeans import faiss_gpus

    result = kmeans_fit(overlapping(), 4, seed=0, n_init=1, backend=backend, sample=200)
    gpu = torch.cuda.is_available() and (backend == "torch" or (backend == "faiss" and faiss_gpus() > 0))
    assert result.device.startswith("cuda") if gpu else result.device == "cpu"
    assert result.fitted_rows == 200


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_the_torch_backend_fits_and_assigns_there():
    from textcore.kmeans import faiss_gpus

    x = overlapping(n=3000)
    result = kmeans_fit(x, 6, seed=0, n_init=2, backend="torch", sample=1000)
    assert result.device.startswith("cuda") and result.fitted_rows == 1000
    on_cpu = kmeans_fit(x, 6, seed=0, n_init=2, backend="fast", sample=1000)
    assert result.labels_.shape == on_cpu.labels_.shape
    if faiss_gpus():
        assert kmeans_fit(x, 6, seed=0, n_init=2, backend="faiss").device.startswith("cuda")
