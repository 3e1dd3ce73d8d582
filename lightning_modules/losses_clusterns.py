"""Losses of unsupervised SimCSE and ClusterNS (SPEC §3), as pure functions on tensors.

Inputs may already be gathered across DDP processes (``lightning_modules.distributed``):
the functions only see one global batch.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

BML_REDUCTIONS = ("members", "matrix")


def cosine_matrix(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """sim(a_i, b_j) for all pairs: [N, d] x [M, d] -> [N, M]."""
    return F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T  # [N, M]


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


def bml_loss(
    sim: torch.Tensor,
    same_cluster: torch.Tensor,
    alpha: float = 0.0,
    beta: float = 0.3,
    reduction: str = "members",
) -> torch.Tensor:
    """Bidirectional margin loss on in-batch false negatives (ClusterNS eqs. 4-5, SPEC §3).

    Args:
        sim: [N, N] cosine similarities sim(z1_i, z2_j) (not divided by τ); the diagonal holds
            the positives sim(z1_i, z2_i).
        same_cluster: [N, N] bool, True where j != i is in i's cluster (the false-negative
            candidates x_i*); the diagonal is ignored.
        alpha, beta: margins; the loss keeps Δ_ij = sim_ij - sim_ii inside [-β, -α].
        reduction: ``members`` (default) averages ReLU(Δ+α) + ReLU(-Δ-β) over the member pairs
            (0 when the batch has none); ``matrix`` follows the reference code: Δ of non-members
            is set to 0 and the loss is averaged over all N² entries. The gradient is then the
            ``members`` gradient scaled by (#members / N²), and the value carries a constant
            α·(N² - #members)/N² from the zeroed entries.
    """
    if reduction not in BML_REDUCTIONS:
        raise ValueError(f"bml reduction must be one of {BML_REDUCTIONS}, got '{reduction}'")
    if sim.ndim != 2 or sim.shape[0] != sim.shape[1] or same_cluster.shape != sim.shape:
        raise ValueError(
            f"sim and same_cluster must both be [N, N], got {tuple(sim.shape)} and {tuple(same_cluster.shape)}"
        )
    n = sim.shape[0]
    eye = torch.eye(n, dtype=torch.bool, device=sim.device)  # [N, N]
    members = same_cluster.bool() & ~eye  # [N, N]
    delta = sim - sim.diagonal().unsqueeze(1)  # [N, N]: Δ_ij = sim_ij - sim_ii
    if reduction == "matrix":
        delta = torch.where(members, delta, torch.zeros_like(delta))  # [N, N]
        return (F.relu(delta + alpha) + F.relu(-delta - beta)).mean()
    if not members.any():
        return sim.sum() * 0.0  # keeps the graph (and DDP's unused-parameter check) intact
    per_pair = F.relu(delta + alpha) + F.relu(-delta - beta)  # [N, N]
    return per_pair[members].mean()
