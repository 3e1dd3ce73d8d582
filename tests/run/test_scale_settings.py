"""A corpus larger than eval_sample / kmeans_sample (docs/scale.md): the evaluations before and during training embed
a seeded sample, the last one every text, KMeans fits on a sample and assigns every text; a corpus no larger than
them (every paper set) runs exactly as without them."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

import lightning_modules.shared.eval_outputs as eval_outputs
from ctclust.training.train import train
from tests.helpers import compose_config
from tests.helpers.resume import without_timings
from textcore.kmeans import sample_rows

DEMO = ["backbone=tiny", "dataset=demo", "batch_size=32", "trainer.max_steps=4", "trainer.enable_progress_bar=false",
        "trainer.enable_model_summary=false", "~callbacks.progress",
        "dataset.callbacks.clustering_eval.every_n_steps=2", "dataset.callbacks.clustering_eval.kmeans_n_init=2",
        "method.callbacks.centroid_init.n_init=2", "callbacks.report.projection=pca", "callbacks.report.html=false",
        "print_table=false"]


@pytest.fixture
def passes(monkeypatch) -> list[int]:
    """The texts of each evaluation pass the run makes (an encoder pass over them), in order."""
    made = []
    collect = eval_outputs.collect_eval_outputs

    def counted(pl_module, dataloader, spill_dir=None, strategy=None, embedder=None):
        made.append(len(dataloader.dataset))
        return collect(pl_module, dataloader, spill_dir, strategy, embedder)

    monkeypatch.setattr(eval_outputs, "collect_eval_outputs", counted)
    return made


def test_the_largest_paper_set_is_within_the_default_samples():
    from omegaconf import OmegaConf

    from tests.helpers import CONF

    config = OmegaConf.load(CONF / "config.yaml")
    assert config.eval_sample >= 20_000 and config.kmeans_sample >= 20_000  # StackOverflow and Biomedical: 20,000
    assert sample_rows(20_000, config.eval_sample, 0) is None and sample_rows(20_000, config.kmeans_sample, 0) is None


def test_a_corpus_within_the_samples_runs_as_without_them(tmp_path):
    default = train(compose_config(DEMO + ["callbacks.report.plots=false"], tmp_path / "default"))
    plain = train(compose_config(DEMO + ["callbacks.report.plots=false", "eval_sample=0", "kmeans_sample=0"],
                                 tmp_path / "plain"))
    for key in ("before", "final", "history"):
        assert without_timings(default["clustering"][key]) == without_timings(plain["clustering"][key])
    assert default["clustering"]["final"]["texts"] == 720 and default["clustering"]["before"]["texts"] == 720
    a = torch.load(tmp_path / "default/checkpoints/last.ckpt", weights_only=False)["state_dict"]
    b = torch.load(tmp_path / "plain/checkpoints/last.ckpt", weights_only=False)["state_dict"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_corpus_larger_than_the_samples(tmp_path, passes):
    out = tmp_path / "run"
    results = train(compose_config(DEMO + ["eval_sample=300", "kmeans_sample=200"], out))
    clustering = results["clustering"]
    # one pass before training (the report's before.npy, the evaluation and SCCL's centroids share it), one at
    # step 2 on the sample, then every text for the final evaluation at step 4 (no sample pass at the last step)
    assert passes == [300, 300, 720]
    assert clustering["before"]["texts"] == 300 and clustering["before"]["kmeans_fitted_on"] == 200
    assert [(h["step"], h["texts"]) for h in clustering["history"]] == [(2, 300), (4, 720)]
    final = clustering["final"]
    assert final["texts"] == 720 and final["kmeans_fitted_on"] == 200 and final["kmeans_changed"] is not None
    assert clustering["protocol"]["sample"] == 300 and clustering["protocol"]["kmeans_sample"] == 200
    predictions = pd.read_csv(out / "predictions.csv")
    assert len(predictions) == 720 and predictions["kmeans_cluster"].nunique() == 8
    rows = np.load(out / "embeddings/before_rows.npy")
    np.testing.assert_array_equal(rows, sample_rows(720, 300, 42))
    assert np.load(out / "embeddings/before.npy").shape == (300, 32)
    assert np.load(out / "embeddings/after.npy").shape == (720, 32)
    assert np.load(out / "embeddings/before_kmeans.npy").shape == (300,)
    assert (out / "plots/embeddings_pca.png").is_file() and results["report"]["errors"] == []
    assert json.loads((out / "kmeans_centroids.json").read_text())["kmeans_fitted_on"] == 200
    assert set(results["seconds"]) >= {"read", "start_up", "training", "end", "total"}


def test_aecl_on_a_corpus_larger_than_the_sample_shares_its_passes(tmp_path, passes):
    """AECL's pseudo-labels need every text; its NS diagnostic follows the evaluator's texts and passes."""
    overrides = [o for o in DEMO if "centroid_init" not in o] + [
        "method=aecl", "method.e1=0", "method.e2=1", "eval_sample=300", "kmeans_sample=200",
        "callbacks.report.plots=false"]
    results = train(compose_config(overrides, tmp_path / "run"))
    # before training (sample), stage 2's pseudo-labels (every text), step 2 (sample), the final (every text)
    assert passes == [300, 720, 300, 720]
    attention = results["attention"]
    assert attention["before"] is not None and [h["step"] for h in attention["history"]] == [2, 4]
    assert results["clustering"]["final"]["texts"] == 720
