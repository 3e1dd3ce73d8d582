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
        chunk_tokens, concat_views: encoder speed settings (``TextEncoder``; config keys
            ``encoder_chunk_tokens`` and ``encoder_concat_views``): length-sorted chunks of at most
            ``chunk_tokens`` padded tokens (0: off), and the views of a step in one encoder call.
            With dropout off they change speed, not results (up to float rounding); in training
            they change which dropout mask each text draws, so a run differs as with another seed.
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
        chunk_tokens: int = 1024,
        concat_views: bool = True,
    ):
        super().__init__()
        self.encoder = TextEncoder.from_name(
            backbone, pooling=pooling, max_length=max_length, chunk_tokens=chunk_tokens, concat_views=concat_views
        )
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

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        # lets tools (validation of ckpt_path, evaluation.sts --checkpoint) tell which module wrote the file
        checkpoint["module_class"] = f"{type(self).__module__}.{type(self).__qualname__}"

    def embed(self, tokens: dict[str, torch.Tensor], pooling: str | None = None) -> torch.Tensor:
        """Embeddings [N, d] of one token batch (the encoder chunks it by length when set to)."""
        return self.encoder(**tokens, pooling=pooling)

    def embed_views(self, views: list[dict[str, torch.Tensor]], pooling: str | None = None) -> list[torch.Tensor]:
        """Embeddings of each view of a training step ([N_v, d] each), through one encoder path
        for every method: one call for all views when ``concat_views``, else one per view."""
        return self.encoder.forward_views(views, pooling=pooling)

    @torch.no_grad()
    def eval_step(self, batch: dict) -> dict[str, torch.Tensor]:
        """Embeddings of the original texts for evaluation; subclasses add head predictions."""
        return {"embeddings": self.embed(batch["original"], pooling=self.eval_pooling)}
