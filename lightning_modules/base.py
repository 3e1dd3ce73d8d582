"""Behaviour shared by the methods' LightningModules: encoder, optimiser groups, evaluation."""
from __future__ import annotations

from typing import Callable, Iterable

import lightning as L
import torch
from torch import nn

from lightning_modules.encoder import TextEncoder


class TextRepresentationModule(L.LightningModule):
    """Owns a ``TextEncoder``; subclasses add heads and a ``training_step``.

    Args:
        backbone: backbone alias (``minilm``, ``tiny``), Hub name or local folder.
        pooling: pooler used in training; ``eval_pooling`` the one used for evaluation.
        lr: backbone learning rate; heads use ``lr * head_lr_multiplier`` (SPEC §0: x100).
        optimizer: a partial optimiser (Hydra ``_partial_: true``); Adam when omitted.
    """

    def __init__(
        self,
        backbone: str = "minilm",
        pooling: str = "mean",
        eval_pooling: str | None = None,
        max_length: int = 32,
        lr: float = 5e-6,
        head_lr_multiplier: float = 100.0,
        optimizer: Callable[..., torch.optim.Optimizer] | None = None,
    ):
        super().__init__()
        self.encoder = TextEncoder.from_name(backbone, pooling=pooling, max_length=max_length)
        self.eval_pooling = eval_pooling or pooling
        self.lr = lr
        self.head_lr_multiplier = head_lr_multiplier
        self.optimizer_factory = optimizer

    def head_parameters(self) -> Iterable[nn.Parameter]:
        """Everything outside the backbone (heads, centroids, pooler MLP) trains at the head rate."""
        backbone = {id(p) for p in self.encoder.backbone.parameters()}
        return [p for p in self.parameters() if id(p) not in backbone and p.requires_grad]

    def configure_optimizers(self):
        groups = [
            {"params": [p for p in self.encoder.backbone.parameters() if p.requires_grad], "lr": self.lr},
            {"params": list(self.head_parameters()), "lr": self.lr * self.head_lr_multiplier},
        ]
        groups = [g for g in groups if g["params"]]
        factory = self.optimizer_factory or torch.optim.Adam
        return factory(groups)

    def embed(self, tokens: dict[str, torch.Tensor], pooling: str | None = None) -> torch.Tensor:
        return self.encoder(**tokens, pooling=pooling)

    @torch.no_grad()
    def eval_step(self, batch: dict) -> dict[str, torch.Tensor]:
        """Embeddings of the original texts for evaluation; subclasses add head predictions."""
        return {"embeddings": self.embed(batch["original"], pooling=self.eval_pooling)}
