"""The end-of-run pass on ONNX Runtime (conf ``encode_backend``, callbacks/evaluation/clustering_eval.py): the same
final embeddings and clusters as torch's with ``onnx``, ``onnx-int8`` runs and says so in results.json, and a bad
value stops in one line naming the key."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from callbacks.evaluation.clustering_eval import ClusteringEvaluator
from ctclust import TextClusterer, load_demo
from textcore import run_folder
from textcore.errors import ConfigError

pytest.importorskip("onnxruntime")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def fit(folder, backend: str) -> tuple[TextClusterer, np.ndarray]:
    """A short run of the tiny BERT (seeded: the same training for every backend), and the float32 embeddings of
    its final evaluation (embeddings/after.npy holds them as float16)."""
    demo = load_demo().sample(80, random_state=3)
    clusterer = TextClusterer(backbone="tiny", num_clusters=4, seed=2, verbose=False,
                              overrides=["trainer.max_steps=2", "batch_size=16", "callbacks.report.plots=false",
                                         "dataset.callbacks.clustering_eval.every_n_steps=2",
                                         "method.callbacks.centroid_init.n_init=2", f"encode_backend={backend}"],
                              run_dir=folder / backend)
    final_pass = {}
    original = ClusteringEvaluator.on_train_end

    def keep_final_embeddings(self, trainer, pl_module):
        original(self, trainer, pl_module)
        final_pass["embeddings"] = self.outputs["embeddings"].numpy().astype(np.float64)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ClusteringEvaluator, "on_train_end", keep_final_embeddings)
        clusterer.fit(demo["text"].tolist())
    return clusterer, final_pass["embeddings"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("encode_backend")
    return {backend: fit(folder, backend) for backend in ("torch", "onnx")}


def final(run: TextClusterer):
    results = run_folder.RunFolder(run.run_dir_).results()
    return results["clustering"], pd.read_csv(run.run_dir_ / run_folder.PREDICTIONS)


@pytest.mark.slow  # two training runs: 11 s
def test_an_onnx_end_of_run_pass_gives_torchs_embeddings_and_predictions(runs):
    (torch_run, torch_embeddings), (onnx_run, onnx_embeddings) = runs["torch"], runs["onnx"]
    torch_clustering, torch_rows = final(torch_run)
    onnx_clustering, onnx_rows = final(onnx_run)
    assert torch_clustering["protocol"]["encode_backend"] == "torch"
    assert onnx_clustering["protocol"]["encode_backend"] == "onnx"
    assert onnx_clustering["protocol"]["encode_check"]["max_abs"] < 1e-4
    assert onnx_clustering["final"]["encode_backend"] == "onnx"
    # the training and its evaluations are torch's in both runs: the weights are the same, only the final pass differs
    assert [h["step"] for h in onnx_clustering["history"]] == [h["step"] for h in torch_clustering["history"]] == [2]
    assert onnx_embeddings.shape == torch_embeddings.shape
    assert np.abs(onnx_embeddings - torch_embeddings).max() < 1e-4
    assert onnx_rows.drop(columns=[c for c in onnx_rows if "confidence" in c]).equals(
        torch_rows.drop(columns=[c for c in torch_rows if "confidence" in c]))
    assert len(onnx_rows) == 80
    exports = list((onnx_run.run_dir_ / "onnx").glob("*-fp32.onnx"))
    assert len(exports) == 1  # in the run folder, where tools.py predict looks for the run's export
    assert not (torch_run.run_dir_ / "onnx").exists()


def test_an_int8_end_of_run_pass_runs_and_records_itself(tmp_path, monkeypatch):
    from textcore.encoding import onnx_runtime

    run, embeddings = fit(tmp_path, "onnx-int8")
    clustering, rows = final(run)
    assert clustering["protocol"]["encode_backend"] == "onnx-int8"
    assert clustering["final"]["encode_backend"] == "onnx-int8"
    assert clustering["protocol"]["encode_check"]["min_cosine"] > 0.95
    assert len(rows) == 80 and list((run.run_dir_ / "onnx").glob("*-int8.onnx"))
    # the trained encoder's own torch embeddings of the same texts (the API's transform: torch by default)
    torch_embeddings = run.transform(rows["text"].tolist()).astype(np.float64)
    cosine = (embeddings * torch_embeddings).sum(1) / np.linalg.norm(embeddings, axis=1) / np.linalg.norm(
        torch_embeddings, axis=1)
    assert cosine.min() > 0.99
    assert np.abs(embeddings - torch_embeddings).max() > 1e-6  # quantised: close, not torch's own numbers

    def no_export(*args, **kwargs):
        raise AssertionError("exported again")

    # the run's model loaded again (tools.py predict, the API) finds the export the run made (int8 activations are
    # quantised per batch, so other batches may round otherwise: close, not equal)
    monkeypatch.setattr(onnx_runtime, "_export_fp32", no_export)
    monkeypatch.setattr(onnx_runtime, "_quantise", no_export)
    again = TextClusterer.load(run.run_dir_, backend="onnx-int8", verbose=False).transform(rows["text"].tolist())
    assert again.shape == embeddings.shape and np.abs(again - embeddings).max() < 0.05
    assert list((run.run_dir_ / "onnx").glob("*-int8.onnx"))


def test_an_unknown_encode_backend_is_one_line_naming_the_key_and_the_choices():
    with pytest.raises(ConfigError) as raised:
        ClusteringEvaluator(kmeans_backend="fast", kmeans_sample=0, sample=0, encode_backend="openvino")
    message = str(raised.value)
    assert "\n" not in message and "encode_backend='openvino'" in message
    assert "torch, onnx, onnx-int8" in message


class _Strategy:
    def __init__(self, kind: str):
        self.root_device = torch.device(kind)


class _Trainer:
    def __init__(self, kind: str, world: int = 1):
        self.strategy, self.world_size = _Strategy(kind), world


class _Module:
    eval_pooling = "mean"


def test_on_a_gpu_or_in_several_processes_the_pass_stays_on_torch_and_the_log_says_so(caplog):
    from callbacks.evaluation.clustering_eval import final_pass_backend

    with caplog.at_level("INFO", logger="callbacks.evaluation.clustering_eval"):
        assert final_pass_backend("onnx-int8", _Trainer("cuda"), _Module()) == "torch"
        assert final_pass_backend("onnx", _Trainer("cpu", world=2), _Module()) == "torch"
    assert [r.getMessage().startswith("encode_backend=") and "ignored" in r.getMessage()
            for r in caplog.records] == [True, True]
    assert final_pass_backend("onnx", _Trainer("cpu"), _Module()) == "onnx"
    prompt = _Module()
    prompt.eval_pooling = "prompt_text"
    with pytest.raises(ConfigError, match="encode_backend=onnx: the evaluation pooling 'prompt_text'"):
        final_pass_backend("onnx", _Trainer("cpu"), prompt)
