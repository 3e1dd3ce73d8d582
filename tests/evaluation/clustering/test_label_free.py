"""Clustering without labels: the criteria (evaluation/clustering/label_free.py), choose_k, num_clusters=auto,
label-free
selection, objective and early stopping."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from sklearn.metrics import calinski_harabasz_score, davies_bouldin_score

from evaluation.clustering.choose_k import choose_k, parse_k, recommend
from evaluation.clustering.label_free import (
    changed_share,
    label_free_report,
    silhouette_cosine,
    size_entropy,
    stable_step,
)
from tests.helpers.speed import KMEANS
from textcore.errors import ConfigError


def blobs(k=3, per=20, dim=8, spread=0.05, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, dim)) * 3
    points = np.concatenate([c + spread * rng.normal(size=(per, dim)) for c in centres])
    return points.astype(np.float32), np.repeat(np.arange(k), per)


def naive_cosine_silhouette(x, labels):
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    dist = 1 - unit @ unit.T
    values = []
    for i in range(len(x)):
        own = [dist[i, j] for j in range(len(x)) if labels[j] == labels[i] and j != i]
        if not own:
            values.append(0.0)
            continue
        a = sum(own) / len(own)
        b = min(np.mean([dist[i, j] for j in range(len(x)) if labels[j] == c]) for c in set(labels) if c != labels[i])
        values.append((b - a) / max(a, b))
    return float(np.mean(values))


def naive_dunn(x, labels):
    clusters = sorted(set(labels))
    centres = {c: x[labels == c].mean(0) for c in clusters}
    inter = min(np.linalg.norm(centres[a] - centres[b]) for a in clusters for b in clusters if a < b)
    intra = max(np.linalg.norm(p - centres[c]) for c in clusters for p in x[labels == c])
    return inter / intra


def test_criteria_against_hand_written_loops_and_sklearn():
    x, y = blobs(per=7)
    y = y.copy()
    y[0] = 1  # one point in the wrong cluster, so nothing is trivially perfect
    scores = label_free_report(x, y, 3)[0]
    assert scores["silhouette"] == pytest.approx(naive_cosine_silhouette(x, y), abs=1e-5)
    assert scores["calinski_harabasz"] == pytest.approx(calinski_harabasz_score(x, y), rel=1e-5)
    assert scores["davies_bouldin"] == pytest.approx(davies_bouldin_score(x, y), rel=1e-5)
    assert scores["dunn"] == pytest.approx(naive_dunn(x.astype(np.float64), y), rel=1e-5)
    assert "changed" not in scores


def naive_davies_bouldin(x, labels):
    clusters = sorted(set(labels))
    centre = {c: x[labels == c].mean(0) for c in clusters}
    spread = {c: np.mean([np.linalg.norm(p - centre[c]) for p in x[labels == c]]) for c in clusters}
    return np.mean([max((spread[a] + spread[b]) / np.linalg.norm(centre[a] - centre[b]) for b in clusters if b != a)
                    for a in clusters])


def test_davies_bouldin_holds_beyond_25_clusters():
    """torchmetrics's score blows up from 26 clusters on (torch.cdist's matrix-product path); ours must not."""
    from evaluation.clustering.label_free import davies_bouldin

    rng = np.random.default_rng(0)
    k = 40
    x = (rng.normal(size=(k, 16)) * 3)[np.repeat(np.arange(k), 6)] + rng.normal(size=(6 * k, 16))
    y = np.repeat(np.arange(k), 6)
    expected = naive_davies_bouldin(x.astype(np.float64), y)
    assert davies_bouldin(x, y) == pytest.approx(expected, rel=1e-9)
    assert davies_bouldin(x, y) == pytest.approx(davies_bouldin_score(x, y), rel=1e-9)
    assert label_free_report(x.astype(np.float32), y, k)[0]["davies_bouldin"] == pytest.approx(expected, rel=1e-5)


def test_size_entropy_and_changed_share_by_hand():
    assert size_entropy(np.array([0, 0, 1, 1]), 2) == pytest.approx(1.0)
    expected = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25)) / math.log(2)
    assert size_entropy(np.array([0, 0, 0, 1]), 2) == pytest.approx(expected)
    assert size_entropy(np.array([0, 0, 0, 0]), 4) == pytest.approx(0.0)
    # renumbered clusters are the same partition; one text moved is 1/N
    assert changed_share(np.array([0, 0, 1, 1, 2]), np.array([2, 2, 0, 0, 1])) == pytest.approx(0.0)
    assert changed_share(np.array([0, 0, 1, 1, 2]), np.array([2, 2, 0, 1, 1])) == pytest.approx(0.2)


def test_silhouette_samples_large_sets_and_is_nan_for_one_cluster():
    x, y = blobs(per=50)
    assert silhouette_cosine(x, y, sample=60, seed=1) == pytest.approx(silhouette_cosine(x, y, sample=60, seed=1))
    assert silhouette_cosine(x, y, sample=60, seed=1) != silhouette_cosine(x, y, sample=60, seed=2)
    assert math.isnan(silhouette_cosine(x, np.zeros(len(x), dtype=int)))


def test_stable_step_needs_consecutive_evaluations():
    history = [{"kmeans_changed": v} for v in (0.3, 0.005, 0.2, 0.004, 0.003, 0.001)]
    assert stable_step(history, "kmeans_changed", 0.01, 2) == 4
    assert stable_step(history, "kmeans_changed", 0.01, 4) is None
    assert stable_step(history[:1] + [{}], "kmeans_changed", 0.01, 1) is None


def test_parse_k_and_recommend_rule():
    assert parse_k("2:6") == [2, 3, 4, 5, 6] and parse_k("2:10:4") == [2, 6, 10] and parse_k("8,4,1") == [4, 8]
    assert parse_k("2:20", n_texts=5) == [2, 3, 4]
    for bad in ("2-6", "a:b", "2:10:0", "1"):
        with pytest.raises(ConfigError):
            parse_k(bad)
    rows = [{"k": 2, "silhouette": 0.1, "davies_bouldin": 2.0}, {"k": 3, "silhouette": 0.5, "davies_bouldin": 1.0},
            {"k": 4, "silhouette": 0.5, "davies_bouldin": 0.5}]
    assert recommend(rows, "silhouette")["k"] == 3  # tie: the smaller K
    assert recommend(rows, "davies_bouldin")["k"] == 4


def test_parse_k_joins_ranges_and_ks_with_commas():
    assert parse_k("2:4,10:20:5,7") == [2, 3, 4, 7, 10, 15, 20]
    assert parse_k("2:60,65:200:5")[-3:] == [190, 195, 200] and len(parse_k("2:60,65:200:5")) == 59 + 28
    for bad in ("2:4,x", "2:4,10:20:0", "2:4,1:2:3:4"):
        with pytest.raises(ConfigError, match="joined by commas"):
            parse_k(bad)


@pytest.mark.slow  # UMAP's first call compiles numba code
def test_choose_k_in_a_umap_scans_its_coordinates():
    from textcore.cluster_space import SpaceSettings

    rng = np.random.default_rng(0)
    centres = rng.normal(size=(5, 24)) * 3
    x = np.concatenate([c + rng.normal(scale=0.3, size=(60, 24)) for c in centres]).astype(np.float32)
    space = SpaceSettings(space="umap", n_neighbors=10, n_components=3)
    result = choose_k(x, "2:9", seeds=2, silhouette_sample=1000, hdbscan_min_cluster_size=10, kmeans_backend=KMEANS,
                      space=space, seed=0)
    assert result["recommended"]["k"] == 5
    assert result["space"]["space"] == "umap" and result["space"]["n_components"] == 3
    again = choose_k(x, "2:9", seeds=2, silhouette_sample=1000, kmeans_backend=KMEANS, space=space, seed=0)
    assert [r["silhouette"] for r in again["rows"]] == [r["silhouette"] for r in result["rows"]]  # seeded
    raw = choose_k(x, "2:9", seeds=2, silhouette_sample=1000, kmeans_backend=KMEANS)
    assert raw["space"] == {"space": "embeddings"}
    assert [r["silhouette"] for r in raw["rows"]] != [r["silhouette"] for r in result["rows"]]


def test_choose_k_finds_well_separated_blobs():
    x, _ = blobs(k=4, per=25, spread=0.02)
    result = choose_k(x, "2:8", seeds=3, silhouette_sample=1000, hdbscan_min_cluster_size=5, kmeans_backend=KMEANS)
    assert result["recommended"]["k"] == 4
    assert [r["k"] for r in result["rows"]] == list(range(2, 9))
    assert result["rows"][2]["stability"] == pytest.approx(1.0)
    assert result["hdbscan"]["clusters"] == 4


def test_choose_k_cli_on_a_file_without_labels(tmp_path):
    from ctclust.commands.choose_k import main

    texts = [f"{w} {i}" for i in range(10) for w in ("football match goal", "pasta tomato sauce", "stock market")]
    (tmp_path / "mine.txt").write_text("\n".join(texts) + "\n")
    result = main(["--input", str(tmp_path / "mine.txt"), "--model", "tiny", "--k", "2:5", "--kmeans-runs", "2",
                   "--output", str(tmp_path / "ck")])
    assert result["recommended"]["k"] in range(2, 6)
    assert {p.name for p in (tmp_path / "ck").iterdir()} == {"choose_k.json", "choose_k.md", "choose_k.png"}
    assert "Recommended K" in (tmp_path / "ck" / "choose_k.md").read_text()
    with pytest.raises(SystemExit):
        main(["--input", str(tmp_path / "mine.txt"), "--k", "2-5"])


def test_choose_k_cli_on_a_run_folder_reads_its_embeddings(tmp_path, capsys):
    from ctclust.commands.choose_k import main
    from textcore.errors import USER_ERROR_EXIT_CODE

    x, _ = blobs(k=3, per=20, spread=0.02)
    (tmp_path / "run" / "embeddings").mkdir(parents=True)
    np.save(tmp_path / "run" / "embeddings" / "after.npy", x.astype(np.float16))
    result = main(["--run", str(tmp_path / "run"), "--k", "2:5", "--kmeans-runs", "2"])
    assert result["recommended"]["k"] == 3 and (tmp_path / "run" / "choose_k" / "choose_k.json").is_file()
    for wrong, message in ((["--run", str(tmp_path / "run" / "embeddings" / "after.npy")], "is not a folder"),
                           (["--input", str(tmp_path / "run")], "a run folder goes with --run")):
        with pytest.raises(SystemExit) as stop:
            main([*wrong, "--k", "2:5"])
        assert stop.value.code == USER_ERROR_EXIT_CODE and message in capsys.readouterr().err
    with pytest.raises(SystemExit):  # one source, not both
        main(["--run", str(tmp_path / "run"), "--input", str(tmp_path / "x.txt")])


def unlabelled_run(tmp_path, extra):
    from ctclust.training.train import train
    from tests.helpers import compose_config

    texts = [f"{w} {i}" for i in range(12) for w in ("football match goal", "pasta tomato sauce", "stock market fell")]
    (tmp_path / "mine.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    out = tmp_path / "run"
    results = train(compose_config(["backbone=tiny", "dataset=csv", f"data_dir={tmp_path}", "dataset.file=mine.jsonl",
                                    "batch_size=8", "trainer.enable_progress_bar=false", "~callbacks.progress",
                                    "print_table=false", "callbacks.report.plots=false",
                                    "method.callbacks.centroid_init.n_init=2",
                                    "dataset.callbacks.clustering_eval.kmeans_n_init=2"] + extra, out))
    return results, out


def test_auto_k_early_stop_label_free_selection_and_objective_in_one_unlabelled_run(tmp_path):
    results, out = unlabelled_run(tmp_path, [
        "dataset.num_clusters=auto", "choose_k.k=2:6", "choose_k.kmeans_runs=2", "trainer.max_steps=8",
        "dataset.callbacks.clustering_eval.every_n_steps=1",
        "dataset.callbacks.clustering_stop.when_changed_below=0.99",
        "dataset.callbacks.clustering_stop.patience=2"])
    choice = results["num_clusters_choice"]
    saved = json.loads((out / "choose_k" / "choose_k.json").read_text())
    assert choice["k"] == saved["recommended"]["k"] and choice["rule"] == "silhouette"
    clustering = results["clustering"]
    # every evaluation changes fewer than 99 % of assignments: two evaluations, then the run stops
    assert results["steps"] == 2 and clustering["stopped_early"]["step"] == 2
    first = clustering["history"][0]
    assert {"kmeans_silhouette", "kmeans_davies_bouldin", "kmeans_calinski_harabasz", "kmeans_dunn",
            "kmeans_size_entropy", "kmeans_changed"} <= set(first)
    assert not any(k.endswith("_acc") for k in first)
    assert clustering["best_selected_with_labels"] is False and clustering["best_monitor"] == "kmeans_silhouette"
    assert results["objective"]["name"] == "clustering.final.kmeans_silhouette"
    assert "no labels" in results["objective"]["note"]
    predictions = (out / "predictions.csv").read_text().splitlines()
    assert len({line.split(",")[-1] for line in predictions[1:]}) <= choice["k"]


def test_label_free_monitor_and_objective_shorthand(tmp_path):
    results, _ = unlabelled_run(tmp_path, [
        "dataset.num_clusters=3", "trainer.max_steps=4", "dataset.callbacks.clustering_eval.every_n_steps=2",
        "dataset.callbacks.clustering_eval.monitor=kmeans_davies_bouldin", "objective=davies_bouldin"])
    history = results["clustering"]["history"]
    best = min(history, key=lambda h: h["kmeans_davies_bouldin"])
    assert results["clustering"]["best_step"] == best["step"]
    assert results["objective"]["name"] == "clustering.final.kmeans_davies_bouldin"
    assert results["objective"]["direction"] == "minimize"
    assert results["objective"]["value"] == pytest.approx(results["clustering"]["final"]["kmeans_davies_bouldin"])


def test_evaluator_arguments_are_checked_and_previous_assignments_survive_a_checkpoint():
    from callbacks.evaluation.clustering_eval import ClusteringEvaluator, monitor_direction

    assert monitor_direction("head_davies_bouldin") == "min" and monitor_direction("kmeans_acc") == "max"
    for bad in ({"monitor": "kmeans_size_entropy"}, {"monitor": "kmeans_accuracy"}):
        with pytest.raises(ConfigError):
            ClusteringEvaluator(**bad, kmeans_backend=KMEANS, kmeans_sample=0, sample=0)
    evaluator = ClusteringEvaluator(kmeans_backend=KMEANS, kmeans_sample=0, sample=0)
    evaluator.previous = {"kmeans": np.array([0, 2, 1])}
    evaluator.record_stop(5, "x")
    restored = ClusteringEvaluator(kmeans_backend=KMEANS, kmeans_sample=0, sample=0)
    restored.load_state_dict(evaluator.state_dict())
    assert restored.previous["kmeans"].tolist() == [0, 2, 1] and restored.stopped_early == {"step": 5, "rule": "x"}
    assert restored.summary()["stopped_early"] == {"step": 5, "rule": "x"}


def test_the_stopping_settings_are_checked_and_their_old_keys_name_the_new_ones(tmp_path):
    from callbacks.evaluation.clustering_eval import ClusteringEvaluator
    from callbacks.evaluation.clustering_stop import ClusteringEarlyStopping

    for bad in ({"when_changed_below": 1.5}, {"when_changed_below": "0.1"}, {"patience": 0},
                {"key": "kmeans_silhouette"}):
        with pytest.raises(ConfigError):
            ClusteringEarlyStopping(**bad)
    for old, new in (("stop_when_changed_below", 0.02), ("stop_patience", 2), ("stop_key", "head_changed")):
        with pytest.raises(ConfigError, match=rf"clustering_eval.{old}=.*set dataset.callbacks.clustering_stop\."):
            ClusteringEvaluator(**{old: new}, kmeans_backend=KMEANS, kmeans_sample=0, sample=0)
    # the documented old command line composes and then stops with that message, before any training
    from ctclust.training.builders import instantiate_callbacks
    from tests.helpers import compose_config

    cfg = compose_config(["dataset.callbacks.clustering_eval.stop_when_changed_below=0.02"], tmp_path)
    from textcore.errors import find_user_error

    with pytest.raises(Exception) as raised:  # Hydra wraps it; run.py reports the ConfigError inside
        instantiate_callbacks(cfg)
    assert "set dataset.callbacks.clustering_stop.when_changed_below=0.02" in str(find_user_error(raised.value))


def test_the_stopping_rule_closes_the_first_run_of_patience_stable_evaluations():
    from callbacks.evaluation.clustering_stop import stops_now

    changed = [0.5, 0.03, 0.01, 0.2, 0.01, 0.01, 0.01]
    history = [{"step": i, "kmeans_changed": c} for i, c in enumerate(changed)]
    decisions = [stops_now(history[:n], "kmeans_changed", 0.02, 2) for n in range(1, len(history) + 1)]
    # below 0.02: evaluations 2, 4, 5, 6; the first two in a row are 4 and 5
    assert decisions == [False, False, False, False, False, True, False]
    assert not stops_now([{"step": 0, "kmeans_changed": None}], "kmeans_changed", 0.5, 1)


def test_the_stopping_and_writing_callbacks_must_follow_the_evaluator():
    from types import SimpleNamespace

    from callbacks.evaluation.clustering_eval import ClusteringEvaluator
    from callbacks.evaluation.clustering_predictions import ClusteringPredictionWriter
    from callbacks.evaluation.clustering_stop import ClusteringEarlyStopping

    evaluator = ClusteringEvaluator(kmeans_backend=KMEANS, kmeans_sample=0, sample=0)
    stop, writer = ClusteringEarlyStopping(when_changed_below=0.1), ClusteringPredictionWriter()
    stop.setup(SimpleNamespace(callbacks=[evaluator, writer, stop]), None, "fit")
    with pytest.raises(ConfigError, match="clustering_predictions comes before"):
        writer.setup(SimpleNamespace(callbacks=[writer, evaluator]), None, "fit")
    with pytest.raises(ConfigError, match="this run has none"):
        stop.setup(SimpleNamespace(callbacks=[stop]), None, "fit")
    without_criteria = ClusteringEvaluator(kmeans_backend=KMEANS, kmeans_sample=0, sample=0, label_free=False)
    with pytest.raises(ConfigError, match="label_free=true"):
        stop.setup(SimpleNamespace(callbacks=[without_criteria, stop]), None, "fit")
    ClusteringEarlyStopping().setup(SimpleNamespace(callbacks=[]), None, "fit")  # off: needs nothing
    writer.setup(SimpleNamespace(callbacks=[writer]), None, "fit")  # no evaluator: nothing to write


def test_selection_report_reads_hand_made_runs(tmp_path):
    from tests.helpers import load_script

    report = load_script("label_free_report")
    history = [
        {"step": 20, "kmeans_acc": 0.50, "kmeans_silhouette": 0.10, "kmeans_calinski_harabasz": 9.0,
         "kmeans_davies_bouldin": 3.0, "kmeans_dunn": 0.2, "kmeans_changed": 0.30},
        {"step": 40, "kmeans_acc": 0.70, "kmeans_silhouette": 0.05, "kmeans_calinski_harabasz": 8.0,
         "kmeans_davies_bouldin": 2.0, "kmeans_dunn": 0.1, "kmeans_changed": 0.005},
        {"step": 60, "kmeans_acc": 0.60, "kmeans_silhouette": 0.20, "kmeans_calinski_harabasz": 7.0,
         "kmeans_davies_bouldin": 4.0, "kmeans_dunn": 0.3, "kmeans_changed": 0.004},
    ]
    (tmp_path / "0").mkdir()
    (tmp_path / "0" / "results.json").write_text(json.dumps(
        {"dataset": "toy", "steps": 60, "clustering": {"history": history}}))
    rows = report.selection_rows(tmp_path)
    assert len(rows) == 1
    row = rows[0]
    assert row["oracle"] == pytest.approx(70.0) and row["oracle_step"] == 40 and row["last"] == pytest.approx(60.0)
    assert row["silhouette"] == (60, pytest.approx(60.0)) and row["calinski_harabasz"] == (20, pytest.approx(50.0))
    assert row["davies_bouldin"] == (40, pytest.approx(70.0))
    assert row["stop"] == (None, None)  # two evaluations under 1 %, the rule wants three
    table = report.selection_table(rows)
    assert "| toy | 60.00 | 70.00 (40) | 60.00 (60) | 50.00 (20) | 70.00 (40) | 60.00 (60) | never |" in table


def test_the_blocked_scores_equal_torchmetrics_and_the_plain_davies_bouldin(monkeypatch):
    """Calinski-Harabasz and Dunn as torchmetrics computes them, Davies-Bouldin as davies_bouldin does, from two
    passes over blocks of rows (a block of 7 rows here, so that clusters straddle blocks), on float32 input."""
    import torch
    from torchmetrics.functional.clustering import calinski_harabasz_score as tm_calinski
    from torchmetrics.functional.clustering import dunn_index

    import evaluation.clustering.label_free as label_free

    rng = np.random.default_rng(0)
    x = (rng.normal(size=(203, 5)) + np.repeat(rng.normal(scale=4, size=(6, 5)), [40, 30, 33, 50, 20, 30], axis=0))
    x = x.astype(np.float32)
    labels = np.repeat([3, 9, 4, 0, 7, 1], [40, 30, 33, 50, 20, 30])  # ids with gaps, not 0..K-1
    monkeypatch.setattr(label_free, "BLOCK_ROWS", 7)
    scores, reasons = label_free._spread_scores(x, labels)
    x64, inverse = torch.as_tensor(x, dtype=torch.float64), torch.as_tensor(np.unique(labels, return_inverse=True)[1])
    assert reasons == {}
    # torchmetrics sums the dispersions in float32 (7 digits); scikit-learn's float64 value agrees to 10
    assert scores["calinski_harabasz"] == pytest.approx(float(tm_calinski(x64, inverse)), rel=1e-6)
    assert scores["calinski_harabasz"] == pytest.approx(calinski_harabasz_score(x.astype(np.float64), labels),
                                                        rel=1e-10)
    assert scores["dunn"] == pytest.approx(float(dunn_index(x64, inverse)), rel=1e-10)
    assert scores["davies_bouldin"] == pytest.approx(label_free.davies_bouldin(x, labels), rel=1e-10)


def test_changed_compares_the_rows_the_previous_evaluation_saw():
    """The last evaluation of a large corpus has every text; the earlier ones had the rows 1, 3, 5. Their clusters
    [0, 1, 1] against today's [0, 1, 2] on those rows: two of three agree after matching ids, 1/3 changed."""
    x = np.random.default_rng(0).normal(size=(6, 2))
    assignments = np.array([0, 0, 1, 1, 2, 2])
    scores, _ = label_free_report(x, assignments, 3, previous=np.array([0, 1, 1]), previous_rows=np.array([1, 3, 5]))
    assert scores["changed"] == pytest.approx(1 / 3)
    assert "changed" not in label_free_report(x, assignments, 3, previous=np.array([0, 1, 1]))[0]  # rows differ
