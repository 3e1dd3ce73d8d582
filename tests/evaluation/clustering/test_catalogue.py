"""evaluation.clustering.catalogue: one entry makes a metric, and every reader of clustering scores sees it."""
import json

import numpy as np
import pytest
import torch

from evaluation.clustering import catalogue
from tests.evaluation.across_runs.test_aggregate import make_run


def purity(labels, predictions) -> float:
    """Share of texts in their cluster's most common class (not in the catalogue: the test adds it)."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    return float(sum(np.bincount(labels[predictions == c]).max() for c in np.unique(predictions)) / len(labels))


@pytest.fixture
def with_purity(monkeypatch):
    added = catalogue.Metric("purity", "PUR", "max", True, purity)
    monkeypatch.setattr(catalogue, "METRICS", catalogue.METRICS + (added,))
    return added


def test_the_catalogue_names_each_metric_once_with_a_direction_or_none():
    names = [m.name for m in catalogue.METRICS]
    assert len(names) == len(set(names))
    assert catalogue.label_names() == ("acc", "nmi", "ari", "ami")
    assert catalogue.paper_names() == ("acc", "nmi")
    assert catalogue.direction("davies_bouldin") == "min" and catalogue.direction("size_entropy") is None
    assert all(m.score is not None for m in catalogue.with_labels())
    assert all(m.score is None for m in catalogue.label_free())


def test_an_added_metric_is_in_the_evaluation_results_the_aggregate_table_and_the_summary(with_purity, tmp_path):
    from callbacks.evaluation.clustering_eval import evaluate_outputs, monitor_direction
    from evaluation.across_runs.aggregate import aggregate, load_run, markdown
    from evaluation.run_report.summary import summary_rows
    from tests.helpers.speed import KMEANS

    labels = np.array([0, 0, 0, 1, 1, 1])
    embeddings = torch.tensor([[0.0, 1.0], [0.1, 1.0], [0.0, 0.9], [1.0, 0.0], [0.9, 0.1], [0.5, 0.5]])
    metrics, predictions = evaluate_outputs({"embeddings": embeddings}, labels, 2, kmeans_backend=KMEANS,
                                            label_free_sample=None)
    assert metrics["kmeans_purity"] == pytest.approx(purity(labels, predictions["kmeans"]))
    assert monitor_direction("kmeans_purity") == "max"

    folder = make_run(tmp_path / "run", acc=0.5, nmi=0.4)
    results = json.loads((folder / "results.json").read_text())
    results["clustering"]["final"]["kmeans_purity"] = 0.75
    (folder / "results.json").write_text(json.dumps(results))
    table = aggregate([load_run(folder)])
    row = table["clustering"]["rows"][0]
    assert row["cells"]["searchsnippets"]["purity"]["mean"] == pytest.approx(75.0)
    assert "| method | predictions | SS PUR | Avg PUR |" in markdown(table)

    summary = summary_rows({"clustering": {"final": {**results["clustering"]["final"], "step": 4}}})
    assert summary[0]["PUR"] == "75.00" and summary[0]["ACC"] == "50.00"


def test_an_added_label_free_metric_is_a_sweep_objective_with_its_direction(monkeypatch):
    from runtime.objective import objective_entry

    spread = catalogue.Metric("spread", "spread", "min", False, percent=False)
    monkeypatch.setattr(catalogue, "METRICS", catalogue.METRICS + (spread,))
    results = {"clustering": {"final": {"kmeans_spread": 0.25}}}
    entry = objective_entry("spread", None, results)
    assert entry["name"] == "clustering.final.kmeans_spread"
    assert entry["value"] == 0.25 and entry["direction"] == "minimize"
