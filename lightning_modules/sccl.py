"""SCCL: Supporting Clustering with Contrastive Learning (Zhang et al., NAACL 2021; SPEC §1)."""
from __future__ import annotations

import torch
from torch import nn

from lightning_modules.base import TextRepresentationModule
from lightning_modules.distributed import ddp_loss_scale, gather_with_grad
from lightning_modules.heads import ContrastHead
from lightning_modules.losses import cluster_kl_loss, nt_xent, student_t_assignment, target_distribution

OBJECTIVES = ("joint", "instance", "cluster")


class SCCL(TextRepresentationModule):
    """Instance-CL on two augmented views + DEC-style clustering of the original text.

    Loss = instance_weight · L_instance + cluster_weight · L_cluster. The defaults (1, 1) are the
    reference code's explicit-augmentation weights; the paper writes L_instance + 10·L_cluster.
    ``objective`` selects the paper's ablations: ``instance`` (Instance-CL only) or ``cluster``
    (clustering only).

    The centroids are parameters in the encoder's space, filled by KMeans before the first step
    (``callbacks.KMeansCentroidInit``); ``centroids_ready`` records that this happened, so a
    resumed run does not re-initialise them.
    """

    def __init__(
        self,
        num_clusters: int,
        backbone: str = "minilm",
        pooling: str = "mean",
        max_length: int = 32,
        temperature: float = 0.5,
        alpha: float = 1.0,
        instance_weight: float = 1.0,
        cluster_weight: float = 1.0,
        objective: str = "joint",
        projection_dim: int = 128,
        lr: float = 5e-6,
        head_lr_multiplier: float = 100.0,
        optimizer=None,
    ):
        if objective not in OBJECTIVES:
            raise ValueError(f"method.objective must be one of {OBJECTIVES}, got '{objective}'")
        if temperature <= 0 or alpha <= 0:
            raise ValueError("method.temperature and method.alpha must be positive")
        super().__init__(backbone, pooling, None, max_length, lr, head_lr_multiplier, optimizer)
        self.save_hyperparameters(ignore=["optimizer"])
        dim = self.encoder.dim
        self.contrast_head = ContrastHead(dim, projection_dim)
        self.centroids = nn.Parameter(torch.zeros(num_clusters, dim))
        self.register_buffer("centroids_ready", torch.tensor(False))
        self.num_clusters = num_clusters
        self.temperature = temperature
        self.alpha = alpha
        self.instance_weight = instance_weight
        self.cluster_weight = cluster_weight
        self.objective = objective

    # -- state used by callbacks ---------------------------------------------------------------
    @property
    def needs_centroid_init(self) -> bool:
        return not bool(self.centroids_ready)

    @torch.no_grad()
    def set_centroids(self, centroids: torch.Tensor) -> None:
        self.centroids.copy_(centroids.to(self.centroids))
        self.centroids_ready.fill_(True)

    def assign(self, embeddings: torch.Tensor) -> torch.Tensor:
        return student_t_assignment(embeddings, self.centroids, self.alpha)  # [N, K]

    # -- training ------------------------------------------------------------------------------------
    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        e1 = self.embed(batch["view1"])  # [N, d]
        e2 = self.embed(batch["view2"])  # [N, d]
        # with one augmentation column (or virtual views) the first view *is* the original text
        e0 = self.embed(batch["original"]) if "original" in batch else e1  # [N, d]
        losses = {}
        total = e1.new_zeros(())
        backward = e1.new_zeros(())
        if self.objective in ("joint", "instance"):
            z1 = gather_with_grad(self.contrast_head(e1))  # [W*N, 128]
            z2 = gather_with_grad(self.contrast_head(e2))  # [W*N, 128]
            losses["instance_loss"] = nt_xent(z1, z2, self.temperature)
            total = total + self.instance_weight * losses["instance_loss"]
            backward = backward + self.instance_weight * losses["instance_loss"] * ddp_loss_scale()
        if self.objective in ("joint", "cluster"):
            if self.needs_centroid_init:
                raise RuntimeError(
                    "SCCL's centroids were never initialised: add callbacks.KMeansCentroidInit "
                    "(config group callbacks=sccl) so KMeans fills them before the first step."
                )
            q = self.assign(e0)  # [N, K]
            losses["cluster_loss"] = cluster_kl_loss(q, target_distribution(q))
            total = total + self.cluster_weight * losses["cluster_loss"]
            backward = backward + self.cluster_weight * losses["cluster_loss"]
        batch_size = e1.shape[0]
        self.log("train/loss", total, prog_bar=True, batch_size=batch_size)
        for key, value in losses.items():
            self.log(f"train/{key}", value, batch_size=batch_size)
        return backward

    @torch.no_grad()
    def eval_step(self, batch: dict) -> dict[str, torch.Tensor]:
        out = super().eval_step(batch)
        if not self.needs_centroid_init:
            out["head_pred"] = self.assign(out["embeddings"]).argmax(dim=1)  # eval pooling == training pooling
        return out
