"""The clustering space (textcore/cluster_space.py, conf ``cluster_space``/``umap``): KMeans on a UMAP of the
embeddings, a map kept in the run folder as arrays, and new texts placed through it (docs/clusters.md)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.helpers import compose_config
from textcore.cluster_space import SpaceMap, SpaceSettings, space_kmeans
from textcore.errors import ConfigError
from validation.settings import validate

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.mark.parametrize("override, key", [
    ("cluster_space=umaps", "cluster_space='umaps'"),
    ("umap.n_components=0", "umap.n_components=0"),
    ("umap.metric=manhattan", "umap.metric='manhattan'"),
    ("umap.min_dist=2", "umap.min_dist=2"),
    ("+umap.neighbours=5", "umap.neighbours"),
])
def test_a_bad_clustering_space_setting_is_one_line_naming_its_key(override, key):
    cfg = compose_config(["cluster_space=umap", override])
    with pytest.raises(ConfigError) as error:
        validate(cfg)
    message = str(error.value)
    assert message.startswith(key) and "\n" not in message


def test_the_default_and_paper_recipes_spaces():
    """A user's run clusters in the UMAP; a paper row's recipe clusters the embeddings, as its authors did."""
    import os

    saved = os.environ.pop("PROJECT_CLUSTER_SPACE", None)  # the suite's setting (tests/conftest.py), not a user's
    try:
        assert compose_config(["dataset=csv"]).cluster_space == "umap"
        assert compose_config([]).cluster_space == "umap"
        for recipe in ("sccl_tweet", "aecl_agnews", "pairsupcon_bert_base"):
            assert compose_config([f"experiment={recipe}"]).cluster_space == "embeddings", recipe
    finally:
        if saved is not None:
            os.environ["PROJECT_CLUSTER_SPACE"] = saved


def blobs(n: int = 400, k: int = 5, d: int = 24, seed: int = 0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, d))
    labels = rng.integers(0, k, n)
    return (centres[labels] + 0.35 * rng.normal(size=(n, d))).astype(np.float32), labels


@pytest.mark.slow  # UMAP's numba compilation: about 30 s of CPU in a fresh process
def test_space_kmeans_is_seeded_and_the_saved_map_places_texts_as_the_fit_did(tmp_path):
    from sklearn.metrics import adjusted_rand_score

    from textcore.kmeans import assign_nearest

    x, truth = blobs()
    settings = SpaceSettings.from_config("umap", {"n_neighbors": 10, "n_components": 3, "fit_sample": 0})
    first = space_kmeans(x, 5, 0, 2, "fast", 0, settings)
    again = space_kmeans(x, 5, 0, 2, "fast", 0, settings)
    assert (first.labels_ == again.labels_).all() and np.array_equal(first.coords, again.coords)
    assert adjusted_rand_score(truth, first.labels_) > 0.9
    assert first.embedding_centers_.shape == (5, x.shape[1])  # a head starts from the clusters' mean embeddings
    for c in range(5):
        assert np.allclose(first.embedding_centers_[c], x[first.labels_ == c].mean(0), atol=1e-5)

    folder = first.space.save(tmp_path)
    assert sorted(p.name for p in folder.iterdir()) == ["anchors.npy", "coords.npy", "space.json"]
    for name in ("anchors.npy", "coords.npy"):
        np.load(folder / name, allow_pickle=False)  # plain arrays: reading them runs no code
    assert json.loads((folder / "space.json").read_text())["n_components"] == 3
    loaded = SpaceMap.load(tmp_path)
    # the fitted texts, re-embedded with float noise, come back to their own coordinates and clusters
    placed = loaded.transform(x + 1e-6 * np.random.default_rng(1).normal(size=x.shape).astype(np.float32),
                              block_rows=64)
    assert np.array_equal(placed, first.coords)
    assert (assign_nearest(placed, first.cluster_centers_)[0] == first.labels_).all()

    # a corpus beyond the fit sample: the sample's texts keep UMAP's coordinates, the others are placed by their
    # neighbours among them, and the clusters stay those of the whole fit
    sampled = SpaceSettings.from_config("umap", {"n_neighbors": 10, "n_components": 3, "fit_sample": 200})
    part = space_kmeans(x, 5, 0, 2, "fast", 0, sampled)
    assert len(part.space.anchors) == 200
    assert adjusted_rand_score(first.labels_, part.labels_) > 0.9
    assert np.array_equal(part.space.transform(x), part.coords)


@pytest.mark.slow  # two short runs of the tiny backbone with UMAP (numba compilation included): about a minute
def test_a_umap_run_is_repeatable_and_predict_gives_its_own_clusters(tmp_path):
    import pandas as pd

    from ctclust import TextClusterer, load_demo
    from tests.ctclust.test_api import FAST

    texts = load_demo().sample(160, random_state=0)["text"].reset_index(drop=True)
    umap = ["cluster_space=umap", "umap.n_neighbors=10", "umap.n_components=4"]
    runs = [TextClusterer(backbone="tiny", num_clusters=4, overrides=FAST + umap, seed=5,
                          run_dir=tmp_path / f"run{i}").fit(texts) for i in range(2)]
    first, second = (pd.read_csv(r.run_dir_ / "predictions.csv") for r in runs)
    assert (first["kmeans_cluster"] == second["kmeans_cluster"]).all()
    assert (runs[0].labels_ == first["kmeans_cluster"].to_numpy()).all()  # the run stands for its UMAP's KMeans
    space = runs[0].results_["clustering"]["protocol"]["cluster_space"]
    assert space["space"] == "umap" and space["n_components"] == 4
    meta = json.loads((runs[0].run_dir_ / "kmeans_centroids.json").read_text())
    assert meta["cluster_space"] == "umap" and meta["dim"] == 4
    # the training texts through the saved map: the run's own assignments
    predicted = TextClusterer.load(runs[0].run_dir_).predict(texts)
    assert (predicted == runs[0].labels_).mean() >= 0.99
