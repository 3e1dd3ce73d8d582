"""Behaviour shared by the methods' LightningModules: encoder, optimiser groups, evaluation."""
from __future__ import annotations

from typing import Callable, Iterable

import lightning as L
import torch
from torch import nn

from lightning_modules.shared.encoder import TextEncoder
from lightning_modules.shared.registry import class_path

# Kinds of training data (a datamodule's ``data_kind``, a method's ``trains_on``)
SHORT_TEXT, SENTENCES, NLI = "short_text", "sentences", "nli"
DATA_KIND_NAMES = {SHORT_TEXT: "short texts (a CSV/TSV)", SENTENCES: "sentences, one per line",
                   NLI: "NLI sentence pairs"}


class TextRepresentationModule(L.LightningModule):
    """Owns a ``TextEncoder``; subclasses add heads and a ``training_step``.

    A method declares what the rest of the framework needs to know about it (docs/extending.md):

    - ``trains_on``: the kinds of data it trains on (``SHORT_TEXT``, ``SENTENCES``, ``NLI``);
      ``validation`` pairs methods with datasets through it.
    - ``default_objective``: the results.json number a sweep maximises under ``objective=auto``.
    - ``check_config``: its own checks of the composed configuration, before any work.
    - ``min_batch_size``: the smallest batch its loss learns from.
    - ``has_cluster_head`` / ``cluster_probabilities``: whether and how it assigns new texts to
      clusters itself (``evaluation.predict``); ``cluster_context`` says whether the head needs other
      texts of a batch beside each new text (AECL's attention over samples).

    Args:
        backbone: backbone alias (``minilm``, ``tiny``), Hub name or local folder.
        pooling: pooler used in training; ``eval_pooling`` the one used for evaluation.
        lr: backbone learning rate; heads use ``lr * head_lr_multiplier`` (docs/methods/shared.md: x100).
        optimizer: a partial optimiser (Hydra ``_partial_: true``); Adam when omitted.
        chunk_tokens, concat_views: encoder speed settings (``TextEncoder``; config keys
            ``encoder_chunk_tokens`` and ``encoder_concat_views``): length-sorted chunks of at most
            ``chunk_tokens`` padded tokens (0: off), and the views of a step in one encoder call.
            With dropout off they change speed, not results (up to float rounding); in training
            they change which dropout mask each text draws, so a run differs as with another seed.
    """

    trains_on: tuple[str, ...] = ()
    default_objective: str | None = None
    cluster_context: bool = False

    @classmethod
    def check_config(cls, method_cfg, batch: dict | None) -> None:
        """Raise ``errors.ConfigError`` for settings this method cannot train with. ``method_cfg`` is the
        composed ``method`` node; ``batch`` holds ``per_device``, ``devices``, ``nodes`` and ``total`` (the
        global batch), or is None while the number of devices is not known yet."""

    @classmethod
    def min_batch_size(cls, method_cfg) -> int:
        """In-batch contrastive losses compare a text with the others of its batch: at least two."""
        return 2

    def has_cluster_head(self) -> bool:
        """Whether ``cluster_probabilities`` can assign new texts (a trained cluster head)."""
        return False

    def cluster_probabilities(self, embeddings: torch.Tensor, context: torch.Tensor | None = None) -> torch.Tensor:
        """[N, K] cluster probabilities of ``embeddings`` [N, d] of new texts (when ``has_cluster_head``).
        ``context`` [C, d]: embeddings of other texts, for methods whose ``cluster_context`` is True."""
        raise NotImplementedError(f"{type(self).__name__} has no cluster head")

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
        checkpoint["module_class"] = class_path(type(self))

    def on_train_batch_end(self, outputs, batch, batch_idx: int) -> None:
        # the last batch of an epoch is often smaller, and an in-batch contrastive loss with fewer
        # negatives is lower: the training-curves plot leaves such steps out (evaluation.plots)
        size = first_dimension(batch)
        if size is not None:
            self.log("train/batch_size", float(size), on_step=True, on_epoch=False, batch_size=size)

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


def first_dimension(batch) -> int | None:
    """Rows of the first tensor found in a (nested) batch: the number of examples of a step."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() else None
    values = batch.values() if isinstance(batch, dict) else batch if isinstance(batch, (list, tuple)) else ()
    for value in values:
        size = first_dimension(value)
        if size is not None:
            return size
    return None
