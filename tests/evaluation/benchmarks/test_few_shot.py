"""Few-shot transfer (evaluation/benchmarks/senteval/few_shot.py; PairSupCon Table 6): draws, scores, the table."""
from __future__ import annotations

import numpy as np
import pytest

from evaluation.benchmarks.senteval.few_shot import draw, evaluate_few_shot, few_shot_task


def write_mr(folder, n=30):
    folder.mkdir(parents=True)
    (folder / "rt-polarity.pos").write_text("".join(f"good great film {i}\n" for i in range(n)), encoding="latin-1")
    (folder / "rt-polarity.neg").write_text("".join(f"bad awful film {i}\n" for i in range(n)), encoding="latin-1")


def write_sst(folder):
    folder.mkdir(parents=True)
    for split, n in (("train", 40), ("dev", 6), ("test", 10)):
        rows = [f"{'good nice' if i % 2 else 'bad poor'} movie {i}\t{i % 2}" for i in range(n)]
        (folder / f"sentiment-{split}").write_text("\n".join(rows) + "\n")


def by_sentiment(texts):
    """A perfect encoder: the first coordinate says positive, plus text-dependent noise."""
    rng = np.random.default_rng(0)
    pos = np.array([1.0 if ("good" in t) else -1.0 for t in texts])
    return np.stack([pos, rng.normal(size=len(texts)) * 0.01], axis=1)


def test_draw_takes_k_of_every_class_and_repeats_with_its_seed():
    labels = np.array([0] * 10 + [1] * 10 + [2] * 3)
    idx = draw(labels, 4, np.random.default_rng([0, 1]))
    assert np.bincount(labels[idx]).tolist() == [4, 4, 3]  # a class with fewer gives all it has
    assert idx.tolist() == draw(labels, 4, np.random.default_rng([0, 1])).tolist()
    assert idx.tolist() != draw(labels, 4, np.random.default_rng([0, 2])).tolist()


def test_cv_task_scores_the_examples_not_drawn_and_a_split_task_its_test_split(tmp_path):
    write_mr(tmp_path / "MR")
    r = few_shot_task(by_sentiment, tmp_path / "MR", "MR", k=4, sets=3)
    assert r["acc"] == pytest.approx(100.0) and r["acc_std"] == 0.0 and len(r["accs"]) == 3
    assert (r["n_train"], r["n_test"]) == (8, 52)
    write_sst(tmp_path / "SST" / "binary")
    r = few_shot_task(by_sentiment, tmp_path / "SST" / "binary", "SST2", k=4, sets=2)
    assert (r["n_train"], r["n_test"]) == (8, 10) and r["acc"] == pytest.approx(100.0)


def test_uninformative_embeddings_score_near_chance_with_a_spread(tmp_path):
    write_mr(tmp_path / "MR", n=60)

    def noise(texts):
        return np.random.default_rng(len(texts)).normal(size=(len(texts), 8))

    r = few_shot_task(noise, tmp_path / "MR", "MR", k=8, sets=5)
    assert 30 < r["acc"] < 70 and r["acc_std"] > 0


def test_missing_tasks_are_skipped_and_the_average_covers_the_rest(tmp_path):
    write_mr(tmp_path / "MR")
    result = evaluate_few_shot(by_sentiment, tmp_path, tasks=("MR", "CR"), k=4, sets=2)
    assert "skipped" in result["tasks"]["CR"] and result["avg_over"] == ["MR"]
    assert result["avg"] == pytest.approx(100.0) and "4 examples per class, 2 sampled" in result["protocol"]


def test_cli_table(tmp_path):
    from ctclust.commands.evaluate import main

    write_mr(tmp_path / "senteval" / "MR")
    result = main(["--model", "tiny", "--tasks", "few_shot", "--senteval-dir", str(tmp_path / "senteval"),
                   "--few-shot-k", "4", "--few-shot-sets", "2", "--output", str(tmp_path / "out"), "--name", "tiny"])
    assert result["few_shot"]["tasks"]["MR"]["n_train"] == 8
    text = (tmp_path / "out" / "tiny.md").read_text()
    assert "## Few-shot transfer (PairSupCon Table 6 protocol)" in text and "| MR |" in text
