"""End-of-run report, plots and prediction on new texts, on a trained tiny-backbone demo run (smoke tier)."""
import csv
import json

import numpy as np
import pandas as pd
import pytest

from ctclust.commands import describe, plots
from ctclust.commands import predict as predict_command
from ctclust.training.train import train
from evaluation.model_io import predict
from tests.helpers import compose_config, toy_overrides
from tests.helpers.data_files import write_csv

DEMO_OVERRIDES = [
    "backbone=tiny",
    "batch_size=32",
    "trainer.max_steps=4",
    "trainer.enable_progress_bar=false",
    "trainer.enable_model_summary=false",
    "trainer.log_every_n_steps=1",
    "~callbacks.progress",
    "dataset.callbacks.clustering_eval.every_n_steps=0",  # before and after training only
    "dataset.callbacks.clustering_eval.kmeans_n_init=2",
    "method.callbacks.centroid_init.n_init=2",
    "callbacks.report.projection=pca",  # t-SNE is covered by a unit test; keep the smoke tier fast
    "print_table=false",
]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """SCCL on the embedded demo corpus (720 texts, 8 topics) with the tiny backbone, 4 steps."""
    out = tmp_path_factory.mktemp("demo") / "run"
    results = train(compose_config(DEMO_OVERRIDES, out))
    return out, results


def test_run_leaves_descriptions_plots_and_centroids(demo_run):
    out, results = demo_run
    assert results["report"]["errors"] == []
    for name in ("clusters.md", "clusters.json", "kmeans_centroids.npy", "kmeans_centroids.json",
                 "embeddings/before.npy", "embeddings/after.npy", "embeddings/before_kmeans.npy",
                 "plots/embeddings_pca.png", "plots/confusion.png", "plots/training_curves.png"):
        assert (out / name).is_file(), name
    for png in (out / "plots").glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    report = json.loads((out / "clusters.json").read_text())
    assert report["primary"] == "head" and set(report["partitions"]) == {"head", "kmeans"}
    predictions = pd.read_csv(out / "predictions.csv")
    head = report["partitions"]["head"]
    assert len(head) == 8 and sum(c["size"] for c in head) == 720
    assert [c["size"] for c in head] == np.bincount(predictions["head_cluster"], minlength=8).tolist()
    assert all(0 < c["purity"] <= 1 for c in head if c["size"])
    after = np.load(out / "embeddings/after.npy")
    before = np.load(out / "embeddings/before.npy")
    assert after.dtype == np.float16 and after.shape == before.shape == (720, 32)
    assert not np.array_equal(after, before)  # trained in between
    centroids = np.load(out / "kmeans_centroids.npy")
    assert centroids.shape == (8, 32)
    # the saved centroids reproduce the run's final KMeans clusters
    cluster, _, _ = predict.nearest_centroid(after.astype(np.float32), centroids)
    assert (cluster == predictions["kmeans_cluster"].to_numpy()).mean() > 0.99
    md = (out / "clusters.md").read_text()
    assert md.count("## Cluster ") == 8 and "| cluster | size | majority label | purity | top words |" in md


def test_describe_and_plots_cli_redo_the_files(demo_run, tmp_path, capsys):
    out, _ = demo_run
    in_run = (out / "clusters.json").read_text()
    (out / "clusters.md").unlink()
    describe.main(["--run", str(out)])
    assert (out / "clusters.json").read_text() == in_run  # the CLI redoes what the run wrote
    describe.main(["--run", str(out), "--top-words", "3"])
    report = json.loads((out / "clusters.json").read_text())
    assert all(len(c["top_words"]) <= 3 for c in report["partitions"]["head"])
    assert (out / "clusters.md").is_file()
    paths = plots.main(["--run", str(out), "--projection", "pca", "--partition", "kmeans", "--max-points", "100"])
    assert {p.name for p in paths} == {"embeddings_pca.png", "confusion.png", "training_curves.png"}
    with pytest.raises(SystemExit) as exit_info:
        describe.main(["--run", str(tmp_path)])
    assert exit_info.value.code == 2 and "has no predictions.csv" in capsys.readouterr().err


def test_predict_assigns_texts_of_a_training_cluster_back_to_it(demo_run, tmp_path):
    out, _ = demo_run
    predictions = pd.read_csv(out / "predictions.csv")
    largest = int(predictions["head_cluster"].value_counts().idxmax())
    texts = predictions.loc[predictions["head_cluster"] == largest, "text"].head(25).tolist()
    new = write_csv(tmp_path / "new.csv", ["id", "text"], [[i, t] for i, t in enumerate(texts)])
    output = tmp_path / "assigned.csv"
    predict_command.main(["--run", str(out), "--input", str(new), "--output", str(output)])
    with open(output) as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 25 and {r["assigned_by"] for r in rows} == {"head"}
    assert {int(r["cluster"]) for r in rows} == {largest}
    assert all(1 / 8 <= float(r["confidence"]) <= 1 and 0 <= float(r["margin"]) <= 1 for r in rows)
    words = json.loads((out / "clusters.json").read_text())["partitions"]["head"][largest]["top_words"]
    assert rows[0]["top_words"] == ", ".join(w for w, _ in words[:5])

    # the saved KMeans centroids: texts of a KMeans cluster go back to it, cosine in [-1, 1]
    kmeans = int(predictions["kmeans_cluster"].value_counts().idxmax())
    texts = predictions.loc[predictions["kmeans_cluster"] == kmeans, "text"].head(25).tolist()
    write_csv(new, ["text"], [[t] for t in texts])
    rows = predict.predict(out, new, assign="kmeans")
    assert {r["cluster"] for r in rows} == {kmeans}
    assert all(-1 <= r["confidence"] <= 1 and 0 <= r["margin"] <= 1 for r in rows)


def test_predict_from_a_sentence_transformers_export(demo_run, tmp_path):
    from evaluation.model_io.export import export

    out, _ = demo_run
    info = export(out, tmp_path / "exported")
    st_dir = tmp_path / "exported" / "sentence-transformers"
    assert (st_dir / "kmeans_centroids.npy").is_file() and len(info["cluster_files"]) == 3
    predictions = pd.read_csv(out / "predictions.csv").head(60)
    new = write_csv(tmp_path / "new.csv", ["body"], [[t] for t in predictions["text"]])
    rows = predict.predict(st_dir, new, text_column="body")
    assert {r["assigned_by"] for r in rows} == {"kmeans"}
    agree = np.mean([r["cluster"] == k for r, k in zip(rows, predictions["kmeans_cluster"])])
    assert agree > 0.95


def test_predict_bad_input_gets_one_line_errors(demo_run, tmp_path, capsys):
    out, _ = demo_run
    cases = {
        "missing": (tmp_path / "nope.csv", "does not exist"),
        "column": (write_csv(tmp_path / "c.csv", ["body"], [["a text"]]), "Column 'text' (--text-column)"),
        "empty": (tmp_path / "empty.csv", "is empty"),
        "header": (write_csv(tmp_path / "h.csv", ["text"], []), "has a header but no rows"),
        "encoding": (tmp_path / "latin.csv", "--encoding"),
    }
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "latin.csv").write_bytes("text\ncaf\xe9 au lait\n".encode("latin-1"))
    for name, (path, message) in cases.items():
        with pytest.raises(SystemExit) as exit_info:
            predict_command.main(["--run", str(out), "--input", str(path), "--output", str(tmp_path / "o.csv")])
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and message in err and "Traceback" not in err, name
    # the encoding option reads it
    rows = predict.predict(out, tmp_path / "latin.csv", encoding="latin-1")
    assert rows[0]["text"] == "caf\xe9 au lait" and rows[0]["cluster"] != ""


def test_predict_keeps_rows_without_text(demo_run, tmp_path):
    out, _ = demo_run
    new = write_csv(tmp_path / "gaps.csv", ["text"], [["first text"], [""], ["third text"]])
    with pytest.warns(UserWarning, match=r"1 row\(s\) without text \(file lines \[3\]"):
        rows = predict.predict(out, new)
    assert [r["row"] for r in rows] == [0, 1, 2] and rows[1]["cluster"] == "" and rows[2]["cluster"] != ""


def test_tensorboard_logger_gets_the_plots_as_images(toy_corpus, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "run"
    train(compose_config(toy_overrides(toy_corpus, steps=2) + ["logger=tensorboard", "callbacks.report.plots=true",
                                                                "callbacks.report.projection=pca"], out))
    events = EventAccumulator(str(out / "tensorboard"), size_guidance={"images": 0}).Reload()
    assert {"plots/embeddings_pca", "plots/confusion", "plots/training_curves"} <= set(events.Tags()["images"])


def test_resumed_run_keeps_the_embeddings_from_before_training(toy_corpus, tmp_path):
    first = tmp_path / "first"
    train(compose_config(toy_overrides(toy_corpus, steps=2), first))
    ckpt = first / "checkpoints" / "last.ckpt"
    second = tmp_path / "second"
    train(compose_config(toy_overrides(toy_corpus, steps=4) + [f"ckpt_path={ckpt}"], second))
    assert np.array_equal(np.load(second / "embeddings/before.npy"), np.load(first / "embeddings/before.npy"))
    assert (second / "embeddings/before_kmeans.npy").is_file() and (second / "clusters.md").is_file()


def test_sts_run_without_clusters_plots_its_curves_only(tmp_path):
    """A run without a clustering evaluator (here: SCCL with it removed) writes curves, no descriptions."""
    rows = [[f"topic {i % 3} text number {i}", str(i % 3)] for i in range(24)]
    data = write_csv(tmp_path / "d.csv", ["text", "label"], rows)
    out = tmp_path / "run"
    overrides = [o for o in toy_overrides(data, steps=2)
                 if not any(key in o for key in ("clustering_eval", "aug", "text_column"))]
    results = train(compose_config(overrides + ["dataset.text_column=text", "~dataset.callbacks.clustering_eval",
                                                "callbacks.report.plots=true"], out))
    assert results["report"]["files"] == ["plots/training_curves.png", "report.html"]
    assert not (out / "clusters.md").exists()


def test_wandb_logger_gets_the_plots_as_images(toy_corpus, tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "run"
    train(compose_config(toy_overrides(toy_corpus, steps=2) + ["logger=wandb", "callbacks.report.plots=true",
                                                                "callbacks.report.projection=pca"], out))
    media = {p.name.split("_")[0] for p in out.glob("wandb/offline-run-*/files/media/images/plots/*.png")}
    assert media == {"embeddings", "confusion", "training"}
    assert (out / "csv" / "metrics.csv").is_file()  # added for the curves beside W&B


def test_predict_with_aecl_head_is_independent_of_the_other_new_texts(toy_corpus, tmp_path):
    from tests.helpers.aecl import aecl_toy_overrides

    out = tmp_path / "aecl"
    train(compose_config(aecl_toy_overrides(toy_corpus, e1=1, e2=1, epochs=3), out))
    texts = pd.read_csv(out / "predictions.csv")["text"].tolist()[:12]
    new = write_csv(tmp_path / "new.csv", ["text"], [[t] for t in texts])
    rows = predict.predict(out, new)
    assert {r["assigned_by"] for r in rows} == {"head"}
    assert all(0 < r["confidence"] <= 1 and 0 <= r["margin"] <= 1 for r in rows)
    # the same texts in reverse order, half of them: each keeps its cluster and probability
    write_csv(new, ["text"], [[t] for t in texts[::-2]])
    again = predict.predict(out, new)
    assert [(r["cluster"], r["confidence"]) for r in again] == [(r["cluster"], r["confidence"]) for r in rows[::-2]]


def test_predict_streams_a_file_chunk_by_chunk_with_the_same_output(demo_run, tmp_path, monkeypatch):
    """Chunks of 4 rows (a blank row and a JSON Lines file included) write what one chunk writes, each chunk
    embedded as it is read: a file of millions of texts never sits in memory whole."""
    out, _ = demo_run
    texts = [f"new text number {i} about cooking and planets" for i in range(11)]
    texts[5] = ""
    new = write_csv(tmp_path / "new.csv", ["text"], [[t] for t in texts])
    whole, chunked = tmp_path / "whole.csv", tmp_path / "chunked.csv"
    with pytest.warns(UserWarning, match=r"1 row\(s\) without text \(file lines \[7\]"):
        predict.predict(out, new, output=whole)
    calls = []  # texts assigned per call: one call per chunk
    original = predict._assign

    def counting(model, embeddings, context, use_head):
        calls.append(len(embeddings))
        return original(model, embeddings, context, use_head)

    monkeypatch.setattr(predict, "_assign", counting)
    monkeypatch.setattr(predict, "CHUNK_ROWS", 4)
    with pytest.warns(UserWarning, match=r"file lines \[7\]"):
        summary = predict.predict(out, new, output=chunked)
    assert calls == [4, 3, 3]  # rows 0-3, rows 4-7 (row 5 blank), rows 8-10
    assert chunked.read_text() == whole.read_text()
    assert summary["rows"] == 11 and summary["assigned"] == 10 and sum(summary["per_cluster"].values()) == 10
    jsonl = tmp_path / "new.jsonl"
    jsonl.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts if t))
    predict.predict(out, jsonl, output=tmp_path / "from_jsonl.csv")
    assert calls[-3:] == [4, 4, 2]
