"""Tiny and broken inputs that once ended in a traceback: two texts with K = 2, a study database that
is not a database, a reversed K range for choose_k."""
from __future__ import annotations

import csv
import json
import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from textcore.errors import USER_ERROR_EXIT_CODE

ROOT = Path(__file__).resolve().parents[2]
LONG_TEXT = " ".join(f"word{i % 97}" for i in range(20_000))


def two_text_file(folder: Path, kind: str) -> Path:
    """Two texts in the shapes a user is likely to have them."""
    if kind == "bom":
        path = folder / "two.csv"
        path.write_bytes("\ufefftext\nHow do I revert a git commit?\nWhich telescope sees faint galaxies?\n"
                         .encode("utf-8"))
    elif kind == "tsv":
        path = folder / "two.tsv"
        path.write_text("id\ttext\n1\tHow do I revert a git commit?\n2\tWhich telescope sees faint galaxies?\n")
    else:
        path = folder / "two.csv"
        with open(path, "w", newline="") as handle:
            csv.writer(handle).writerows([["text"], ["How do I revert a git commit?"], [LONG_TEXT]])
    return path


@pytest.mark.parametrize("kind", ["bom", "tsv", "long"])
def test_two_texts_with_two_clusters_train_and_report_undefined_scores_as_null(tmp_path, kind, caplog):
    from ctclust.training.train import train
    from tests.helpers import compose_config

    path = two_text_file(tmp_path, kind)
    out = tmp_path / "run"
    cfg = compose_config(["backbone=tiny", "dataset=csv", f"data_dir={tmp_path}", f"dataset.file={path.name}",
                          "dataset.num_clusters=2", "batch_size=2", "trainer.max_steps=2",
                          "dataset.callbacks.clustering_eval.every_n_steps=1", "trainer.enable_progress_bar=false",
                          "~callbacks.progress", "print_table=false", "callbacks.report.plots=false",
                          "method.callbacks.centroid_init.n_init=2",
                          "dataset.callbacks.clustering_eval.kmeans_n_init=2"], out)
    with caplog.at_level(logging.WARNING, logger="callbacks.evaluation.clustering_eval"):
        results = train(cfg)
    history = results["clustering"]["history"]
    assert len(history) == 2  # both evaluations ran
    for entry in history + [results["clustering"]["before"]]:
        for name in ("silhouette", "calinski_harabasz", "davies_bouldin", "dunn"):
            assert entry[f"kmeans_{name}"] is None  # 2 clusters of 2 texts: undefined, not a number
        assert entry["kmeans_size_entropy"] == pytest.approx(1.0)  # two clusters of one text each
    saved = json.loads((out / "results.json").read_text())  # strict JSON: null, never NaN
    assert saved["clustering"]["final"]["kmeans_silhouette"] is None
    told = [r.getMessage() for r in caplog.records if "reported as null" in r.getMessage()]
    assert len(told) == 1 and "2 clusters among 2 texts" in told[0], told
    predictions = pd.read_csv(out / "predictions.csv")  # the csv module refuses a 20,000-word field
    assert len(predictions) == 2 and set(predictions["kmeans_cluster"]) == {0, 1}
    assert predictions["text"].str.len().max() == (len(LONG_TEXT) if kind == "long" else 36)


def test_criteria_are_null_with_a_reason_where_undefined():
    from evaluation.clustering.label_free import label_free_report

    points = np.array([[0.0, 1.0], [1.0, 0.0]])
    scores, reasons = label_free_report(points, np.array([0, 1]), 2)
    assert scores["silhouette"] is None and "K <= N - 1" in reasons["silhouette"]
    same = np.ones((4, 3))
    scores, reasons = label_free_report(same, np.array([0, 0, 1, 1]), 2)
    # torchmetrics says 1.0 and NaN, scikit-learn's Davies-Bouldin 0.0: numbers that mean nothing here
    assert scores["calinski_harabasz"] is None and scores["dunn"] is None and scores["davies_bouldin"] is None
    assert "identical embeddings" in reasons["dunn"] and "share a centroid" in reasons["davies_bouldin"]


@pytest.mark.slow
def test_a_study_file_that_is_not_a_database_stops_the_sweep_with_one_line(toy_corpus, tmp_path):
    pytest.importorskip("optuna", reason="the `sweep` extra (Optuna)")
    from tests.helpers.sweeps import run_cli
    from tests.run.test_sweeps import toy_cli

    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "optuna.db").write_text("these are notes, not a database\n")
    proc = run_cli(["hparams_search=sccl_optuna", *toy_cli(toy_corpus), "hydra.sweeper.n_trials=1",
                    f"hydra.sweep.dir={sweep}"], timeout=300)
    assert proc.returncode == USER_ERROR_EXIT_CODE, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert "Traceback" not in proc.stderr and len(lines) == 1, proc.stderr[-2000:]
    assert str(sweep / "optuna.db") in lines[0] and "move the file away" in lines[0]
    assert "hydra.sweeper.storage" in lines[0]


def test_study_storage_checks(tmp_path):
    pytest.importorskip("optuna")
    import sqlite3

    from hydra_plugins.resumable_optuna.study_storage import StudyStorageError, check_sqlite_file

    check_sqlite_file(tmp_path / "absent.db")
    (tmp_path / "empty.db").write_bytes(b"")  # SQLite makes an empty file a database
    check_sqlite_file(tmp_path / "empty.db")
    sqlite3.connect(tmp_path / "real.db").execute("create table t(x)").connection.commit()
    check_sqlite_file(tmp_path / "real.db")
    (tmp_path / "folder.db").mkdir()
    for bad in ("folder.db",):
        with pytest.raises(StudyStorageError, match="folder"):
            check_sqlite_file(tmp_path / bad)
    (tmp_path / "half.db").write_bytes(b"SQLite form")  # a copy cut short
    with pytest.raises(StudyStorageError, match="not an SQLite database"):
        check_sqlite_file(tmp_path / "half.db")


def test_choose_k_with_a_reversed_range_names_the_number_of_texts(tmp_path):
    texts = tmp_path / "five.txt"
    texts.write_text("a cat\na dog\na stock\na bond\na goal\n")
    proc = subprocess.run([sys.executable, "-m", "ctclust.commands.choose_k", "--input", str(texts),
                           "--model", "tiny",
                           "--k", "20:2"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == USER_ERROR_EXIT_CODE, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "None" not in proc.stderr
    assert "N = 5 texts" in proc.stderr and "2:4" in proc.stderr, proc.stderr


@pytest.mark.parametrize("max_length", ["0", "129"])
def test_choose_k_max_length_beyond_the_backbone_is_one_line(tmp_path, capsys, max_length):
    from ctclust.commands.choose_k import main

    texts = tmp_path / "five.txt"
    texts.write_text("a cat\na dog\na stock\na bond\na goal\n")
    with pytest.raises(SystemExit) as stopped:
        main(["--input", str(texts), "--model", "tiny", "--k", "2:3", "--max-length", max_length])
    err = capsys.readouterr().err
    assert stopped.value.code == USER_ERROR_EXIT_CODE and "Traceback" not in err
    assert len([line for line in err.splitlines() if line.startswith("error:")]) == 1
    assert f"--max-length {max_length}" in err and "1 to 128 tokens" in err  # the tiny backbone's positions
