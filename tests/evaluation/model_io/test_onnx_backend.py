"""Corpus passes through ONNX Runtime (textcore/encoding/onnx_runtime.py): the export embeds as the torch encoder
does (float32: within 1e-4; int8: close), is cached by the encoder's weights, is refused when it disagrees, and gives
``tools.py predict`` and the API the clusters of torch."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from ctclust import TextClusterer, load_demo
from evaluation.model_io.load import load_encoder
from textcore.encoding import onnx_runtime
from textcore.encoding.onnx_runtime import BackendError, embedder
from textcore.errors import ConfigError

pytest.importorskip("onnxruntime")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def texts(n: int = 120) -> list[str]:
    demo = load_demo()["text"].tolist()
    return [demo[i] if i % 7 else demo[i] + " " + demo[i + 1] for i in range(n)]  # a mix of lengths


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return load_encoder("tiny")


def test_onnx_embeddings_equal_torch_within_1e_4_and_int8_close(tiny, tmp_path):
    encoder, pooling = tiny
    corpus = texts()
    reference = encoder.encode(corpus, batch_size=16, pooling=pooling).double()
    fp32 = embedder(encoder, pooling, "onnx", tmp_path).encode(corpus, batch_size=16, pooling=pooling).double()
    assert fp32.shape == reference.shape
    assert float((fp32 - reference).abs().max()) < 1e-4
    int8 = embedder(encoder, pooling, "onnx-int8", tmp_path).encode(corpus, batch_size=16).double()
    cosine = torch.nn.functional.cosine_similarity(int8, reference, dim=1)
    assert float(cosine.min()) > 0.99 and float((int8 - reference).abs().max()) > 1e-6  # quantised: close, not equal


def test_the_export_is_fused_by_the_transformer_optimiser_and_still_equals_torch(tiny, tmp_path):
    """The tiny BERT's graph fuses like MiniLM's: one Attention per layer, the embeddings' LayerNorm, the residual
    LayerNorms and GELUs; int8 quantises the Attention nodes' Q/K/V weights. The backbone keeps its attention."""
    import onnx

    encoder, pooling = tiny
    before = encoder.backbone.config._attn_implementation
    fp32 = embedder(encoder, pooling, "onnx", tmp_path)
    assert encoder.backbone.config._attn_implementation == before  # eager only while the export was traced
    ops = [n.op_type for n in onnx.load(str(fp32.path)).graph.node]
    layers = encoder.backbone.config.num_hidden_layers
    assert ops.count("Attention") == layers and ops.count("EmbedLayerNormalization") == 1
    assert ops.count("SkipLayerNormalization") == 2 * layers and ops.count("BiasGelu") == layers
    assert "Softmax" not in ops
    assert fp32.agreement["max_abs"] < 1e-4
    reference = encoder.encode(texts(), batch_size=16, pooling=pooling)
    assert float((fp32.encode(texts(), batch_size=16) - reference).abs().max()) < 1e-4
    int8 = embedder(encoder, pooling, "onnx-int8", tmp_path)
    ops = [n.op_type for n in onnx.load(str(int8.path)).graph.node]
    assert ops.count("QAttention") == layers and "Attention" not in ops


def test_a_changed_recipe_changes_the_export_name(tiny, tmp_path, monkeypatch):
    """An export made another way is never taken from the cache for this recipe."""
    encoder, pooling = tiny
    fp32, int8 = (onnx_runtime.export_path(encoder, pooling, b, tmp_path) for b in ("onnx", "onnx-int8"))
    recipe = {k: dict(v) for k, v in onnx_runtime.RECIPE.items()}
    recipe["onnx-int8"]["ops"] = ["MatMul"]
    monkeypatch.setattr(onnx_runtime, "RECIPE", recipe)
    assert onnx_runtime.export_path(encoder, pooling, "onnx", tmp_path) == fp32
    assert onnx_runtime.export_path(encoder, pooling, "onnx-int8", tmp_path) != int8
    recipe["onnx"]["opset"] = 18
    assert onnx_runtime.export_path(encoder, pooling, "onnx", tmp_path) != fp32


def test_the_export_is_cached_by_weights_and_reused(tiny, tmp_path, monkeypatch):
    encoder, pooling = tiny
    first = embedder(encoder, pooling, "onnx", tmp_path)
    stamp = first.path.stat().st_mtime_ns

    def no_export(*args, **kwargs):
        raise AssertionError("exported again")

    monkeypatch.setattr(onnx_runtime, "_export_fp32", no_export)
    again = embedder(encoder, pooling, "onnx", tmp_path)
    assert again.path == first.path and again.path.stat().st_mtime_ns == stamp
    monkeypatch.undo()
    changed, _ = load_encoder("tiny")
    with torch.no_grad():
        changed.backbone.embeddings.word_embeddings.weight.mul_(1.5)  # trained further: other weights
    other = embedder(changed, pooling, "onnx", tmp_path)
    assert other.path != first.path and len(list((tmp_path / "onnx").glob("*.onnx"))) == 2


def test_an_export_that_disagrees_with_torch_is_refused_in_one_line(tiny, tmp_path):
    encoder, pooling = tiny
    stale, _ = load_encoder("tiny")
    with torch.no_grad():
        for p in stale.parameters():
            p.add_(0.05 * torch.randn_like(p))
    path = embedder(stale, pooling, "onnx", tmp_path).path
    # a file under this encoder's name holding other weights (a copy from elsewhere, a hash collision)
    path.replace(onnx_runtime.export_path(encoder, pooling, "onnx", tmp_path))
    with pytest.raises(BackendError, match="disagrees with the torch encoder") as raised:
        embedder(encoder, pooling, "onnx", tmp_path)
    assert "\n" not in str(raised.value) and "backend torch" in str(raised.value)


def test_a_prompt_pooling_and_an_unknown_backend_are_refused(tiny, tmp_path):
    encoder, _ = tiny
    with pytest.raises(BackendError, match="pooling 'prompt_text'"):
        embedder(encoder, "prompt_text", "onnx", tmp_path)
    with pytest.raises(ConfigError, match="choose one of torch, onnx, onnx-int8"):
        embedder(encoder, "mean", "openvino", tmp_path)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    demo = load_demo().sample(96, random_state=4)
    clusterer = TextClusterer(backbone="tiny", num_clusters=4, seed=1, verbose=False,
                              overrides=["trainer.max_steps=3", "batch_size=16", "callbacks.report.plots=false",
                                         "dataset.callbacks.clustering_eval.every_n_steps=0",
                                         "method.callbacks.centroid_init.n_init=2"],
                              run_dir=tmp_path_factory.mktemp("onnx") / "run")
    return clusterer.fit(demo["text"].tolist())


def test_tools_predict_on_onnx_writes_the_columns_and_clusters_of_torch(run, tmp_path):
    from ctclust.commands.predict import main

    source = tmp_path / "new.csv"
    pd.DataFrame({"text": texts(150) + [""]}).to_csv(source, index=False)
    outputs = {}
    for backend in ("torch", "onnx", "onnx-int8"):
        outputs[backend] = tmp_path / f"{backend}.csv"
        main(["--run", str(run.run_dir_), "--input", str(source), "--output", str(outputs[backend]),
              "--backend", backend, "--accelerator", "cpu", "--devices", "1"])
    torch_rows, onnx_rows, int8_rows = (pd.read_csv(outputs[b]) for b in ("torch", "onnx", "onnx-int8"))
    assert list(onnx_rows.columns) == list(torch_rows.columns) == list(int8_rows.columns)
    assert onnx_rows["cluster"].equals(torch_rows["cluster"]) and np.isnan(torch_rows["cluster"].iloc[-1])
    assert np.allclose(onnx_rows["confidence"], torch_rows["confidence"], atol=1e-4, equal_nan=True)
    assert (int8_rows["cluster"] == torch_rows["cluster"]).mean() >= 0.95
    assert len(list((run.run_dir_ / "onnx").glob("*.onnx"))) == 2  # cached in the run folder: fp32 and int8


def test_the_api_backend_gives_the_clusters_and_embeddings_of_torch(run):
    new = texts(60)
    onnx = TextClusterer.load(run.run_dir_, backend="onnx", verbose=False)
    assert onnx.predict(new).tolist() == run.predict(new).tolist()
    assert np.abs(onnx.transform(new) - run.transform(new)).max() < 1e-4
    with pytest.raises(ConfigError, match="runs on the CPU"):
        onnx.transform(new, device="cuda")


def test_evaluate_embeds_through_the_backend_under_its_own_cache_key(tiny, tmp_path):
    """``tools.py evaluate --backend onnx``: its embedding cache calls the export, keyed apart from torch's, and
    follows the token limit evaluation sets per task."""
    from evaluation.benchmarks.encoder_evaluation import max_length
    from evaluation.model_io.embedding_cache import EmbeddingCache

    encoder, pooling = tiny
    corpus = texts(40)
    onnx = embedder(encoder, pooling, "onnx", tmp_path / "export")
    plain = EmbeddingCache(encoder, tmp_path / "cache")
    through = EmbeddingCache(encoder, tmp_path / "cache", embedder=onnx)
    assert through.fingerprint == plain.fingerprint + "-onnx-" + onnx_runtime.recipe_key("onnx")
    with max_length(encoder, 8):  # evaluation's per-task limit reaches the export's tokenizer
        short = through.encode(corpus, pooling)
        assert np.abs(short - plain.encode(corpus, pooling)).max() < 1e-4
    assert through.encoded_texts == len(set(corpus))
    assert np.abs(through.encode(corpus, pooling) - short).max() > 1e-3  # 32 tokens again: other embeddings
