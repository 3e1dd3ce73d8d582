"""Behaviour shared by the methods' LightningModules: encoder, optimiser groups, evaluation."""
from __future__ import annotations

import functools
import inspect
from typing import Iterable

import lightning as L
import torch
from omegaconf import Container, OmegaConf
from torch import nn

from lightning_modules.shared.registry import class_path
from textcore.encoding.encoder import EncoderSettings, TextEncoder


class _Required:
    """The value in :data:`ENCODER_SETTINGS` of a setting without a default: the caller must give it."""

    def __repr__(self) -> str:
        return "<required>"


REQUIRED = _Required()
# The encoder settings of every method, defined once (config keys method.<name>; each method's yaml
# passes them); a method changes a default in its ``encoder_defaults`` (SimCSE: [CLS] pooling, one rate).
ENCODER_SETTINGS = {
    "backbone": "minilm",  # alias (minilm, tiny), Hub name or local folder
    "pooling": "mean",  # pooler in training
    "eval_pooling": None,  # pooler for evaluation (None: the training pooler)
    "max_length": 32,  # tokens per text
    "lr": 5e-6,  # backbone learning rate
    "head_lr_multiplier": 100.0,  # everything else (heads, centroids, pooler MLP) trains at lr x this
    "optimizer": None,  # a partial optimiser (Hydra ``_partial_: true``); Adam when None
    # speed (config keys encoder_chunk_tokens / encoder_concat_views): length-sorted chunks of at most this
    # many padded tokens (0: off), and the views of a step in one encoder call; with dropout off they change
    # speed, not results; in training they change which dropout mask each text draws (like another seed).
    # No default for the chunks: a training run chooses them for its device (textcore/device_settings.py)
    "chunk_tokens": REQUIRED,
    "concat_views": True,
    # cached gradients (docs/cached_gradients.md): > 0 runs the encoder in mini-batches of at most this many
    # padded tokens and holds the graph of one at a time; the gradients are those of the whole batch
    "grad_cache_tokens": 0,
    # PromptBERT templates (textcore/encoding/prompt.py): one or two; the prompt poolings need them
    "prompt_templates": None,
}


class TextRepresentationModule(L.LightningModule):
    """Owns a ``TextEncoder``; subclasses add heads and a ``training_step``.

    A method declares what the rest of the framework needs to know about it (docs/extending.md):

    - ``paper`` and ``citation``: the paper it implements, in one line and as BibTeX (model cards).
    - ``trains_on``: the kinds of data it trains on (``SHORT_TEXT``, ``SENTENCES``, ``NLI``);
      ``validation`` pairs methods with datasets through it.
    - ``default_objective``: the results.json number a sweep maximises under ``objective=auto``.
    - ``check_config``: its own checks of the composed configuration, before any work.
    - ``min_batch_size``: the smallest batch its loss learns from.
    - ``has_cluster_head`` / ``cluster_probabilities``: whether and how it assigns new texts to
      clusters itself (``evaluation.model_io.predict``); ``cluster_context`` says whether the head needs other
      texts of a batch beside each new text (AECL's attention over samples).

    The encoder settings every method takes are :data:`ENCODER_SETTINGS` (config keys ``method.<name>``),
    passed to the subclass as ``**encoder``; a method changes a default in its ``encoder_defaults``.
    """

    paper: str = ""  # one line: method, authors, title, venue (model cards, reports)
    citation: str = ""  # BibTeX of that paper
    trains_on: tuple[str, ...] = ()
    default_objective: str | None = None
    cluster_context: bool = False

    @classmethod
    def check_config(cls, method_cfg, batch: dict | None) -> None:
        """Raise ``textcore.errors.ConfigError`` for settings this method cannot train with. ``method_cfg`` is the
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

    encoder_defaults: dict = {}
    # what embeds token batches instead of the encoder during one evaluation pass (an ONNX Runtime export of it:
    # the end-of-run pass of a run with encode_backend=onnx*; lightning_modules.shared.eval_outputs sets it)
    pass_embedder = None

    def __init__(self, **encoder):
        super().__init__()
        unknown = sorted(set(encoder) - set(ENCODER_SETTINGS))
        if unknown:
            raise TypeError(f"{type(self).__name__} got unknown argument(s) {unknown}; encoder settings are "
                            f"{sorted(ENCODER_SETTINGS)}")
        s = {**ENCODER_SETTINGS, **self.encoder_defaults, **encoder}
        missing = sorted(key for key, value in s.items() if value is REQUIRED)
        if missing:
            raise TypeError(f"{type(self).__name__} needs {missing}: chunk_tokens is encoder_chunk_tokens, which "
                            "a training run chooses for its device (textcore/device_settings.py); give the number of "
                            "padded tokens per encoder call (0: one padded call per batch)")
        settings = EncoderSettings(s["pooling"], s["max_length"], s["chunk_tokens"], s["concat_views"],
                                   s["grad_cache_tokens"], s["prompt_templates"])
        self.encoder = TextEncoder.from_name(s["backbone"], settings)
        self.eval_pooling = s["eval_pooling"] or s["pooling"]
        self.lr = s["lr"]
        self.head_lr_multiplier = s["head_lr_multiplier"]
        self.optimizer_factory = s["optimizer"]
        self.encoder_settings = {k: v for k, v in s.items() if k != "optimizer"}

    def save_hyperparameters(self, *args, ignore=None, frame=None, logger: bool = True) -> None:
        """Lightning's, plus the resolved encoder settings (defaults included), so that a checkpoint
        names its backbone, pooling and length even when the constructor got them from defaults."""
        super().save_hyperparameters(*args, ignore=ignore, frame=frame or inspect.currentframe().f_back,
                                     logger=logger)
        self.hparams.update({k: v for k, v in self.encoder_settings.items() if k not in self.hparams})
        for key, value in list(self.hparams.items()):  # checkpoints load with weights_only: plain values only
            if isinstance(value, Container):
                self.hparams[key] = OmegaConf.to_container(value, resolve=True)

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
        on_gpu = any(p.is_cuda for g in groups for p in g["params"])
        return build_optimizer(self.optimizer_factory or torch.optim.Adam, groups, fused=on_gpu)

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        # lets tools (validation of ckpt_path, evaluation.benchmarks.sts --checkpoint) tell which module wrote the file
        checkpoint["module_class"] = class_path(type(self))

    def on_train_batch_end(self, outputs, batch, batch_idx: int) -> None:
        # the last batch of an epoch is often smaller, and an in-batch contrastive loss with fewer
        # negatives is lower: the training-curves plot leaves such steps out (evaluation.run_report.plots)
        size = first_dimension(batch)
        if size is not None:
            self.log_number("train/batch_size", size, batch_size=size)

    def log_number(self, name: str, value: float, batch_size: int) -> None:
        """Log a Python number for this step, at logging steps only: ``self.log`` makes a device tensor of it,
        a host-to-device copy that waits for the GPU, and the value of a step that is not written is never read."""
        if self.logs_this_step():
            self.log(name, float(value), on_step=True, on_epoch=False, batch_size=batch_size)

    def logs_this_step(self) -> bool:
        """Whether Lightning writes the logged values after this training step (every ``log_every_n_steps``,
        and when training stops). Values that cost a read from the GPU (diagnostics) are computed then only;
        True outside a Trainer."""
        trainer = self._trainer
        if trainer is None:
            return True
        connector = getattr(trainer, "_logger_connector", None)
        return bool(getattr(connector, "should_update_logs", True))

    def embed(self, tokens: dict[str, torch.Tensor], pooling: str | None = None) -> torch.Tensor:
        """Embeddings [N, d] of one token batch (the encoder chunks it by length when set to)."""
        if self.pass_embedder is not None:
            return self.pass_embedder.embed_tokens(tokens, pooling=pooling)
        return self.encoder(**tokens, pooling=pooling)

    def embed_views(self, views: list[dict[str, torch.Tensor]], pooling: str | None = None) -> list[torch.Tensor]:
        """Embeddings of each view of a training step ([N_v, d] each), through one encoder path
        for every method: one call for all views when ``concat_views``, else one per view."""
        return self.encoder.forward_views(views, pooling=pooling)

    @torch.no_grad()
    def eval_step(self, batch: dict) -> dict[str, torch.Tensor]:
        """Embeddings of the original texts for evaluation; subclasses add head predictions."""
        return {"embeddings": self.embed(batch["original"], pooling=self.eval_pooling)}


FUSED_OPTIMIZERS = (torch.optim.Adam, torch.optim.AdamW)


def build_optimizer(factory, groups: list[dict], fused: bool) -> torch.optim.Optimizer:
    """``factory(groups)``; with ``fused``, Adam and AdamW get ``fused=True`` (one kernel for every parameter
    instead of a few per tensor) unless the configuration chose ``fused`` or ``foreach`` itself. The model's
    step calls it with ``fused`` on CUDA only, where the fused kernels are the fast path; the CPU keeps
    torch's default kernels (its measured numbers)."""
    target = factory.func if isinstance(factory, functools.partial) else factory
    chosen = set(factory.keywords) if isinstance(factory, functools.partial) else set()
    if fused and target in FUSED_OPTIMIZERS and not chosen & {"fused", "foreach"}:
        return factory(groups, fused=True)
    return factory(groups)


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
