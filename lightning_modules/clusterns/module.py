"""ClusterNS: Clustering-aware Negative Sampling (Deng et al., Findings of ACL 2023; docs/methods/clusterns.md).

Unsupervised SimCSE plus in-batch clustering with K momentum centroids. After the warm-up, every
anchor gets the N second-nearest centroids of the batch as extra (hard) negatives, and pairs that
share a cluster (false-negative candidates) are held by a bidirectional margin loss:
L = L_cl + λ·L_bml.
"""
from __future__ import annotations

import logging

import torch

from lightning_modules.clusterns.losses import BML_REDUCTIONS, bml_loss
from lightning_modules.shared.contrastive import cosine_matrix
from lightning_modules.shared.distributed import ddp_loss_scale, is_distributed
from lightning_modules.shared.inbatch_clustering import (
    CENTROID_UPDATES,
    HARD_NEGATIVE_RANKS,
    assign,
    clustering_diagnostics,
    greedy_init_indices,
    hard_negative_select,
    momentum_update,
    random_assign,
    same_cluster_mask,
)
from lightning_modules.simcse.losses import infonce_with_hard_negatives
from lightning_modules.simcse.module import SimCSE
from textcore.errors import ConfigError

log = logging.getLogger(__name__)

HARD_NEGATIVES = (*HARD_NEGATIVE_RANKS, "none")
FALSE_NEGATIVES = ("bml", "none")
CLUSTER_ASSIGNMENTS = ("nearest", "random")
# Where the batch's momentum update of the centroids falls relative to the loss (docs/methods/clusterns.md; the paper
# does not fix it). The centroids move once per step in every order; what differs is which
# centroids and which assignment the hard negatives and the same-cluster mask come from.
UPDATE_ORDERS = ("before_loss", "after_loss", "between")


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"method.{name} must be one of {choices}, got '{value}'")


class ClusterNS(SimCSE):
    """SimCSE + in-batch clustering for hard negatives and false negatives (docs/methods/clusterns.md).

    Which embeddings are clustered: the anchors' training embeddings z_i = MLP([CLS]) of the first
    dropout view, the vectors the InfoNCE loss sees (reference code: ``cls.cluster(z1, ...)``),
    gathered over all DDP processes and detached. Centroids are [K, d] in that space.

    Schedule (Algorithm 1): while ``clustering_started`` is false the loss is plain SimCSE. On the
    first batch whose mean cosine of the global (z1, z2) matrix is <= ``kmean_cosine`` (σ), the
    centroids are initialised from that batch (``greedy_init_indices`` on the z1·z2 cosine matrix,
    first-view vectors as centroids) and that batch's step is stored in ``clustering_start_step``;
    clustering losses start with the next batch. Every later batch: assign each z_i to its most
    similar centroid (or at random: ablation ``cluster_assignment=random``), momentum-update the
    centroids (``centroid_update``: mean = paper, sum = reference), take each sample's second
    nearest centroid as its hard negative (``hard_negatives``: second | nearest | none;
    weight μ via log μ on the logits), and apply the BML to same-cluster pairs
    (``false_negatives``: bml | none; ``bml_reduction``: members = average over member pairs,
    matrix = reference's average over the N×N matrix).

    ``update_order`` says which centroids the loss sees (the update itself is always made with
    the assignment to the centroids before it):
    - ``before_loss`` (default; the reference code): update first, then assign the batch again to
      the UPDATED centroids; that fresh assignment gives the same-cluster mask and the updated
      centroids give the hard negatives. Algorithm 1 lists the update (line 7) before the hard
      negatives (8) and the BML (9), which this order follows;
    - ``after_loss``: mask and hard negatives from the centroids before this batch's update;
    - ``between``: mask from the assignment to the old centroids, hard negatives from the updated
      ones (neither the code's nor a stated paper order; kept to compare with older runs).
    With ``cluster_assignment=random`` the random assignment gives the mask in every order.

    State: ``centroids``, ``clustering_started`` and ``clustering_start_step`` are buffers, so
    they are saved in checkpoints and a resumed run neither re-initialises nor restarts the
    warm-up. DDP: every rank computes the clustering on the same gathered embeddings with a
    generator seeded by (seed, step), so all ranks agree; the centroids are also broadcast from
    rank 0 after each change, which keeps them bit-identical whatever the hardware does.
    """

    encoder_defaults = {"pooling": "cls", "eval_pooling": "cls_before_pooler", "lr": 5e-5, "head_lr_multiplier": 1.0}
    paper = ('ClusterNS: Deng et al., "Clustering-Aware Negative Sampling for Unsupervised Sentence '
             'Representation", Findings of ACL 2023')
    citation = """@inproceedings{deng-etal-2023-clustering,
  title = {Clustering-Aware Negative Sampling for Unsupervised Sentence Representation},
  author = {Deng, Jinghao and Wan, Fanqi and Yang, Tao and Quan, Xiaojun and Wang, Rui},
  booktitle = {Findings of ACL},
  year = {2023}
}"""
    @classmethod
    def check_config(cls, method_cfg, batch: dict | None) -> None:
        k = (method_cfg or {}).get("num_clusters")
        if isinstance(k, int) and batch is not None and k > batch["total"]:
            raise ConfigError(
                f"method.num_clusters={k}: ClusterNS initialises its K centroids from one batch, but the global "
                f"batch is {batch['total']} (batch_size={batch['per_device']} x {batch['devices']} device(s) x "
                f"{batch['nodes']} node(s)). Lower method.num_clusters to <= {batch['total']} (default 32) or raise "
                f"batch_size so that batch_size x devices >= {k} (docs/methods/clusterns.md)."
            )

    def __init__(
        self,
        num_clusters: int = 128,
        temperature: float = 0.05,
        momentum: float = 1e-3,
        kmean_cosine: float = 0.4,
        hard_negative_weight: float = 1.0,
        bml_weight: float = 1e-3,
        bml_alpha: float = 0.0,
        bml_beta: float = 0.3,
        hard_negatives: str = "second",
        false_negatives: str = "bml",
        cluster_assignment: str = "nearest",
        centroid_update: str = "mean",
        bml_reduction: str = "members",
        update_order: str = "before_loss",
        seed: int = 0,
        lr_schedule: str = "linear",
        prompt_denoise: bool = False,
        **encoder,
    ):
        _check_choice("hard_negatives", hard_negatives, HARD_NEGATIVES)
        _check_choice("false_negatives", false_negatives, FALSE_NEGATIVES)
        _check_choice("cluster_assignment", cluster_assignment, CLUSTER_ASSIGNMENTS)
        _check_choice("centroid_update", centroid_update, CENTROID_UPDATES)
        _check_choice("bml_reduction", bml_reduction, BML_REDUCTIONS)
        _check_choice("update_order", update_order, UPDATE_ORDERS)
        if num_clusters is None or num_clusters < 2:
            raise ConfigError(f"method.num_clusters (K) must be >= 2 for ClusterNS, got {num_clusters}")
        if not 0.0 <= momentum <= 1.0:
            raise ConfigError(f"method.momentum (γ) must be in [0, 1], got {momentum}")
        if hard_negatives != "none" and hard_negative_weight <= 0:
            raise ConfigError("method.hard_negative_weight (μ) must be > 0; use method.hard_negatives=none instead")
        super().__init__(temperature=temperature, lr_schedule=lr_schedule, prompt_denoise=prompt_denoise, **encoder)
        self.save_hyperparameters(ignore=["optimizer"])
        self.num_clusters = num_clusters
        self.momentum = momentum
        self.kmean_cosine = kmean_cosine
        self.hard_negative_weight = hard_negative_weight
        self.bml_weight = bml_weight
        self.bml_alpha = bml_alpha
        self.bml_beta = bml_beta
        self.hard_negatives = hard_negatives
        self.false_negatives = false_negatives
        self.cluster_assignment = cluster_assignment
        self.centroid_update = centroid_update
        self.bml_reduction = bml_reduction
        self.update_order = update_order
        self.seed = seed
        self.register_buffer("centroids", torch.zeros(num_clusters, self.encoder.dim))
        self.register_buffer("clustering_started", torch.tensor(False))
        self.register_buffer("clustering_start_step", torch.tensor(-1, dtype=torch.long))
        # the step reads this copy of the buffer (no wait for the GPU); loads and changes keep them equal
        self._clustering_started = False
        self.register_load_state_dict_pre_hook(_read_clustering_started)
        self._warned_small_batch = False

    # -- checks ---------------------------------------------------------------------------------------
    def on_fit_start(self) -> None:
        batch_size = getattr(getattr(self.trainer, "datamodule", None), "batch_size", None)
        world = self.trainer.world_size
        if not self._clustering_started and batch_size and batch_size * world < self.num_clusters:
            raise ConfigError(
                f"ClusterNS initialises its K={self.num_clusters} centroids from one batch, but the global "
                f"batch is {batch_size} x {world} process(es) = {batch_size * world}. Set batch_size so that "
                f"batch_size x devices >= method.num_clusters, or lower method.num_clusters "
                "(docs/methods/clusterns.md)."
            )

    # -- clustering state -------------------------------------------------------------------------------
    def _generator(self, step: int) -> torch.Generator:
        """Same draws on every rank and after a resume: seeded by (seed, step)."""
        return torch.Generator().manual_seed((int(self.seed) * 1_000_003 + int(step)) % (2**63))

    def _sync_centroids(self) -> None:
        if is_distributed():
            torch.distributed.broadcast(self.centroids, src=0)

    @torch.no_grad()
    def start_clustering(self, x: torch.Tensor, sim: torch.Tensor, step: int) -> bool:
        """Initialise the centroids from this batch; False (and no change) when N < K."""
        n = x.shape[0]
        if n < self.num_clusters:
            if not self._warned_small_batch:
                log.warning("ClusterNS: batch of %d < K=%d at step %d; initialisation waits for a full batch",
                            n, self.num_clusters, step)
                self._warned_small_batch = True
            return False
        chosen = greedy_init_indices(sim, self.num_clusters, self._generator(step))  # [K]
        self.centroids.copy_(x[chosen])
        self.clustering_started.fill_(True)
        self._clustering_started = True
        self.clustering_start_step.fill_(step)
        self._sync_centroids()
        if self._trainer is None or self._trainer.is_global_zero:
            log.info("ClusterNS: clustering starts at step %d (batch mean cosine %.4f <= kmean_cosine %.4f)",
                     step, sim.mean().item(), self.kmean_cosine)
        return True

    @torch.no_grad()
    def cluster_step(
        self, x: torch.Tensor, step: int
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """Assign, update the centroids, pick hard negatives, in the order ``update_order`` says.

        Returns (assignment [N] for the same-cluster mask, hard negatives [N, d] or None, the [K, d]
        centroids the loss sees). ``self.centroids`` holds the updated centroids afterwards in every order.
        """
        old = self.centroids.clone()  # [K, d]
        if self.cluster_assignment == "random":
            assignment = random_assign(x.shape[0], self.num_clusters, self._generator(step), x.device)  # [N]
        else:
            assignment, _ = assign(x, old)  # [N]
        self.centroids.copy_(momentum_update(old, x, assignment, self.momentum, self.centroid_update))
        self._sync_centroids()
        seen = old if self.update_order == "after_loss" else self.centroids  # [K, d]
        if self.update_order == "before_loss" and self.cluster_assignment != "random":
            assignment, _ = assign(x, self.centroids)  # [N] fresh assignment to the updated centroids
        hard = None
        if self.hard_negatives != "none":
            _, hard, _ = hard_negative_select(x, seen, self.hard_negatives)  # [N, d]
        return assignment, hard, seen

    # -- training -------------------------------------------------------------------------------------
    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        z1, z2 = self.contrastive_inputs(batch)  # [N, d] each, gathered over processes
        sim = cosine_matrix(z1, z2)  # [N, N]
        sim_value = sim.detach()
        n = z1.shape[0]
        step = self.global_step
        anchors = z1.detach().to(self.centroids.dtype)  # [N, d]; centroids stay float32 under mixed precision
        assignment, hard, seen = None, None, None
        if self._clustering_started:
            assignment, hard, seen = self.cluster_step(anchors, step)
            hard = hard.to(z1.dtype) if hard is not None else None
        elif sim_value.mean().item() <= self.kmean_cosine:  # the warm-up's one read a step, until clustering starts
            self.start_clustering(anchors, sim_value.float(), step)

        loss_cl = infonce_with_hard_negatives(z1, z2, self.temperature, hard, self.hard_negative_weight)
        total = loss_cl
        if assignment is not None and self.false_negatives == "bml":
            loss_bml = bml_loss(sim, same_cluster_mask(assignment), self.bml_alpha, self.bml_beta, self.bml_reduction)
            total = total + self.bml_weight * loss_bml
            self.log("train/bml_loss", loss_bml, batch_size=n)

        self.log("train/loss", total, batch_size=n)
        self.log("train/cl_loss", loss_cl, batch_size=n)
        self.log_number("train/clustering_active", assignment is not None, batch_size=n)
        self.log_similarities(sim_value)
        if assignment is not None and self.logs_this_step():  # diagnostics read values: only when they are written
            stats = clustering_diagnostics(sim_value.float(), anchors, seen, assignment,
                                           None if hard is None else hard.to(anchors.dtype))
            for key, value in stats.items():
                if value == value:  # NaN (no same-cluster pair in this batch) is not logged
                    self.log(f"train/{key}", value, batch_size=n)
        return total * ddp_loss_scale()


def _read_clustering_started(module, state_dict, prefix, *args) -> None:
    saved = state_dict.get(prefix + "clustering_started")
    if saved is not None:
        module._clustering_started = bool(saved)
