"""The Python API (ctclust.api): the same run as the command line, its fitted attributes, new texts, bad input as
exceptions (docs/python.md)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import NotFittedError

from ctclust import TextClusterer, load_demo
from ctclust.api import TextInputError
from textcore.errors import ConfigError, MissingFileError, UserError

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

# a short run of the tiny backbone: cheap, and every part of a clustering run (evaluations, head, report)
FAST = ["trainer.max_steps=6", "batch_size=16", "trainer.enable_progress_bar=false", "~callbacks.progress",
        "print_table=false", "callbacks.report.plots=false", "dataset.callbacks.clustering_eval.every_n_steps=3",
        "dataset.callbacks.clustering_eval.kmeans_n_init=2", "method.callbacks.centroid_init.n_init=2"]


def demo_sample(n: int = 160) -> pd.DataFrame:
    return load_demo().sample(n, random_state=0).reset_index(drop=True)


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    texts = demo_sample()["text"]
    clusterer = TextClusterer(backbone="tiny", num_clusters=4, overrides=FAST, seed=3,
                              run_dir=tmp_path_factory.mktemp("api") / "run")
    labels = clusterer.fit_predict(texts)
    return clusterer, texts, labels


def test_fit_predict_equals_run_py_with_the_same_settings_and_seed(fitted, tmp_path):
    """The command line a user would type for the same texts and settings gives the same clusters."""
    clusterer, texts, labels = fitted
    texts.to_frame().to_csv(tmp_path / "texts.csv", index=False)
    command = [sys.executable, "run.py", "method=sccl", "backbone=tiny", "dataset=csv", f"data_dir={tmp_path}",
               "dataset.file=texts.csv", "dataset.num_clusters=4", "seed=3",
               *FAST,
               f"hydra.run.dir={tmp_path / 'cli'}"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PROJECT_ROOT=str(ROOT)))
    assert done.returncode == 0, done.stderr[-3000:]
    cli = pd.read_csv(tmp_path / "cli" / "predictions.csv")
    api = pd.read_csv(clusterer.run_dir_ / "predictions.csv")
    assert cli["text"].tolist() == api["text"].tolist() == texts.tolist()
    assert (cli["head_cluster"].to_numpy() == labels).all()
    assert (cli["kmeans_cluster"].to_numpy() == api["kmeans_cluster"].to_numpy()).all()


def test_fitted_attributes_describe_the_run(fitted):
    clusterer, texts, labels = fitted
    assert labels.shape == (len(texts),) and labels.dtype == np.int64 and set(labels) <= set(range(4))
    assert clusterer.num_clusters_ == 4
    table = clusterer.clusters_
    assert list(table.columns) == ["cluster", "size", "top_words", "examples"]
    assert table["size"].sum() == len(texts)
    assert table.set_index("cluster")["size"].to_dict() == pd.Series(labels).value_counts().to_dict()
    for row in table.itertuples():  # every example is a training text of its own cluster
        assert all(labels[texts.tolist().index(e)] == row.cluster for e in row.examples)
    assert (clusterer.run_dir_ / "clusters.md").is_file() and clusterer.results_["status"] == "finished"


def test_predict_and_transform_new_texts_and_a_loaded_run_agree(fitted):
    clusterer, texts, labels = fitted
    new = ["how do I revert a git commit", "", "which telescope sees the faintest galaxies"]
    clusters = clusterer.predict(new)
    assert clusters.shape == (3,) and clusters[1] == -1 and set(clusters[[0, 2]]) <= set(range(4))
    embeddings = clusterer.transform(texts[:5])
    assert embeddings.shape[0] == 5 and embeddings.dtype == np.float32
    loaded = TextClusterer.load(clusterer.run_dir_)
    assert (loaded.labels_ == labels).all() and loaded.clusters_.equals(clusterer.clusters_)
    assert (loaded.predict(new) == clusters).all()
    assert np.allclose(loaded.transform(texts[:5]), embeddings, atol=1e-6)
    # the training texts fall in their own clusters, as the run assigned them (the head decides both)
    assert (clusterer.predict(texts[:20]) == labels[:20]).all()


def test_a_file_path_with_its_text_column_detected_and_k_chosen_from_the_texts(tmp_path):
    frame = demo_sample(120).rename(columns={"text": "title"}).drop(columns="label")
    frame["id"] = range(len(frame))
    frame.to_csv(tmp_path / "titles.csv", index=False)
    clusterer = TextClusterer(backbone="tiny", num_clusters=None, run_dir=tmp_path / "run",
                              overrides=[*FAST, "choose_k.k=2:5", "choose_k.kmeans_runs=2"])
    labels = clusterer.fit_predict(tmp_path / "titles.csv")
    assert len(labels) == 120
    choice = clusterer.results_["num_clusters_choice"]
    assert 2 <= choice["k"] <= 5 and clusterer.num_clusters_ == choice["k"]


@pytest.mark.parametrize("texts,error,words", [
    (["a text", None, "another"], TextInputError, "texts[1] is missing, not a text"),
    (pd.Series(["a", 3.5], index=[10, 11]), TextInputError, "texts[11] is float 3.5"),
    ([], TextInputError, "texts is empty"),
    (42, TextInputError, "got int"),
    ("no/such/file.csv", MissingFileError, "no/such/file.csv"),
])
def test_bad_texts_raise_the_errors_of_the_command_line_not_an_exit(texts, error, words, tmp_path):
    with pytest.raises(error) as raised:
        TextClusterer(backbone="tiny", run_dir=tmp_path / "run").fit(texts)
    assert words in str(raised.value) and isinstance(raised.value, UserError)


def test_bad_settings_raise_config_errors_when_fit(tmp_path):
    """scikit-learn's contract: the constructor stores its settings as given, ``fit`` checks them (before writing
    anything)."""
    texts = demo_sample(40)["text"]
    with pytest.raises(ConfigError, match="num_clusters=1"):
        TextClusterer(num_clusters=1, run_dir=tmp_path / "run0").fit(texts)
    with pytest.raises(ConfigError, match="'max_steps' is not a command-line setting"):
        TextClusterer(overrides=["max_steps"], run_dir=tmp_path / "run0").fit(texts)
    with pytest.raises(ConfigError, match="backend='tensorrt'"):
        TextClusterer(backend="tensorrt", run_dir=tmp_path / "run0").fit(texts)
    assert not (tmp_path / "run0").exists()
    with pytest.raises(UserError, match="method"):  # the run's own validation, as an exception
        TextClusterer(method="no_such_method", backbone="tiny", run_dir=tmp_path / "run").fit(texts)
    with pytest.raises(UserError, match="batch_size"):
        TextClusterer(backbone="tiny", overrides={"batch_size": 0}, run_dir=tmp_path / "run2").fit(texts)
    with pytest.raises(NotFittedError, match="not fitted"):
        TextClusterer().predict(["a text"])
