"""PairSupCon: Pairwise Supervised Contrastive Learning (Zhang et al., EMNLP 2021; docs/methods/pairsupcon.md)."""

from __future__ import annotations

import torch
from torch import nn

from lightning_modules.pairsupcon.losses import WEIGHTINGS, pairsupcon_objective
from lightning_modules.shared.base import TextRepresentationModule
from lightning_modules.shared.heads import ContrastHead
from textcore.data_kinds import NLI
from textcore.errors import ConfigError

MODES = ("both", "classification", "instance")


class PairSupCon(TextRepresentationModule):
    """Entailment/contradiction classification + instance discrimination on entailment pairs.

    Loss = L_C + β · L_ID (eq 5 with batch means): L_C the cross-entropy of the bias-free
    Linear(3d, 2) on [u1, u2, |u1-u2|] over all pairs; L_ID the instance-discrimination loss of
    ``lightning_modules.pairsupcon.losses`` on the L2-normalised output of h = Linear(d,d)-ReLU-Linear(d,128)
    (no biases), averaged over the anchors of entailment pairs. ``mode`` selects the paper's
    ablations (Table 4): ``classification`` only, ``instance`` only, or ``both``.

    Batches come from ``datamodules.nli.NLIDataModule``: ``s1``/``s2`` token dicts and
    ``labels`` (1 = entailment, 0 = contradiction). Under DDP the head outputs and the labels
    are gathered from all processes, so the negatives come from the global batch; the
    classification loss is per process (DDP's gradient averaging makes it the global mean).
    """

    paper = ('PairSupCon: Zhang et al., "Pairwise Supervised Contrastive Learning of Sentence Representations", '
             'EMNLP 2021')
    citation = """@inproceedings{zhang-etal-2021-pairwise,
  title = {Pairwise Supervised Contrastive Learning of Sentence Representations},
  author = {Zhang, Dejiao and Li, Shang-Wen and Xiao, Wei and Zhu, Henghui and Nallapati, Ramesh
       and Arnold, Andrew O. and Xiang, Bing},
  booktitle = {Proceedings of EMNLP},
  year = {2021}
}"""
    trains_on = (NLI,)
    default_objective = "sts.dev.spearman"

    @classmethod
    def min_batch_size(cls, method_cfg) -> int:
        # the classification loss alone scores each pair by itself
        return 1 if (method_cfg or {}).get("mode") == "classification" else 2

    def __init__(
        self,
        mode: str = "both",
        weighting: str = "hardneg",
        beta: float = 1.0,
        temperature: float = 0.05,
        projection_dim: int = 128,
        **encoder,
    ):
        if mode not in MODES:
            raise ConfigError(f"method.mode must be one of {MODES}, got '{mode}'")
        if weighting not in WEIGHTINGS:
            raise ConfigError(f"method.weighting must be one of {WEIGHTINGS}, got '{weighting}'")
        if temperature <= 0:
            raise ConfigError(f"method.temperature must be positive, got {temperature}")
        if beta < 0:
            raise ConfigError(f"method.beta must be >= 0, got {beta}")
        super().__init__(**encoder)
        self.save_hyperparameters(ignore=["optimizer"])
        dim = self.encoder.dim
        # heads exist only when their loss is used: DDP rejects parameters that never get a gradient
        self.classifier = nn.Linear(3 * dim, 2, bias=False) if mode in ("both", "classification") else None
        self.contrast_head = ContrastHead(dim, projection_dim, bias=False) if mode in ("both", "instance") else None
        self.mode = mode
        self.weighting = weighting
        self.beta = beta
        self.temperature = temperature

    def compute_losses(self, u1: torch.Tensor, u2: torch.Tensor, labels: torch.Tensor):
        """(losses to log, total, loss to back-propagate); see ``pairsupcon_objective``."""
        return pairsupcon_objective(
            u1,
            u2,
            labels,
            self.classifier.weight if self.classifier is not None else None,
            self.contrast_head,
            self.temperature,
            self.weighting,
            self.beta,
        )

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        if not {"s1", "s2", "labels"} <= set(batch):
            raise KeyError(
                f"PairSupCon needs NLI batches with s1, s2 and labels, got keys {sorted(batch)}; "
                "use dataset=nli (datamodules.nli.NLIDataModule)."
            )
        labels = batch["labels"]  # [M]
        u1, u2 = self.embed_views([batch["s1"], batch["s2"]])  # [M, d] each
        losses, total, backward = self.compute_losses(u1, u2, labels)
        batch_size = labels.shape[0]
        self.log("train/loss", total, batch_size=batch_size)
        for key, value in losses.items():
            self.log(f"train/{key}", value, batch_size=batch_size)
        return backward
