"""ClusterNS's in-batch clustering (docs/methods/clusterns.md, paper §3.3 and Algorithm 1) as pure functions.

Centroids live in the space of the anchors' training embeddings z_i (first dropout view,
pooled + MLP: the vectors the contrastive loss sees). Similarity is cosine throughout.
None of these functions tracks gradients: centroids are state, not parameters.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from lightning_modules.shared.contrastive import cosine_matrix

CENTROID_UPDATES = ("mean", "sum")
HARD_NEGATIVE_RANKS = ("second", "nearest")


@torch.no_grad()
def greedy_init_indices(sim: torch.Tensor, k: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Rows of the batch that become the K initial centroids (paper §3.3, reference form).

    Args:
        sim: [N, N] similarity of the batch's first views (rows) to its second views (columns):
            the z1·z2 cosine matrix of the reference code.
        k: number of centroids K <= N.
        generator: draws the first sample; seed it identically on every DDP rank.

    The first index is uniform at random; each next one is the not-yet-chosen sample whose
    column is least similar in the row of the previously chosen sample (ties: lowest index).
    Returns [K] distinct indices; the caller takes the first-view vectors z1[indices].
    """
    n = sim.shape[0]
    if sim.ndim != 2 or sim.shape[1] != n:
        raise ValueError(f"sim must be a square [N, N] matrix, got {tuple(sim.shape)}")
    if not 1 <= k <= n:
        raise ValueError(
            f"in-batch initialisation needs 1 <= K <= batch size, got K={k} for a batch of {n}; "
            "raise batch_size (x devices) or lower method.num_clusters."
        )
    first = int(torch.randint(n, (1,), generator=generator).item())
    taken = torch.zeros(n, dtype=torch.bool, device=sim.device)  # [N]
    taken[first] = True
    chosen = [first]
    for _ in range(1, k):
        row = sim[chosen[-1]].masked_fill(taken, float("inf"))  # [N]
        nxt = int(torch.argmin(row).item())
        taken[nxt] = True
        chosen.append(nxt)
    return torch.tensor(chosen, dtype=torch.long, device=sim.device)  # [K]


@torch.no_grad()
def assign(x: torch.Tensor, centroids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Most similar centroid of each sample.

    Args:
        x: [N, d] anchors' embeddings; centroids: [K, d].

    Returns (assignment [N] long, similarity [N, K]).
    """
    sim = cosine_matrix(x, centroids)  # [N, K]
    return sim.argmax(dim=1), sim


@torch.no_grad()
def random_assign(n: int, k: int, generator: torch.Generator | None = None, device=None) -> torch.Tensor:
    """Uniformly random cluster of each of n samples (ablation 'random clusters'); [N] long."""
    return torch.randint(k, (n,), generator=generator).to(device)


@torch.no_grad()
def momentum_update(
    centroids: torch.Tensor, x: torch.Tensor, assignment: torch.Tensor, gamma: float, reduce: str = "mean"
) -> torch.Tensor:
    """c_k <- (1-γ)·c_k + γ·x̃_k for every cluster with members (paper eqs. 7-8).

    Args:
        centroids: [K, d]; x: [N, d] members' embeddings; assignment: [N] cluster of each row.
        gamma: momentum γ (1e-3 in the paper).
        reduce: ``mean`` — x̃_k is the mean of the members (paper eq. 7); ``sum`` — their sum
            (reference code).

    Clusters without members keep their centroid. Returns a new [K, d] tensor.
    """
    if reduce not in CENTROID_UPDATES:
        raise ValueError(f"centroid update must be one of {CENTROID_UPDATES}, got '{reduce}'")
    k = centroids.shape[0]
    onehot = F.one_hot(assignment, k).to(centroids.dtype)  # [N, K]
    sums = onehot.T @ x.to(centroids.dtype)  # [K, d]
    counts = onehot.sum(dim=0)  # [K]
    target = sums / counts.clamp_min(1).unsqueeze(1) if reduce == "mean" else sums  # [K, d]
    updated = (1 - gamma) * centroids + gamma * target  # [K, d]
    return torch.where((counts > 0).unsqueeze(1), updated, centroids)


@torch.no_grad()
def hard_negative_select(
    x: torch.Tensor, centroids: torch.Tensor, rank: str = "second"
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each sample's hard-negative centroid (paper §3.2).

    Args:
        x: [N, d]; centroids: [K, d].
        rank: ``second`` — the second most similar centroid c_i2 (paper); ``nearest`` — the most
            similar one (ablation 'repl. harder negative').

    Returns (indices [N], hard negatives [N, d] (detached copies of centroids), similarities [N]).
    """
    if rank not in HARD_NEGATIVE_RANKS:
        raise ValueError(f"hard-negative rank must be one of {HARD_NEGATIVE_RANKS}, got '{rank}'")
    position = 1 if rank == "second" else 0
    if centroids.shape[0] <= position:
        raise ValueError(f"a second-nearest centroid needs K >= 2, got K={centroids.shape[0]}")
    sim = cosine_matrix(x, centroids)  # [N, K]
    values, indices = sim.topk(position + 1, dim=1)  # [N, 1 or 2]
    chosen = indices[:, position]  # [N]
    return chosen, centroids[chosen].detach().clone(), values[:, position]


def same_cluster_mask(assignment: torch.Tensor) -> torch.Tensor:
    """[N, N] bool: i and j (j != i) share a cluster — x_i's false-negative candidates."""
    same = assignment.unsqueeze(0) == assignment.unsqueeze(1)  # [N, N]
    return same & ~torch.eye(len(assignment), dtype=torch.bool, device=assignment.device)


@torch.no_grad()
def clustering_diagnostics(
    sim: torch.Tensor,
    x: torch.Tensor,
    centroids: torch.Tensor,
    assignment: torch.Tensor,
    hard_negatives: torch.Tensor | None,
) -> dict[str, float]:
    """The in-batch similarities the paper plots (Figs. 3, 4, 7), as plain floats.

    Args:
        sim: [N, N] cosine sim(z1_i, z2_j); x: [N, d] anchors; centroids: [K, d];
        assignment: [N]; hard_negatives: [N, d] or None.

    Keys: ``sim_sample_centroid`` (sample vs its own centroid), ``sim_inter_centroid`` (mean over
    centroid pairs), ``sim_same_cluster`` (intra-cluster member pairs, i != j; NaN without any),
    ``same_cluster_pair_rate`` (share of in-batch negative pairs i != j that fall in one cluster —
    the false-negative rate as far as it can be known without labels),
    ``samples_with_cluster_mates`` (share of samples whose cluster has another member in the
    batch: the paper's Fig. 7 false-negative rate), ``clusters_used`` (non-empty clusters),
    ``sim_hard_negative`` (sample vs its hard-negative centroid) when hard negatives are given.
    """
    n, k = x.shape[0], centroids.shape[0]
    to_centroids = cosine_matrix(x, centroids)  # [N, K]
    between = cosine_matrix(centroids, centroids)  # [K, K]
    off = ~torch.eye(k, dtype=torch.bool, device=x.device)  # [K, K]
    same = same_cluster_mask(assignment)  # [N, N]
    counts = torch.bincount(assignment, minlength=k)  # [K]
    out = {
        "sim_sample_centroid": to_centroids.gather(1, assignment.unsqueeze(1)).mean().item(),
        "sim_inter_centroid": between[off].mean().item() if k > 1 else float("nan"),
        "sim_same_cluster": sim[same].mean().item() if same.any() else float("nan"),
        "same_cluster_pair_rate": same.sum().item() / max(1, n * (n - 1)),
        "samples_with_cluster_mates": (counts[assignment] > 1).float().mean().item(),
        "clusters_used": float((counts > 0).sum().item()),
    }
    if hard_negatives is not None:
        out["sim_hard_negative"] = F.cosine_similarity(x, hard_negatives, dim=1).mean().item()
    return out
