"""SCCL's clustering loss as pure functions on tensors (Zhang et al., NAACL 2021, eqs. 3-6):
Student's t soft assignment, the sharpened target distribution and KL(P || Q). The instance
loss is the two-view NT-Xent of ``lightning_modules.shared.contrastive``."""
from __future__ import annotations

import torch


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
