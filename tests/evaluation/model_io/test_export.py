"""Export round trip: the sentence-transformers folder embeds exactly like the project's encoder."""

import json

import pytest
import torch

from tests.helpers.speed import CHUNKS

TEXTS = [
    "A man is playing a guitar.",
    "Two dogs run through the snow!",
    "short",
    "a sentence longer than the limit of thirty-two tokens " * 5,  # exercises truncation
]


def perturbed(module_or_encoder, seed=1):
    """Random non-default weights, so a round trip that reinitialises anything would show."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module_or_encoder.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g))
    return module_or_encoder


@pytest.fixture(scope="module")
def pairsupcon_module():
    from lightning_modules.pairsupcon.module import PairSupCon

    torch.manual_seed(0)
    return perturbed(PairSupCon(backbone="tiny", chunk_tokens=CHUNKS)).eval()


def st_embeddings(folder):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(folder), device="cpu")
    return model.encode(TEXTS, convert_to_tensor=True, batch_size=2).cpu()


def test_pairsupcon_module_round_trip_mean_pooling(pairsupcon_module, tmp_path):
    from evaluation.model_io.export import export_encoder
    from evaluation.model_io.load import load_encoder

    encoder = pairsupcon_module.encoder
    info = export_encoder(encoder, pairsupcon_module.eval_pooling, tmp_path / "out")
    assert info["pooling"] == "mean" and info["sentence_transformers_modules"] == ["Transformer", "Pooling"]
    expected = encoder.encode(TEXTS)
    assert torch.allclose(st_embeddings(tmp_path / "out" / "sentence-transformers"), expected, atol=1e-5)
    # the plain Hugging Face folder holds the same backbone
    reloaded, pooling = load_encoder(tmp_path / "out" / "hf")
    assert pooling == "mean" and torch.allclose(reloaded.encode(TEXTS), expected, atol=1e-5)
    # and the evaluation loader reads the sentence-transformers folder back with its pooling
    from_st, st_pooling = load_encoder(tmp_path / "out" / "sentence-transformers")
    assert st_pooling == "mean" and from_st.max_length == encoder.max_length
    assert torch.allclose(from_st.encode(TEXTS), expected, atol=1e-5)


@pytest.mark.parametrize(
    "pooling,modules", [("cls", ["Transformer", "Pooling", "Dense"]), ("cls_before_pooler", ["Transformer", "Pooling"])]
)
def test_cls_poolings_round_trip(pooling, modules, tmp_path):
    from evaluation.model_io.export import export_encoder
    from evaluation.model_io.load import load_encoder
    from textcore.encoding.encoder import EncoderSettings, TextEncoder

    torch.manual_seed(0)
    encoder = perturbed(TextEncoder.from_name("tiny", EncoderSettings.outside_training("cls"))).eval()
    info = export_encoder(encoder, pooling, tmp_path)
    assert info["sentence_transformers_modules"] == modules
    expected = encoder.encode(TEXTS, pooling=pooling)
    assert torch.allclose(st_embeddings(tmp_path / "sentence-transformers"), expected, atol=1e-5)
    other = "cls_before_pooler" if pooling == "cls" else "cls"
    assert not torch.allclose(expected, encoder.encode(TEXTS, pooling=other), atol=1e-3)  # the MLP matters
    back, back_pooling = load_encoder(tmp_path / "sentence-transformers")
    assert back_pooling == pooling and torch.allclose(back.encode(TEXTS), expected, atol=1e-5)


def test_export_from_a_checkpoint_file(pairsupcon_module, tmp_path):
    """A checkpoint copied away from its run directory is rebuilt from its hyper-parameters."""
    from evaluation.model_io.export import export

    ckpt = tmp_path / "model.ckpt"
    torch.save(
        {"hyper_parameters": dict(pairsupcon_module.hparams), "state_dict": pairsupcon_module.state_dict()}, ckpt
    )
    info = export(ckpt, tmp_path / "out")
    assert json.loads((tmp_path / "out" / "export.json").read_text())["source"] == str(ckpt)
    assert info["max_seq_length"] == 32
    expected = pairsupcon_module.encoder.encode(TEXTS)
    assert torch.allclose(st_embeddings(tmp_path / "out" / "sentence-transformers"), expected, atol=1e-5)


def test_cls_export_without_mlp_is_refused(pairsupcon_module, tmp_path):
    from evaluation.model_io.export import export_encoder

    with pytest.raises(ValueError, match="MLP"):
        export_encoder(pairsupcon_module.encoder, "cls", tmp_path)


def test_load_encoder_explains_unusable_references(tmp_path):
    from evaluation.model_io.load import ModelLoadError, load_encoder

    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelLoadError, match="neither a run directory"):
        load_encoder(tmp_path / "empty")
    run = tmp_path / "run"
    run.mkdir()
    (run / "config_resolved.yaml").write_text("method: {}\n")
    with pytest.raises(ModelLoadError, match="no checkpoints/last.ckpt"):
        load_encoder(run)
    with pytest.raises(ModelLoadError, match="pooling must be one of"):
        load_encoder("tiny", pooling="max")
