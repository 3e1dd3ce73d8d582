"""Contrastive pieces several methods share, as pure functions on tensors.

Inputs may already be gathered across DDP processes (``lightning_modules.shared.distributed``):
the functions only see one global batch.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def cosine_matrix(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """sim(a_i, b_j) for all pairs: [N, d] x [M, d] -> [N, M]."""
    return F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T  # [N, M]


def partner_index(n: int, device: torch.device | str | None = None) -> torch.Tensor:
    """For 2N stacked views [first views; second views]: the index of each row's other view, r ± N [2N].
    Made on ``device`` itself: a host tensor copied there would be a synchronising copy every step."""
    return (torch.arange(2 * n, device=device) + n) % (2 * n)  # [2N]


def nt_xent(z1: torch.Tensor, z2: torch.Tensor, temperature: float = 0.5) -> torch.Tensor:
    """Two-view NT-Xent (SCCL's Instance-CL, eqs 1-2 of Zhang et al. 2021; SimCLR).

    Args:
        z1, z2: [N, D] views of the same N instances (need not be normalised).
        temperature: τ.

    Every one of the 2N views is an anchor; its partner view is the positive and the
    other 2N-2 views are negatives. Returns the mean over the 2N anchors.
    """
    n = z1.shape[0]
    z = F.normalize(torch.cat([z1, z2]), dim=1)  # [2N, D]
    sim = z @ z.T / temperature  # [2N, 2N]
    sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool, device=z.device), float("-inf"))
    return F.cross_entropy(sim, partner_index(n, z.device))
