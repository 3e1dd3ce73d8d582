"""Losses shared by the methods, as pure functions on tensors.

Each function documents its inputs and the SPEC section / paper equation it follows.
Embeddings passed to contrastive losses may already be gathered across DDP processes
(see ``lightning_modules.distributed.gather_with_grad``).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def nt_xent(z1: torch.Tensor, z2: torch.Tensor, temperature: float = 0.5) -> torch.Tensor:
    """Two-view NT-Xent (SCCL Instance-CL, SPEC §1; SimCLR).

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
    partner = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)]).to(z.device)  # [2N]
    return F.cross_entropy(sim, partner)


def student_t_assignment(embeddings: torch.Tensor, centroids: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """Soft cluster assignment with a Student's t kernel (DEC; SCCL eq. 3).

    Args:
        embeddings: [N, d] encoder embeddings of the original texts.
        centroids: [K, d] cluster centres in the same space.
        alpha: degrees of freedom (1, or 10 for Biomedical in SCCL).

    Returns q: [N, K], rows sum to 1.
    """
    sq_dist = torch.cdist(embeddings, centroids).pow(2)  # [N, K]
    kernel = (1.0 + sq_dist / alpha).pow(-(alpha + 1.0) / 2.0)  # [N, K]
    return kernel / kernel.sum(dim=1, keepdim=True)


def target_distribution(q: torch.Tensor) -> torch.Tensor:
    """Sharpened target p_jk ∝ q_jk² / f_k with f_k = Σ_j q_jk (SCCL eq. 4). Detached.

    Args:
        q: [N, K] soft assignments of the batch.
    """
    q = q.detach()
    weight = q.pow(2) / q.sum(dim=0, keepdim=True)  # [N, K]
    return weight / weight.sum(dim=1, keepdim=True)


def cluster_kl_loss(q: torch.Tensor, p: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """KL(p || q) summed over clusters and averaged over the batch (SCCL eq. 5).

    Args:
        q: [N, K] soft assignments (gradient flows through q).
        p: [N, K] target distribution (treated as constant).
    """
    p = p.detach()
    kl = p * (torch.log(p.clamp_min(eps)) - torch.log(q.clamp_min(eps)))  # [N, K]
    return kl.sum(dim=1).mean()
