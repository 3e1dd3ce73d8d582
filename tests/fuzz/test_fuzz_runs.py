"""Fuzzing what needs a model: whole runs on generated tiny files (in this process, plus a few ``python run.py``
processes), and ``evaluation.model_io.predict`` on generated texts, texts beyond the token limit among them.
All on the tiny
backbone. A run either writes results.json and one prediction per text kept, or stops with one line naming the
file or the key; prediction gives every text a cluster of the run (an empty cell for a row without text)."""
from __future__ import annotations

import contextlib
import json
import math
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.helpers.data_files import TOPIC_WORDS
from tests.helpers.fuzz_files import has_text, write_table
from tests.helpers.fuzz_strategies import ENCODINGS, FORMATS, budget, tables, texts, user_error_or

ROOT = Path(__file__).resolve().parents[2]
WORDS = [w for words in TOPIC_WORDS.values() for w in words]
FAST_RUN = ["backbone=tiny", "trainer.max_steps=2", "trainer.enable_progress_bar=false", "~callbacks.progress",
            "print_table=false", "callbacks.report.plots=false", "method.callbacks.centroid_init.n_init=1",
            "dataset.callbacks.clustering_eval.kmeans_n_init=1", "dataset.callbacks.clustering_eval.every_n_steps=1"]


def run_case():
    return st.tuples(tables(max_rows=5), st.sampled_from(FORMATS), st.sampled_from(ENCODINGS),
                     st.one_of(st.none(), st.integers(1, 7)), st.integers(2, 4))


@contextlib.contextmanager
def case_run(case):
    """A ``run_case`` written to a temporary folder: (the file, the overrides of a fast run on it, the run's folder)."""
    (rows, labels), fmt, encoding, k, batch = case
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        written = write_table(folder, rows, labels, fmt, encoding)
        yield written, FAST_RUN + ["dataset=csv", f"data_dir={folder}", f"dataset.file={written.path.name}",
                                   f"dataset.encoding={written.encoding}", f"batch_size={batch}",
                                   f"dataset.num_clusters={'null' if k is None else k}"], folder / "run"


def check_finished_run(out: Path, written) -> None:
    results = json.loads((out / "results.json").read_text())  # strict JSON: no NaN
    kept = [t for t in written.texts if has_text(t)]
    predictions = pd.read_csv(out / "predictions.csv", dtype={"text": str}, keep_default_na=False)
    assert len(predictions) == len(kept)
    k = np.load(out / "kmeans_centroids.npy").shape[0]
    assert predictions["kmeans_cluster"].between(0, k - 1).all()
    for entry in results["clustering"]["history"]:
        for name, value in entry.items():
            assert value is None or not isinstance(value, float) or math.isfinite(value), (name, value)


@budget(fast=2, long=60)
@given(run_case())
@example(((["How do I revert a git commit?", "Which telescope sees faint galaxies?"], None), "csv", "utf-8-sig",
          2, 2))  # two texts, K = 2
@example(((["a b", "c d", "e f"], ["x", "x", "y"]), "tsv", "utf-8", None, 2))
def test_a_run_on_a_tiny_file_finishes_or_names_the_problem(case):
    from ctclust.training.train import train
    from tests.helpers import compose_config

    with case_run(case) as (written, overrides, out):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with user_error_or(written.path.name, "dataset.", "batch_size") as outcome:
                train(compose_config(overrides, out))
        if outcome["error"] is None:
            check_finished_run(out, written)


@budget(fast=0, long=12)
@given(run_case())
@example(((["only one text"], None), "csv", "utf-8", 2, 2))
@pytest.mark.slow
def test_run_py_ends_with_results_or_one_error_line(case):
    with case_run(case) as (_, overrides, out):
        proc = subprocess.run([sys.executable, "run.py", *overrides, f"hydra.run.dir={out}"], cwd=ROOT,
                              capture_output=True, text=True, timeout=600)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    if proc.returncode == 0:
        assert not errors
    else:
        assert proc.returncode == 2 and len(errors) == 1, proc.stderr[-3000:]


# -- predict -------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """SCCL, two steps on the tiny backbone: a run folder predict can read (head, centroids, clusters.json)."""
    from ctclust.training.train import train
    from tests.helpers import compose_config
    from tests.helpers.data_files import write_csv

    folder = tmp_path_factory.mktemp("fuzz_run")
    rows = [[topic, " ".join(words[i:] + words[:i])] for topic, words in TOPIC_WORDS.items() for i in range(8)]
    write_csv(folder / "train.csv", ["label", "text"], rows)
    out = folder / "run"
    train(compose_config(FAST_RUN + ["dataset=csv", f"data_dir={folder}", "dataset.file=train.csv",
                                     "batch_size=8", "max_length=16"], out))
    return out


long_texts = st.builds(lambda n, seed: " ".join(WORDS[(seed + i * 7) % len(WORDS)] for i in range(n)),
                       st.integers(20, 3000), st.integers(0, 50))


@budget(fast=8, long=300)
@given(st.lists(st.one_of(texts, long_texts), min_size=1, max_size=5), st.sampled_from(FORMATS),
       st.sampled_from(("auto", "kmeans")))
@example(["pasta " * 600], "csv", "auto")  # far beyond max_length and the tiny backbone's 128 positions
def test_predict_assigns_every_text_to_a_cluster_of_the_run(trained_run, new_texts, fmt, assign):
    from evaluation.model_io.predict import predict

    k = np.load(trained_run / "kmeans_centroids.npy").shape[0]
    with tempfile.TemporaryDirectory() as tmp:
        written = write_table(Path(tmp), new_texts, None, fmt, "utf-8", name="new")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with user_error_or(written.path.name, "--input") as outcome:
                rows = predict(trained_run, written.path, assign=assign)
    if not any(has_text(t) for t in written.texts):
        assert outcome["error"] is not None
        return
    assert outcome["error"] is None and len(rows) == len(written.texts)
    for row, text in zip(rows, written.texts):
        if not has_text(text):
            assert row["cluster"] == ""
            continue
        assert 0 <= row["cluster"] < k and 0 <= row["margin"] <= 1 and -1 <= row["confidence"] <= 1


@budget(fast=4, long=200)
@given(long_texts, st.integers(1, 3000))
def test_words_beyond_the_token_limit_do_not_change_the_cluster(trained_run, text, extra):
    """The run cuts texts at max_length=16 tokens: a text and the same text with more words after its first 16
    tokens are one text to the model."""
    from evaluation.model_io.predict import predict

    longer = text + " " + " ".join(WORDS[i % len(WORDS)] for i in range(extra))
    with tempfile.TemporaryDirectory() as tmp:
        written = write_table(Path(tmp), [text, longer], None, "csv", "utf-8", name="pair")
        rows = predict(trained_run, written.path, assign="kmeans", top_n=0)
    assert rows[0]["cluster"] == rows[1]["cluster"]
    assert rows[0]["confidence"] == pytest.approx(rows[1]["confidence"], abs=1e-5)
