"""Unsupervised SimCSE's InfoNCE (Gao et al., EMNLP 2021, eq. 1), with the optional block of extra
hard negatives that ClusterNS adds (Deng et al., 2023, eq. 2). Pure functions on tensors."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from lightning_modules.shared.contrastive import cosine_matrix


def infonce_with_hard_negatives(
    z1: torch.Tensor,
    z2: torch.Tensor,
    temperature: float = 0.05,
    hard_negatives: torch.Tensor | None = None,
    hard_negative_weight: float = 1.0,
) -> torch.Tensor:
    """InfoNCE of SimCSE (ClusterNS eq. 1) and, with ``hard_negatives``, ClusterNS eq. 2.

    Args:
        z1: [N, d] anchors (first dropout view).
        z2: [N, d] positives (second view); z2_j (j != i) are the in-batch negatives of z1_i.
        temperature: τ (0.05 in SimCSE and ClusterNS).
        hard_negatives: optional [M, d] extra negatives seen by *every* anchor (ClusterNS: the
            N second-nearest centroids x_j⁻ of the batch, M = N). Treated as given; detach them
            beforehand if they must not receive gradients.
        hard_negative_weight: μ > 0. Each hard-negative term enters the denominator as
            μ·exp(sim/τ), i.e. log μ is added to those logits (the reference code's form).

    Logits are [N, N] (or [N, N + M]); the target of row i is column i. Returns the mean over
    the N anchors of -log(e^{s_ii/τ} / (Σ_j e^{s_ij/τ} + μ Σ_m e^{h_im/τ})).
    """
    if z1.shape != z2.shape:
        raise ValueError(f"z1 and z2 must have the same shape, got {tuple(z1.shape)} and {tuple(z2.shape)}")
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    logits = cosine_matrix(z1, z2) / temperature  # [N, N]
    if hard_negatives is not None:
        if hard_negative_weight <= 0:
            raise ValueError(
                f"hard_negative_weight (μ) must be > 0, got {hard_negative_weight}; "
                "to train without hard negatives pass hard_negatives=None (ClusterNS: hard_negatives=none)."
            )
        hard = cosine_matrix(z1, hard_negatives) / temperature + math.log(hard_negative_weight)  # [N, M]
        logits = torch.cat([logits, hard], dim=1)  # [N, N + M]
    targets = torch.arange(z1.shape[0], device=z1.device)  # [N]
    return F.cross_entropy(logits, targets)
