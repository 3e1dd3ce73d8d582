"""The clustering space (textcore/cluster_space.py, conf ``cluster_space``/``umap``): KMeans on a UMAP of the
embeddings, a map kept in the run folder as arrays, and new texts placed through it (docs/clusters.md)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.helpers import compose_config
from textcore.cluster_space import SpaceMap, SpaceSettings, space_kmeans
from textcore.errors import ConfigError, MissingFileError
from validation.settings import validate

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.mark.parametrize("override, key", [
    ("cluster_space=umaps", "cluster_space='umaps'"),
    ("umap.n_components=0", "umap.n_components=0"),
    ("umap.metric=manhattan", "umap.metric='manhattan'"),
    ("umap.min_dist=2", "umap.min_dist=2"),
    ("umap.refine=quadratic", "umap.refine='quadratic'"),
    ("+umap.neighbours=5", "umap.neighbours"),
])
def test_a_bad_clustering_space_setting_is_one_line_naming_its_key(override, key):
    cfg = compose_config(["cluster_space=umap", override])
    with pytest.raises(ConfigError) as error:
        validate(cfg)
    message = str(error.value)
    assert message.startswith(key) and "\n" not in message


def test_the_refinement_is_the_default_and_turns_off():
    from textcore.cluster_space import settings_of

    assert settings_of(compose_config(["cluster_space=umap"])).refine == "linear"
    assert settings_of(compose_config(["cluster_space=umap", "umap.refine=none"])).refine == "none"
    assert SpaceSettings().refine == "linear"


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

    from textcore.cluster_space import fit_space
    from textcore.kmeans import assign_nearest, kmeans_fit

    x, truth = blobs()
    options = {"n_neighbors": 10, "n_components": 3, "fit_sample": 0}
    plain = SpaceSettings.from_config("umap", {**options, "refine": "none"})
    first = space_kmeans(x, 5, 0, 2, "fast", 0, plain)
    # refine=none is the KMeans of the UMAP's coordinates, as before the refinement existed
    coords = fit_space(x, plain, 0)[1]
    assert np.array_equal(first.labels_, kmeans_fit(coords, 5, 0, 2, "fast", sample=0).labels_)
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
    assert not loaded.refined
    # the fitted texts, re-embedded with float noise, come back to their own coordinates and clusters
    noisy = x + 1e-6 * np.random.default_rng(1).normal(size=x.shape).astype(np.float32)
    placed = loaded.transform(noisy, block_rows=64)
    assert np.array_equal(placed, first.coords)
    assert (assign_nearest(placed, first.cluster_centers_)[0] == first.labels_).all()

    # the folder of a run saved before the refinement existed (no refine in space.json) loads as refine=none
    meta = json.loads((folder / "space.json").read_text())
    del meta["refine"]
    (folder / "space.json").write_text(json.dumps(meta))
    old = SpaceMap.load(tmp_path)
    assert old.settings.refine == "none" and not old.refined
    assert np.array_equal(old.transform(noisy), first.coords)

    # a corpus beyond the fit sample: the sample's texts keep UMAP's coordinates, the others are placed by their
    # neighbours among them, and the clusters stay those of the whole fit
    sampled = SpaceSettings.from_config("umap", {**options, "fit_sample": 200, "refine": "none"})
    part = space_kmeans(x, 5, 0, 2, "fast", 0, sampled)
    assert len(part.space.anchors) == 200
    assert adjusted_rand_score(first.labels_, part.labels_) > 0.9
    assert np.array_equal(part.space.transform(x), part.coords)


@pytest.mark.slow  # UMAP's numba compilation: about 30 s of CPU in a fresh process
def test_several_fits_sit_side_by_side_each_seeded_as_one_fit_and_place_new_texts_in_all(tmp_path):
    from textcore.cluster_space import FIT_SEED_STEP, fit_space

    x, truth = blobs()
    options = {"n_neighbors": 10, "n_components": 3, "fit_sample": 0, "refine": "none"}
    one = SpaceSettings.from_config("umap", {**options, "fits": 1})
    three = SpaceSettings.from_config("umap", {**options, "fits": 3})
    coords = fit_space(x, three, 4)[1]
    assert coords.shape == (len(x), 9)
    for j in range(3):  # fit j is the single fit of seed 4 + step j: nothing else differs
        assert np.array_equal(coords[:, 3 * j:3 * j + 3], fit_space(x, one, 4 + FIT_SEED_STEP * j)[1])
    assert not np.array_equal(coords[:, :3], coords[:, 3:6])
    result = space_kmeans(x, 5, 4, 2, "fast", 0, three)
    assert np.array_equal(result.coords, coords)
    from sklearn.metrics import adjusted_rand_score

    assert adjusted_rand_score(truth, result.labels_) > 0.9
    result.space.save(tmp_path)
    loaded = SpaceMap.load(tmp_path)
    assert loaded.settings.fits == 3
    noisy = x + 1e-6 * np.random.default_rng(1).normal(size=x.shape).astype(np.float32)
    assert np.array_equal(loaded.transform(noisy, block_rows=64), coords)  # the fitted texts: their own coordinates
    new = x[:40] + 0.05 * np.random.default_rng(2).normal(size=(40, x.shape[1])).astype(np.float32)
    placed = loaded.transform(new)  # a new text: the same neighbours and weights in every fit
    singles = [SpaceMap(loaded.anchors, coords[:, 3 * j:3 * j + 3], one) for j in range(3)]
    assert np.allclose(placed, np.hstack([m.transform(new) for m in singles]), atol=1e-6)
    with pytest.raises(ConfigError, match="umap.fits=0"):
        SpaceSettings.from_config("umap", {**options, "fits": 0})


@pytest.mark.slow  # UMAP's numba compilation: about 30 s of CPU in a fresh process
def test_the_linear_refinement_is_seeded_saved_and_assigns_new_texts(tmp_path):
    x, _ = blobs()
    options = {"n_neighbors": 10, "n_components": 3, "fit_sample": 0}
    refined = SpaceSettings.from_config("umap", options)
    assert refined.refine == "linear"
    first = space_kmeans(x, 5, 0, 2, "fast", 0, refined)
    again = space_kmeans(x, 5, 0, 2, "fast", 0, refined)
    assert np.array_equal(first.labels_, again.labels_)
    assert np.array_equal(first.space.weights, again.space.weights)
    # the same UMAP and KMeans as refine=none; the blobs' KMeans partition is linearly separable in the
    # embeddings, so the classifier gives it back
    plain = space_kmeans(x, 5, 0, 2, "fast", 0, SpaceSettings.from_config("umap", {**options, "refine": "none"}))
    assert np.array_equal(first.space_labels_, plain.labels_)
    assert np.array_equal(first.labels_, plain.labels_)
    assert first.space.weights.shape == (5, x.shape[1]) and first.space.bias.shape == (5,)
    for c in range(5):
        assert np.allclose(first.embedding_centers_[c], x[first.labels_ == c].mean(0), atol=1e-5)

    folder = first.space.save(tmp_path)
    assert sorted(p.name for p in folder.iterdir()) == ["anchors.npy", "bias.npy", "coords.npy", "space.json",
                                                         "weights.npy"]
    assert json.loads((folder / "space.json").read_text())["refine"] == "linear"
    loaded = SpaceMap.load(tmp_path)
    assert loaded.refined and np.array_equal(loaded.weights, first.space.weights)
    noisy = x + 1e-6 * np.random.default_rng(1).normal(size=x.shape).astype(np.float32)
    found, top = loaded.assign(noisy, block_rows=50)
    assert np.array_equal(found, first.labels_)
    assert ((top[:, 0] >= top[:, 1]) & (top[:, 0] <= 1) & (top[:, 1] >= 0)).all()

    (folder / "bias.npy").unlink()  # half a classifier: one line naming the file
    with pytest.raises(MissingFileError, match="bias.npy is missing"):
        SpaceMap.load(tmp_path)


@pytest.mark.slow  # UMAP's numba compilation: about 30 s of CPU in a fresh process
def test_the_refinement_fits_on_the_umap_sample_and_a_cluster_may_be_empty():
    """Beyond umap.fit_sample the classifier learns from the fitted rows only (their prepared embeddings, with their
    KMeans clusters); a KMeans cluster without rows keeps its place in the classifier (K rows) and is never
    assigned."""
    from unittest import mock

    from textcore import cluster_space, linear_assigner

    x, _ = blobs(n=400, k=3)
    settings = SpaceSettings.from_config("umap", {"n_neighbors": 10, "n_components": 3, "fit_sample": 150})
    taught = []
    real_fit = linear_assigner.fit

    def spy(features, labels, num_clusters, seed, **kw):
        taught.append((np.array(features), np.array(labels), num_clusters))
        return real_fit(features, labels, num_clusters, seed, **kw)

    with mock.patch.object(linear_assigner, "fit", spy):
        found = cluster_space.space_kmeans(x, 3, 0, 2, "fast", 0, settings)
        features, labels, k = taught[0]
        rows = cluster_space.fitted_rows(len(x), settings, 0)
        assert len(rows) == 150 and k == 3
        unit = x[rows] / np.linalg.norm(x[rows], axis=1, keepdims=True)  # cosine: unit length, as UMAP saw them
        np.testing.assert_allclose(features, unit, atol=1e-6)
        # KMeans learned on the fitted rows only (the rest is not placed in the map: the classifier assigns it)
        assert len(found.space_labels_) == len(found.coords) == 150 and np.array_equal(labels, found.space_labels_)
        assert len(found.labels_) == len(x)

        # K = 4 with cluster 2 empty: the classifier keeps four rows, cluster 2 never wins
        empty = np.where(found.space_labels_ >= 2, found.space_labels_ + 1, found.space_labels_)
        refined = cluster_space.refine_linear(found.space, x, empty, 4)
    assert found.space.weights.shape == (4, x.shape[1]) and found.space.bias.shape == (4,)
    assert 2 not in refined and set(np.unique(refined)) <= {0, 1, 3}
    assert cluster_space.cluster_means(x, refined, 4).shape == (4, x.shape[1])
    with mock.patch.object(cluster_space.SpaceMap, "transform", side_effect=AssertionError("placed")):
        again = cluster_space.space_kmeans(x, 3, 0, 2, "fast", 0, settings)  # refined: no text goes through the map
    assert np.array_equal(again.labels_, found.labels_)


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
    assert space["space"] == "umap" and space["n_components"] == 4 and space["fits"] == 3  # the default: three
    meta = json.loads((runs[0].run_dir_ / "kmeans_centroids.json").read_text())
    assert meta["cluster_space"] == "umap" and meta["dim"] == 4 * space["fits"]  # the fits' coordinates side by side
    assert space["refine"] == "linear"  # the default: the KMeans refined by the linear classifier
    assert (runs[0].run_dir_ / "cluster_space" / "weights.npy").is_file()
    # the training texts through the saved classifier: the run's own assignments, every one
    predicted = TextClusterer.load(runs[0].run_dir_).predict(texts)
    assert (predicted == runs[0].labels_).all()
    # the command's library function: confidence is the classifier's probability, margin its lead (not the
    # centroid's cosine, which can be negative)
    from evaluation.model_io.predict import assign_texts, load_cluster_model

    model = load_cluster_model(runs[0].run_dir_)
    cluster, confidence, margin, _ = assign_texts(model, list(texts), use_head=False)
    assert (cluster == runs[0].labels_).all()
    assert ((confidence > 0) & (confidence <= 1) & (margin >= 0) & (margin <= confidence)).all()

    # an export carries the classifier beside the centroids (tools.py export copies cluster_space/ whole)
    from evaluation.model_io.export import copy_cluster_files

    (tmp_path / "st").mkdir()
    copy_cluster_files(runs[0].run_dir_, tmp_path / "st")
    exported = SpaceMap.load(tmp_path / "st")
    assert exported.refined and np.array_equal(exported.weights, model.space.weights)

    # the same folder in the layout of a run saved before the refinement (no refine, no classifier): it loads and
    # assigns as before, by the nearest KMeans centre of the UMAP placement, i.e. the KMeans's own clusters
    import shutil

    from textcore.kmeans import assign_nearest

    old = shutil.copytree(runs[0].run_dir_, tmp_path / "old")
    meta = json.loads((old / "cluster_space" / "space.json").read_text())
    del meta["refine"]
    (old / "cluster_space" / "space.json").write_text(json.dumps(meta))
    for name in ("weights.npy", "bias.npy"):
        (old / "cluster_space" / name).unlink()
    kmeans_own = assign_nearest(np.load(old / "cluster_space" / "coords.npy"), np.load(old / "kmeans_centroids.npy"))[0]
    assert ((TextClusterer.load(old).predict(texts) == kmeans_own).mean() >= 0.99)


def test_the_summary_says_when_the_umap_clusters_were_refined():
    from evaluation.run_report.summary import summary_rows

    def first_row(record: dict) -> str:
        entry = {"kmeans_acc": 0.5, "kmeans_nmi": 0.5}
        results = {"clustering": {"before": entry, "protocol": {"cluster_space": record}}}
        return summary_rows(results)[0]["what"]

    umap = {"space": "umap", "n_components": 5}
    assert first_row({**umap, "refine": "linear"}) == "KMeans in a UMAP (5-d) of the embeddings, refined linearly, " \
                                                     "before training"
    for unrefined in ({**umap, "refine": "none"}, umap):  # the second: results.json of a run before the refinement
        assert first_row(unrefined) == "KMeans in a UMAP (5-d) of the embeddings, before training"
    assert first_row({"space": "embeddings"}) == "KMeans on embeddings, before training"
    assert first_row({**umap, "refine": "none", "fits": 3}) == \
        "KMeans in 3 UMAPs (5-d each, side by side) of the embeddings, before training"


def test_a_python_without_umap_learn_is_told_what_to_install_or_set(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def without_umap(name, *args, **kwargs):
        if name == "umap" or name.startswith("umap."):
            raise ModuleNotFoundError("No module named 'umap'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_umap)
    x, _ = blobs()
    settings = SpaceSettings.from_config("umap", {"n_neighbors": 10, "n_components": 3, "fit_sample": 0})
    with pytest.raises(ImportError, match="pip install umap-learn.*cluster_space=embeddings"):
        space_kmeans(x, 5, 0, 1, "fast", 0, settings)
