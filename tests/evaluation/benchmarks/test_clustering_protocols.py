"""Named clustering protocols of evaluation.benchmarks.evaluate_model (PairSupCon's default, ClusterNS Table 6)."""
from __future__ import annotations

import pandas as pd
import pytest

from ctclust.commands.evaluate import main as evaluate_main


def write_agnews(folder):
    folder.mkdir(parents=True, exist_ok=True)
    texts = [f"{topic} " + " ".join(f"w{i}x{j}" for j in range(40)) for i, topic in
             enumerate(["sport", "money", "space", "code"] * 4)]
    pd.DataFrame({"label": [i % 4 for i in range(16)], "text0": texts}).to_csv(folder / "agnews.csv", index=False)
    return folder


def test_clusterns_protocol_uses_the_raw_cls_state_128_tokens_and_one_kmeans(tmp_path):
    data = write_agnews(tmp_path / "data")
    args = ["--model", "tiny", "--tasks", "clustering", "--datasets", "agnews", "--short-text-dir", str(data)]
    ours = evaluate_main(args + ["--output", str(tmp_path / "a"), "--kmeans-runs", "3"])
    theirs = evaluate_main(args + ["--output", str(tmp_path / "b"), "--clustering-protocol", "clusterns"])
    assert (ours["pooling"], ours["clustering"]["max_length"], ours["clustering"]["seeds"]) == ("mean", 32, [0, 1, 2])
    assert ours["clustering"]["protocol"] == "pairsupcon"
    assert theirs["pooling"] == "cls_before_pooler" and theirs["clustering"]["max_length"] == 128
    assert theirs["clustering"]["seeds"] == [0] and theirs["clustering"]["kmeans"]["backend"] == "sklearn"
    text = (tmp_path / "b" / "tiny.md").read_text()
    assert "## Clustering (ClusterNS Table 6 protocol)" in text and "raw [CLS] state, 128 tokens" in text


def test_clustering_max_length_overrides_the_protocols_and_changes_the_embeddings(tmp_path):
    data = write_agnews(tmp_path / "data")  # 41-word texts: 32 and 64 tokens cut them differently
    args = ["--model", "tiny", "--tasks", "clustering", "--datasets", "agnews", "--short-text-dir", str(data),
            "--kmeans-runs", "1", "--embedding-cache", str(tmp_path / "cache")]
    short = evaluate_main(args + ["--output", str(tmp_path / "a")])
    long = evaluate_main(args + ["--output", str(tmp_path / "b"), "--clustering-max-length", "64"])
    assert (short["clustering"]["max_length"], long["clustering"]["max_length"]) == (32, 64)
    assert len(list((tmp_path / "cache").rglob("*.npy"))) == 2  # two different embeddings, not one reused
    with pytest.raises(SystemExit):
        evaluate_main(args + ["--output", str(tmp_path / "c"), "--clustering-max-length", "0"])
