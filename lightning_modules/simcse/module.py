"""Unsupervised SimCSE (Gao et al., EMNLP 2021), the baseline ClusterNS builds on (docs/methods/clusterns.md).

The positive of a sentence is the same sentence encoded again: the two forward passes draw
different dropout masks. [CLS] pooling with SimCSE's Linear+Tanh MLP during training; the MLP
is dropped at evaluation (``cls_before_pooler``). InfoNCE with τ = 0.05 over the global batch.
"""
from __future__ import annotations

import math
import warnings

import torch

from lightning_modules.shared.base import TextRepresentationModule
from lightning_modules.shared.contrastive import cosine_matrix
from lightning_modules.shared.distributed import ddp_loss_scale, gather_with_grad
from lightning_modules.simcse.losses import infonce_with_hard_negatives
from textcore.data_kinds import SENTENCES, SHORT_TEXT
from textcore.encoding.token_batches import TOKEN_COUNTS
from textcore.errors import ConfigError

TOKEN_KEYS = ("input_ids", "attention_mask", "token_type_ids", TOKEN_COUNTS)
LR_SCHEDULES = ("linear", "constant")


def text_tokens(batch: dict) -> dict[str, torch.Tensor]:
    """The token tensors of one text per row, from either kind of training batch.

    Streaming text batches (``datamodules.streaming_text``) carry the tokens at the top level;
    short-text batches carry ``original`` (when the views differ from the text) or ``view1``.
    SimCSE needs one text per row: its positive is made by dropout, not by augmentation.
    """
    if "input_ids" in batch:
        source = batch
    elif "original" in batch:
        source = batch["original"]
    elif "view1" in batch:
        source = batch["view1"]
    else:
        raise KeyError(f"batch has none of input_ids/original/view1 (keys: {sorted(batch)}); not a text batch")
    return {key: source[key] for key in TOKEN_KEYS if key in source}


class SimCSE(TextRepresentationModule):
    """Unsupervised SimCSE: dropout positives, in-batch negatives gathered over DDP processes.

    Args:
        backbone: alias, Hub name or folder (``TextEncoder.from_name``).
        pooling: training pooler; ``cls`` ([CLS] + MLP) as in SimCSE.
        eval_pooling: pooler for evaluation; ``cls_before_pooler`` (SimCSE, ClusterNS) or ``mean``.
        temperature: τ.
        lr: one learning rate for everything when ``head_lr_multiplier`` is 1 (SimCSE: 3e-5 for
            BERT-base, 1e-5 for RoBERTa-base).
        lr_schedule: ``linear`` decay to 0 over the run (the Hugging Face Trainer default that
            SimCSE and ClusterNS train with) or ``constant``.
        prompt_denoise: with ``prompt_templates`` (PromptBERT: ``method=promptbert``), subtract each
            template's state with no sentence from the training views (template denoising).

    With ``prompt_templates`` the two views are the batch in the first and in the second template
    (PromptBERT's positive pair), embedded by the state at the template's [MASK] token; everything
    after the embeddings (the loss, ClusterNS's clustering) is unchanged.
    """

    encoder_defaults = {"pooling": "cls", "eval_pooling": "cls_before_pooler", "lr": 3e-5, "head_lr_multiplier": 1.0}
    paper = 'SimCSE: Gao et al., "SimCSE: Simple Contrastive Learning of Sentence Embeddings", EMNLP 2021'
    citation = """@inproceedings{gao-etal-2021-simcse,
  title = {{SimCSE}: Simple Contrastive Learning of Sentence Embeddings},
  author = {Gao, Tianyu and Yao, Xingcheng and Chen, Danqi},
  booktitle = {Proceedings of EMNLP},
  year = {2021}
}"""
    trains_on = (SENTENCES, SHORT_TEXT)  # on short texts each text is a sentence
    default_objective = "sts_selection.best"

    def __init__(
        self,
        temperature: float = 0.05,
        lr_schedule: str = "linear",
        prompt_denoise: bool = False,
        **encoder,
    ):
        if temperature <= 0:
            raise ConfigError(f"method.temperature must be positive, got {temperature}")
        if lr_schedule not in LR_SCHEDULES:
            raise ConfigError(f"method.lr_schedule must be one of {LR_SCHEDULES}, got '{lr_schedule}'")
        super().__init__(**encoder)
        self.save_hyperparameters(ignore=["optimizer"])
        self.temperature = temperature
        self.lr_schedule = lr_schedule
        self.prompt_denoise = bool(prompt_denoise)
        if self.prompt_denoise and self.encoder.prompt is None:
            raise ConfigError("method.prompt_denoise needs method.prompt_templates (docs/methods/clusterns.md)")

    # -- encoding -------------------------------------------------------------------------------------
    def two_views(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """z1, z2: [n, d] each; the batch embedded twice (independent dropout), one forward pass
        of the batch stacked twice when the encoder concatenates views (the default)."""
        tokens = text_tokens(batch)
        if self.encoder.prompt is not None:
            return self.encoder.prompt_views(tokens, self.prompt_denoise)  # [n, d] each
        z1, z2 = self.embed_views([tokens, tokens])  # [n, d] each
        return z1, z2

    def contrastive_inputs(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """Both views gathered over processes: [N, d] each, N = n x world size."""
        z1, z2 = self.two_views(batch)
        return gather_with_grad(z1), gather_with_grad(z2)

    # -- training -------------------------------------------------------------------------------------
    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        z1, z2 = self.contrastive_inputs(batch)  # [N, d] each
        loss = infonce_with_hard_negatives(z1, z2, self.temperature)
        self.log_similarities(cosine_matrix(z1.detach(), z2.detach()))
        self.log("train/loss", loss, batch_size=z1.shape[0])
        return loss * ddp_loss_scale()

    def log_similarities(self, sim: torch.Tensor) -> None:
        """Mean cosine of positive pairs, of in-batch negatives, and of the whole [N, N] matrix."""
        n = sim.shape[0]
        diagonal = sim.diagonal()  # [N]
        # the off-diagonal mean from sums: a boolean-mask index would wait for the GPU to count the mask
        negatives = (sim.sum() - diagonal.sum()) / (n * (n - 1)) if n > 1 else sim.new_tensor(float("nan"))
        values = {"sim_positive": diagonal.mean(), "sim_in_batch_negative": negatives, "sim_batch_mean": sim.mean()}
        for key, value in values.items():
            self.log(f"train/{key}", value, batch_size=n)

    def configure_optimizers(self):
        optimizer = super().configure_optimizers()
        if self.lr_schedule == "constant":
            return optimizer
        total = self.trainer.estimated_stepping_batches
        if not math.isfinite(total) or total <= 0:
            warnings.warn("no finite number of training steps is known; using a constant learning rate", stacklevel=2)
            return optimizer
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: max(0.0, 1.0 - step / total))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}
