"""Sample-level attention: each sample attends to the other samples of its batch (AECL eqs 1-3).

Two forms, chosen by ``method.attention`` (docs/methods/aecl.md):

- ``paper``: ``SampleAttention``, eqs 1-3 as printed: H = softmax(K1·K2ᵀ/√D)·T, nothing else;
- ``transformer``: ``TransformerSampleAttention``, what the authors' network.py builds (line 30:
  ``TransformerEncoderLayer(128, nhead=1, dim_feedforward=256)``, forward in their utils/transformer.py):
  a post-norm encoder layer whose sequence is the batch. Each h_i keeps its own z_i through the
  residual, so at initialisation, when the attention is still uniform, the texts of a batch keep
  distinct h (the paper form gives every text the same h there, and the clustering network starts
  from one prediction for the whole batch).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

ATTENTION_FORMS = ("paper", "transformer")


def _check_projections(z: torch.Tensor, name: str) -> None:
    if z.dim() != 2:
        raise ValueError(f"{name} expects [N, D] projections, got shape {tuple(z.shape)}")


class SampleAttention(nn.Module):
    """K1 = Z·W_K1, K2 = Z·W_K2, T = Z·W_T; S = softmax(K1·K2ᵀ/√D) row-wise; H = S·T (the paper's form).

    The attention runs over the SAMPLES of the batch (rows of Z), not over tokens, so a
    sample's consistent representation h_i mixes the t_j of the samples it finds similar
    (AECL §3.2). The projections have no bias, as eq 1 writes them.

    Args:
        dim: D, the width of Z (128 in the paper) and of K1, K2, T.
    """

    def __init__(self, dim: int = 128):
        super().__init__()
        self.key1 = nn.Linear(dim, dim, bias=False)
        self.key2 = nn.Linear(dim, dim, bias=False)
        self.value = nn.Linear(dim, dim, bias=False)
        self.scale = 1.0 / math.sqrt(dim)

    def forward(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """z: [N, D] projections of one view -> (H [N, D], S [N, N] with rows summing to 1)."""
        _check_projections(z, "SampleAttention")
        scores = self.key1(z) @ self.key2(z).T * self.scale  # [N, N]
        s = torch.softmax(scores, dim=1)  # [N, N]
        h = s @ self.value(z)  # [N, D]
        return h, s


class TransformerSampleAttention(nn.Module):
    """A single-head post-norm transformer encoder layer over the samples of a batch (the authors' code).

        a, S = MultiheadAttention(Z, Z, Z)          one head, in/out projections with bias
        X    = LayerNorm(Z + Dropout(a))
        H    = LayerNorm(X + Dropout(W2·Dropout(ReLU(W1·X))))     W1: D -> ``feedforward``

    S is what the attention returns with its weights, as the authors' layer returns it: in training
    mode the attention dropout has already been applied to it (rows no longer sum to exactly 1; the
    dropped entries are 0 and the kept ones scaled by 1/(1-p)), and the similarity-guided loss
    weights its positives with that S. In eval mode S is the softmax itself.

    The parameters, their initialisation and the order of the dropout draws are those of
    ``torch.nn.TransformerEncoderLayer(dim, 1, feedforward, dropout)``, whose forward equals this
    one's H (tested), which is how the authors' copy of that class computes it.

    Args:
        dim: D (128). feedforward: width of the feed-forward block (256). dropout: every dropout (0.1).
    """

    def __init__(self, dim: int = 128, feedforward: int = 256, dropout: float = 0.1):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(dim, num_heads=1, dropout=dropout)
        self.linear1 = nn.Linear(dim, feedforward)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(feedforward, dim)
        self.norm1 = nn.LayerNorm(dim)
        self.norm2 = nn.LayerNorm(dim)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """z: [N, D] projections of one view -> (H [N, D], S [N, N] the attention weights)."""
        _check_projections(z, "TransformerSampleAttention")
        # a 2-D input is one unbatched sequence of N samples: the attention runs over the batch
        a, s = self.self_attn(z, z, z, need_weights=True)  # [N, D], [N, N]
        x = self.norm1(z + self.dropout1(a))  # [N, D]
        h = self.norm2(x + self.dropout2(self.linear2(self.dropout(F.relu(self.linear1(x))))))  # [N, D]
        return h, s


def build_attention(form: str, dim: int) -> nn.Module:
    """The attention network G_h of ``form`` (``ATTENTION_FORMS``) for projections of width ``dim``."""
    if form == "paper":
        return SampleAttention(dim)
    if form == "transformer":
        return TransformerSampleAttention(dim)
    raise ValueError(f"the attention form must be one of {ATTENTION_FORMS}, got '{form}'")
