"""--pooling cls on a model that was not trained with our MLP: the model's own pooler, or the raw [CLS] state."""
from __future__ import annotations

import pytest
import torch

from evaluation.model_io.load import load_encoder
from textcore.encoding.backbone import load_tokenizer

TEXTS = ["a short sentence", "another, somewhat longer sentence about cats"]


def save_tiny_bert(folder, with_pooler: bool):
    from transformers import BertConfig, BertModel

    tokenizer = load_tokenizer("tiny")
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    torch.manual_seed(0)
    model = BertModel(config, add_pooling_layer=with_pooler).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model, tokenizer


def test_cls_pooling_of_a_hugging_face_folder_is_its_trained_pooler(tmp_path, caplog):
    model, tokenizer = save_tiny_bert(tmp_path / "hf", with_pooler=True)
    with caplog.at_level("INFO", logger="evaluation.model_io.load"):
        encoder, pooling = load_encoder(str(tmp_path / "hf"), "cls")
    assert pooling == "cls" and "trained pooler (BertPooler" in caplog.text
    batch = tokenizer(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = model(**batch).pooler_output
    got = encoder.encode(TEXTS, pooling="cls")
    assert torch.allclose(got, expected, atol=1e-5)


def test_without_a_trained_pooler_cls_falls_back_to_the_cls_state_with_a_warning(tmp_path):
    model, tokenizer = save_tiny_bert(tmp_path / "hf", with_pooler=False)
    # AutoModel builds a BertModel with a pooler: its weights are missing from the checkpoint (random)
    with pytest.warns(UserWarning, match=r"randomly initialised MLP \(its pooler was not in the checkpoint"):
        encoder, pooling = load_encoder(str(tmp_path / "hf"), "cls")
    assert pooling == "cls_before_pooler" and encoder.mlp is None
    batch = tokenizer(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = model(**batch).last_hidden_state[:, 0]
    assert torch.allclose(encoder.encode(TEXTS, pooling=pooling), expected, atol=1e-5)


def test_mean_pooling_is_left_alone(tmp_path):
    save_tiny_bert(tmp_path / "hf", with_pooler=True)
    encoder, pooling = load_encoder(str(tmp_path / "hf"), None)
    assert pooling == "mean" and encoder.mlp is None
