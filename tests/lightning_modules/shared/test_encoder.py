import pytest
import torch

from textcore.encoding.backbone import BackboneUnavailableError, load_backbone
from textcore.encoding.encoder import EncoderSettings, TextEncoder, mean_pool


def test_mean_pool_ignores_padding():
    hidden = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])
    mask = torch.tensor([[1, 1, 0]])
    assert torch.allclose(mean_pool(hidden, mask), torch.tensor([[2.0, 3.0]]))


def test_hub_backbone_offline_names_the_offline_choice(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(BackboneUnavailableError, match=r"bert-base-uncased.*backbone=minilm"):
        load_backbone("bert-base-uncased")


def test_encode_keeps_input_order_when_sorting_by_length():
    encoder = TextEncoder.from_name("tiny", EncoderSettings.outside_training())
    texts = ["a much longer text than the others here", "short", "mid length text"]
    together = encoder.encode(texts, batch_size=2, sort_by_length=True)
    alone = torch.cat([encoder.encode([t]) for t in texts])
    assert torch.allclose(together, alone, atol=1e-5)


def test_pooling_choices():
    encoder = TextEncoder.from_name("tiny", EncoderSettings.outside_training("cls"))
    tokens = encoder.tokenize(["hello world"])
    assert encoder(**tokens).shape == (1, 32)
    raw = encoder(**tokens, pooling="cls_before_pooler")
    assert not torch.allclose(encoder(**tokens), raw)  # the MLP is applied only for `cls`
    with pytest.raises(ValueError, match="pooling must be one of"):
        TextEncoder.from_name("tiny", EncoderSettings.outside_training("max"))
