"""Sample-level attention: each sample attends to the other samples of its batch (AECL eqs 1-3)."""
from __future__ import annotations

import math

import torch
from torch import nn


class SampleAttention(nn.Module):
    """K1 = Z·W_K1, K2 = Z·W_K2, T = Z·W_T; S = softmax(K1·K2ᵀ/√D) row-wise; H = S·T.

    The attention runs over the SAMPLES of the batch (rows of Z), not over tokens, so a
    sample's consistent representation h_i mixes the t_j of the samples it finds similar
    (AECL §3.2, docs/methods/aecl.md). The projections have no bias, as eq 1 writes them. The reference code
    uses a whole single-head transformer encoder layer (residual, feed-forward 256) instead;
    this module is the paper's form.

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
        if z.dim() != 2:
            raise ValueError(f"SampleAttention expects [N, D] projections, got shape {tuple(z.shape)}")
        scores = self.key1(z) @ self.key2(z).T * self.scale  # [N, N]
        s = torch.softmax(scores, dim=1)  # [N, N]
        h = s @ self.value(z)  # [N, D]
        return h, s
