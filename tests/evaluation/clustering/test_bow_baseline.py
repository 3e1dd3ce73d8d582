"""The bag-of-words clustering baselines (evaluation/clustering/bow_baseline.py, --model tfidf / bow)."""
from __future__ import annotations

import numpy as np
import pytest

from ctclust.commands.evaluate import main as evaluate_main
from evaluation.clustering.bow_baseline import features
from evaluation.clustering.metrics import sparse_kmeans_scores

TOPICS = {"sport": ["football goal match", "tennis match point", "football league goal", "match referee goal"],
          "food": ["pasta tomato sauce", "tomato soup recipe", "pasta recipe cheese", "cheese sauce recipe"],
          "space": ["planet orbit moon", "moon telescope orbit", "telescope galaxy planet", "galaxy orbit star"],
          "code": ["python error loop", "loop compiler error", "compiler python bug", "bug python stack"]}


def corpus():
    texts = [t for texts in TOPICS.values() for t in texts]
    labels = [label for label, texts in TOPICS.items() for _ in texts]
    return texts, labels


def test_tfidf_rows_are_l2_normalised_and_fitted_on_the_texts_given():
    texts, _ = corpus()
    x = features("tfidf")(texts)
    assert x.shape[0] == len(texts) and hasattr(x, "tocsr")
    assert np.allclose(np.sqrt(x.multiply(x).sum(axis=1)).A.ravel(), 1.0)
    counts = features("bow")(["the cat sat", "the cat"])
    assert counts.toarray().tolist() == [[1, 1], [1, 0]]  # cat, sat; "the" is a stop word


def test_disjoint_vocabularies_cluster_perfectly():
    texts, labels = corpus()
    scores = sparse_kmeans_scores(features("tfidf")(texts), labels, 4, seeds=(0, 1), n_init=10)
    assert scores["acc"] == pytest.approx(1.0) and scores["nmi"] == pytest.approx(1.0) and scores["acc_std"] == 0


def test_cli_writes_the_baseline_table_and_refuses_other_tasks(tmp_path, capsys):
    texts, labels = corpus()
    (tmp_path / "agnews.csv").write_text("text0,label\n" + "".join(f"{t},{lab}\n" for t, lab in zip(texts, labels)))
    result = evaluate_main(["--model", "tfidf", "--tasks", "clustering", "--datasets", "agnews", "--kmeans-runs", "2",
                            "--short-text-dir", str(tmp_path), "--output", str(tmp_path / "out")])
    agnews = result["clustering"]["datasets"]["agnews"]
    assert agnews["k"] == 4 and agnews["acc"] == pytest.approx(1.0)
    assert "| tfidf | ACC | 100.00 (0.00)" in (tmp_path / "out" / "tfidf.md").read_text()
    with pytest.raises(SystemExit):
        evaluate_main(["--model", "bow", "--tasks", "sts", "--output", str(tmp_path / "out")])
    assert "clustering baseline" in capsys.readouterr().err
