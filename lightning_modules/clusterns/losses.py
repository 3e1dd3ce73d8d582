"""ClusterNS's bidirectional margin loss on false negatives (Deng et al., 2023, eq. 3), a pure function
on tensors. The InfoNCE with hard negatives (eq. 2) is SimCSE's, in ``lightning_modules.simcse.losses``."""
from __future__ import annotations

import torch
import torch.nn.functional as F

BML_REDUCTIONS = ("members", "matrix")


def bml_loss(
    sim: torch.Tensor,
    same_cluster: torch.Tensor,
    alpha: float = 0.0,
    beta: float = 0.3,
    reduction: str = "members",
) -> torch.Tensor:
    """Bidirectional margin loss on in-batch false negatives (ClusterNS eqs. 4-5, docs/methods/clusterns.md).

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
    per_pair = F.relu(delta + alpha) + F.relu(-delta - beta)  # [N, N]
    # the mean over members as sums (no boolean index, whose size the GPU would report back); 0 with the
    # graph intact when there are none (DDP's unused-parameter check)
    chosen = torch.where(members, per_pair, torch.zeros_like(per_pair))
    return chosen.sum() / members.sum().clamp_min(1)
