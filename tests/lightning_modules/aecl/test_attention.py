"""AECL's attention network: the paper's S·T and the authors' transformer layer."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from lightning_modules.aecl.attention import SampleAttention, TransformerSampleAttention, build_attention
from tests.helpers.speed import CHUNKS
from textcore.errors import ConfigError


def _copy_into_torch_layer(ours: TransformerSampleAttention) -> nn.TransformerEncoderLayer:
    layer = nn.TransformerEncoderLayer(128, nhead=1, dim_feedforward=256, dropout=0.1)
    missing, unexpected = layer.load_state_dict(ours.state_dict(), strict=True), None
    assert not missing.missing_keys and not missing.unexpected_keys and unexpected is None
    return layer


def test_transformer_form_equals_torch_encoder_layer_in_eval_mode():
    torch.manual_seed(0)
    ours = TransformerSampleAttention(128).eval()
    reference = _copy_into_torch_layer(ours).eval()
    z = torch.randn(20, 128)
    h, s = ours(z)
    with torch.no_grad():
        expected = reference(z)  # [N, D]: a 2-D input is one unbatched sequence of N samples
    assert torch.allclose(h, expected, atol=1e-5)
    assert torch.allclose(s.sum(dim=1), torch.ones(20), atol=1e-6)


def test_transformer_form_by_hand_without_dropout():
    """The layer written out from its equations: one head, post-norm, ReLU feed-forward."""
    torch.manual_seed(1)
    ours = TransformerSampleAttention(16, feedforward=32, dropout=0.0).train()
    z = torch.randn(7, 16)
    h, s = ours(z)
    w_q, w_k, w_v = ours.self_attn.in_proj_weight.split(16)
    b_q, b_k, b_v = ours.self_attn.in_proj_bias.split(16)
    q, k, v = z @ w_q.T + b_q, z @ w_k.T + b_k, z @ w_v.T + b_v
    s_hand = torch.softmax(q @ k.T / math.sqrt(16), dim=1)
    a = (s_hand @ v) @ ours.self_attn.out_proj.weight.T + ours.self_attn.out_proj.bias

    def layer_norm(x, norm):
        mean, var = x.mean(dim=1, keepdim=True), x.var(dim=1, unbiased=False, keepdim=True)
        return (x - mean) / torch.sqrt(var + 1e-5) * norm.weight + norm.bias

    x = layer_norm(z + a, ours.norm1)
    ff = torch.relu(x @ ours.linear1.weight.T + ours.linear1.bias) @ ours.linear2.weight.T + ours.linear2.bias
    assert torch.allclose(s, s_hand, atol=1e-6)
    assert torch.allclose(h, layer_norm(x + ff, ours.norm2), atol=1e-5)


def test_transformer_form_returns_the_dropped_out_attention_in_training():
    """As the authors' layer returns it: each weight is 0 or softmax / (1 - p)."""
    torch.manual_seed(2)
    ours = TransformerSampleAttention(16, feedforward=32, dropout=0.5).train()
    z = torch.randn(30, 16)
    _, s = ours(z)
    ours.eval()
    _, s_eval = ours(z)
    kept = s != 0
    assert 0.3 < kept.float().mean() < 0.7
    assert torch.allclose(s[kept], s_eval[kept] / 0.5, atol=1e-6)


def test_residual_keeps_texts_apart_at_initialisation_where_the_paper_form_does_not():
    """Near-uniform attention at initialisation: S·T gives every text almost the same h; with the residual
    each h stays about as far from the others as its z is."""
    torch.manual_seed(3)
    z = torch.randn(64, 128)

    def mean_cosine(x):
        x = torch.nn.functional.normalize(x, dim=1)
        return (x @ x.T)[~torch.eye(64, dtype=torch.bool)].mean().item()

    h_paper, _ = SampleAttention(128)(z)
    h_transformer, _ = TransformerSampleAttention(128).eval()(z)
    assert abs(mean_cosine(z)) < 0.05
    assert mean_cosine(h_paper) > 0.8
    assert mean_cosine(h_transformer) < 0.2


def test_build_attention_names_the_forms():
    assert isinstance(build_attention("paper", 8), SampleAttention)
    assert isinstance(build_attention("transformer", 8), TransformerSampleAttention)
    with pytest.raises(ValueError, match="paper"):
        build_attention("residual", 8)


def test_aecl_attention_follows_reference_unless_named():
    from lightning_modules.aecl import AECL

    def module(**kwargs):
        return AECL(num_clusters=3, backbone="tiny", chunk_tokens=CHUNKS, projection_dim=8, **kwargs)

    assert isinstance(module(reference=False).attention, SampleAttention)
    assert isinstance(module(reference=True).attention, TransformerSampleAttention)
    assert isinstance(module(reference=True, attention="paper").attention, SampleAttention)
    assert isinstance(module(reference=False, attention="transformer").attention, TransformerSampleAttention)
    with pytest.raises(ConfigError, match="method.attention"):
        module(attention="residual")


def test_checkpoint_with_the_paper_network_loads_into_a_reference_module(tmp_path):
    """Checkpoints from before the setting (reference=true trained with S·T) still load and predict the same."""
    import lightning

    from lightning_modules.aecl import AECL

    torch.manual_seed(4)
    old = AECL(num_clusters=3, backbone="tiny", chunk_tokens=CHUNKS, projection_dim=8, reference=True,
               attention="paper")
    hparams = dict(old.hparams)
    hparams.pop("attention")  # what an older checkpoint's hyper-parameters hold
    path = tmp_path / "old.ckpt"
    torch.save({"state_dict": old.state_dict(), "hyper_parameters": hparams,
                "pytorch-lightning_version": lightning.__version__}, path)
    with pytest.warns(UserWarning, match="paper's attention network"):
        loaded = AECL.load_from_checkpoint(path)
    assert isinstance(loaded.attention, SampleAttention)
    z = torch.randn(5, 8)
    assert torch.allclose(loaded.attention(z)[0], old.attention(z)[0])
