"""The text encoder and its pieces: the poolings, the chunked forward, the texts-in embeddings-out pass; the
encoder composes them and keeps the checkpoint keys of the single-class encoder."""
import ast
import types
from pathlib import Path

import pytest
import torch

from textcore.encoding.backbone import BackboneUnavailableError, load_backbone
from textcore.encoding.chunking import chunked_forward
from textcore.encoding.encoder import EncoderSettings, TextEncoder
from textcore.encoding.pooling import MASK_STATE, mean_pool, pool


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


def test_pool_by_name():
    hidden = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]])  # [1, 3, 2]
    mask, ids = torch.tensor([[1, 1, 0]]), torch.tensor([[101, 7, 0]])
    double = torch.nn.Linear(2, 2, bias=False)
    double.weight.data = 2 * torch.eye(2)
    assert pool(hidden, mask, ids, "cls_before_pooler", double, None).tolist() == [[1.0, 2.0]]
    assert pool(hidden, mask, ids, "cls", double, None).tolist() == [[2.0, 4.0]]
    assert pool(hidden, mask, ids, "cls", None, None).tolist() == [[1.0, 2.0]]
    assert pool(hidden, mask, ids, "mean", double, None).tolist() == [[2.0, 3.0]]
    assert pool(hidden, mask, ids, MASK_STATE, double, 7).tolist() == [[3.0, 4.0]]  # the state at the mask id


def _fake_backbone():
    return types.SimpleNamespace(config=types.SimpleNamespace(model_type="not-a-bert"))


def test_chunked_forward_runs_length_sorted_chunks_and_puts_rows_back():
    counts = [2, 9, 3, 8, 2, 9]
    ids = torch.tensor([[row + 1] * 10 for row in range(len(counts))])  # row r's ids all r + 1
    mask = torch.tensor([[1] * n + [0] * (10 - n) for n in counts])
    calls = []

    def run(input_ids, attention_mask, token_type_ids, inputs_embeds=None, full=None):
        calls.append((input_ids.shape, full))
        return input_ids[:, :1].float()  # [b, 1]: the row's own number

    out = chunked_forward(run, _fake_backbone(), ids, mask, None, counts, chunk_tokens=18)
    assert out[:, 0].tolist() == [1, 2, 3, 4, 5, 6]
    assert [tuple(shape) for shape, _ in calls] == [(3, 3), (2, 9), (1, 9)]  # 2, 2, 3 | 8, 9 | 9
    assert [full for _, full in calls] == [False, False, True]
    calls.clear()
    chunked_forward(run, _fake_backbone(), ids, mask, None, counts, chunk_tokens=0)
    assert [tuple(shape) for shape, _ in calls] == [(6, 10)]  # 0: the batch as padded, in one call
    calls.clear()
    chunked_forward(run, _fake_backbone(), ids, mask, None, [9, 9, 8, 9, 9, 9], chunk_tokens=18)
    assert [tuple(shape) for shape, _ in calls] == [(6, 9)]  # nearly one length: one call cut to the longest


def test_the_encoder_keeps_the_checkpoint_keys_of_one_class():
    """Checkpoints of every method hold ``encoder.backbone.*`` and, with an MLP pooling, ``encoder.mlp.0.*``."""
    encoder = TextEncoder.from_name("tiny", EncoderSettings.outside_training("cls"))
    keys = set(encoder.state_dict())
    assert {k for k in keys if not k.startswith("backbone.")} == {"mlp.0.weight", "mlp.0.bias"}
    assert {f"backbone.{k}" for k in encoder.backbone.state_dict()} == keys - {"mlp.0.weight", "mlp.0.bias"}
    mean = TextEncoder.from_name("tiny", EncoderSettings.outside_training("mean"))
    assert all(k.startswith("backbone.") for k in mean.state_dict())


def test_each_piece_of_the_encoder_reads_without_the_encoder():
    folder = Path(__file__).resolve().parents[3] / "textcore" / "encoding"
    for name in ("pooling", "chunking", "inference", "prompt_pooling", "prompt", "grad_cache", "token_batches"):
        tree = ast.parse((folder / f"{name}.py").read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert "textcore.encoding.encoder" not in imported, name
