"""evaluation.benchmarks.evaluate_model: datasets from Hydra configs, the Table 1 clustering protocol, comparison."""

import json

import numpy as np
import pytest

from ctclust.commands.evaluate import main
from evaluation.benchmarks.clustering_tasks import clustering_markdown, clustering_set, evaluate_clustering
from evaluation.benchmarks.encoder_evaluation import compare, evaluate_encoder
from tests.helpers.data_files import write_csv
from tests.helpers.speed import KMEANS

# 1-D positions per text: class a at 0,0,0 and one at 10; class b at 10,10,10 and one at 0.
# KMeans (k=2) finds {0} and {10}: each cluster holds 3 of one class and 1 of the other -> ACC 6/8.
POSITIONS = {"a1": 0.0, "a2": 0.0, "a3": 0.0, "a4": 10.0, "b1": 10.0, "b2": 10.0, "b3": 10.0, "b4": 0.0}


def fake_encode(texts):
    return np.array([[POSITIONS[t], 0.0] for t in texts])  # [n, 2]


@pytest.fixture
def fake_benchmarks(tmp_path):
    """Two dataset configs in the project's style (one inheriting csv.yaml) and their CSVs."""
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "csv.yaml").write_text(
        "_target_: some.DataModule\nfile: data.csv\ntext_column: text\nlabel_column: label\nnum_clusters: null\n"
    )
    (conf / "mixed.yaml").write_text(
        "defaults:\n  - csv\nname: mixed\nfile: mixed.csv\ntext_column: text0\nnum_clusters: 2\n"
    )
    (conf / "inferred.yaml").write_text("defaults:\n  - csv\nname: inferred\nfile: inferred.csv\n")  # k from labels
    (conf / "absent.yaml").write_text("defaults:\n  - csv\nname: absent\nfile: not_here.csv\nnum_clusters: 3\n")
    data = tmp_path / "data"
    data.mkdir()
    write_csv(data / "mixed.csv", ["label", "text0", "text1"], [[t[0], t, "aug"] for t in POSITIONS])
    write_csv(data / "inferred.csv", ["label", "text"], [[t[0], t] for t in POSITIONS if t in ("a1", "a2", "b1", "b2")])
    return conf, data


def test_dataset_entries_come_from_the_configs(fake_benchmarks):
    conf, data = fake_benchmarks
    mixed = clustering_set("mixed", data, conf)
    assert (mixed.path, mixed.text_column, mixed.label_column, mixed.num_clusters) == (
        data / "mixed.csv",
        "text0",
        "label",
        2,
    )
    inferred = clustering_set("inferred", data, conf)
    assert inferred.text_column == "text" and inferred.num_clusters is None
    with pytest.raises(FileNotFoundError, match="known datasets"):
        clustering_set("nosuch", data, conf)


def test_project_benchmark_configs_are_readable():
    entry = clustering_set("googlenews_t", "/data")
    assert entry.path.name == "googlenews_t.csv" and entry.text_column == "text0" and entry.num_clusters == 152


def test_clustering_scores_hand_value_and_skips_absent_files(fake_benchmarks):
    conf, data = fake_benchmarks
    sets = [clustering_set(n, data, conf) for n in ("mixed", "inferred", "absent")]
    result = evaluate_clustering(fake_encode, sets, seeds=(0, 1, 2), kmeans_backend=KMEANS)
    mixed = result["datasets"]["mixed"]
    assert mixed["acc"] == pytest.approx(0.75) and mixed["acc_std"] == pytest.approx(0.0)
    assert (mixed["n"], mixed["k"]) == (8, 2)
    inferred = result["datasets"]["inferred"]
    assert inferred["k"] == 2 and inferred["acc"] == pytest.approx(1.0) and inferred["nmi"] == pytest.approx(1.0)
    assert list(result["skipped"]) == ["absent"] and result["avg_over"] == ["mixed", "inferred"]
    assert result["avg"]["acc"] == pytest.approx((0.75 + 1.0) / 2)
    table = clustering_markdown(result, "fake")
    assert "| fake | ACC | 75.00 (0.00) | 100.00 (0.00) | 87.50 |" in table
    assert "Avg. (2 sets)" in table and "absent (" in table and "3 runs" in table


def test_evaluate_encoder_with_a_tiny_encoder_restores_its_token_limit(fake_benchmarks):
    from textcore.encoding.encoder import EncoderSettings, TextEncoder

    conf, data = fake_benchmarks
    encoder = TextEncoder.from_name("tiny", EncoderSettings.outside_training(max_length=17))
    result = evaluate_encoder(
        encoder,
        "mean",
        ["clustering", "sts"],
        short_text_dir=data,
        senteval_dir=data / "no_senteval",
        seeds=2,
        clustering_names=["mixed", "absent"],
        conf_dir=conf,
        kmeans_backend=KMEANS,
    )
    assert encoder.max_length == 17
    assert set(result["clustering"]["datasets"]) == {"mixed"} and result["clustering"]["max_length"] == 32
    assert 0.5 <= result["clustering"]["datasets"]["mixed"]["acc"] <= 1.0
    assert "sts" not in result and any(n.startswith("sts skipped") for n in result["notes"])
    assert any("absent skipped" in n for n in result["notes"])


def test_compare_puts_models_side_by_side(tmp_path):
    a = {
        "clustering": {
            "datasets": {"agnews": {"acc": 0.5, "nmi": 0.25}},
            "avg": {"acc": 0.5, "nmi": 0.25},
            "avg_over": ["agnews"],
        }
    }
    b = {
        "clustering": {
            "datasets": {"agnews": {"acc": 0.625, "nmi": 0.5}},
            "avg": {"acc": 0.625, "nmi": 0.5},
            "avg_over": ["agnews"],
        },
        "sts": {"tasks": {"STSB": {"spearman": 0.8}}, "avg": 0.8, "avg_over": ["STSB"]},
    }
    table = compare([a, b], ["base", "trained"])
    assert "| | base | trained |" in table
    assert "| clustering ACC AG | 50.00 | 62.50 |" in table
    assert "| STS STSB | - | 80.00 |" in table
    paths = []
    for name, result in (("base", a), ("trained", b)):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(result))
    assert main(["--compare", *map(str, paths)]) == table
