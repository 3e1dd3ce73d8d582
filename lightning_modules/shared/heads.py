"""Projection heads shared by the methods."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class ContrastHead(nn.Module):
    """Linear(d,d) - ReLU - Linear(d,out); L2-normalised output (SCCL, AECL, PairSupCon)."""

    def __init__(self, dim: int, out_dim: int = 128, bias: bool = True, normalize: bool = True):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, dim, bias=bias), nn.ReLU(), nn.Linear(dim, out_dim, bias=bias))
        self.normalize = normalize

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.net(x)  # [N, out_dim]
        return F.normalize(z, dim=1) if self.normalize else z
