"""Text encoder: a Hugging Face backbone plus a pooler (docs/methods/shared.md).

The pieces, each in its own module: backbones by name (:mod:`textcore.encoding.backbone`), the poolings
(:mod:`textcore.encoding.pooling`; the prompt ones in :mod:`textcore.encoding.prompt_pooling`), a batch in
length-sorted chunks, with or without cached gradients (:mod:`textcore.encoding.chunking`), and a list of texts in
sorted batches (:mod:`textcore.encoding.inference`). :class:`TextEncoder` holds the weights (``backbone`` and the
pooler's ``mlp``: the keys of every checkpoint) and the settings, and composes them.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import nn

from textcore.device_settings import OUTSIDE_TRAINING
from textcore.encoding import prompt_pooling
from textcore.encoding.backbone import load_backbone, load_tokenizer
from textcore.encoding.chunking import backbone_mask, cached_forward, chunked_forward
from textcore.encoding.inference import encode_texts
from textcore.encoding.pooling import MASK_STATE, PROMPT_POOLINGS, check_pooling, pool, pooler_mlp
from textcore.encoding.prompt import PromptTemplates
from textcore.encoding.token_batches import TOKEN_COUNTS
from textcore.errors import ConfigError


@dataclass(frozen=True)
class EncoderSettings:
    """What a :class:`TextEncoder` is built with besides its backbone: the pooler, the token limit and the speed
    settings (config keys ``method.<name>``, conf/method/encoder/default.yaml; ``chunk_tokens`` is
    ``encoder_chunk_tokens``). No field has a default: a method's module passes its configuration's values (the
    speed settings chosen for the run's device, textcore/device_settings.py), and work outside training takes
    :meth:`outside_training`."""

    pooling: str
    max_length: int
    chunk_tokens: int
    concat_views: bool
    grad_cache_tokens: int
    prompt_templates: Sequence[str] | None

    @classmethod
    def outside_training(cls, pooling: str = "mean", max_length: int = 32,
                         prompt_templates: Sequence[str] | None = None) -> "EncoderSettings":
        """An encoder that embeds texts outside training (evaluation tools, the K scan before training, tests):
        ``textcore.device_settings.OUTSIDE_TRAINING``'s chunks; views in one call and no cached gradients, which act in
        training steps only."""
        return cls(pooling, max_length, OUTSIDE_TRAINING["encoder_chunk_tokens"], concat_views=True,
                   grad_cache_tokens=0, prompt_templates=prompt_templates)

    def check_speed(self) -> None:
        """A clear error for a chunk or cache budget that cannot be used."""
        if self.chunk_tokens is None:
            raise ConfigError("encoder_chunk_tokens is null: a training run chooses it for its device "
                              "(textcore/device_settings.py); a model built outside one needs a number (0: one "
                              "padded call per batch)")
        if int(self.chunk_tokens) < 0:
            raise ConfigError(f"encoder_chunk_tokens must be >= 0 (0: no chunking), got {self.chunk_tokens}")
        if self.grad_cache_tokens is None or int(self.grad_cache_tokens) < 0:
            raise ConfigError(f"grad_cache_tokens must be >= 0 (0: off), got {self.grad_cache_tokens}")


class TextEncoder(nn.Module):
    """Backbone + pooler. ``cls`` adds SimCSE's Linear+Tanh MLP on the [CLS] state.

    Speed settings (the embeddings are the same up to float rounding whatever they are):

    - ``chunk_tokens``: every forward sorts its rows by token count and runs the backbone on
      chunks of at most this many padded tokens, each cut to its own longest text, then puts
      the rows back in batch order (:func:`~textcore.encoding.chunking.chunked_forward`). Losses computed on
      the full batch see the same negatives, values and gradients, with far fewer padded tokens. Dropout
      draws an independent mask for every token of every row, chunked or not. 0 turns it off
      (one call on the batch as padded by the collator). A batch whose chunks would save less
      than 10 % of the padded tokens (e.g. evaluation's length-sorted batches) goes through in
      one call cut to its longest text. Only right-padded batches are chunked; others go
      through unchanged.
    - ``grad_cache_tokens``: in a training step, mini-batches of at most this many padded tokens with cached
      gradients (:mod:`textcore.encoding.grad_cache`); 0 turns it off.
    - ``concat_views``: ``forward_views`` embeds the views of a training step (SCCL's three,
      AECL's two, PairSupCon's s1/s2, SimCSE's doubled batch) in one call, so their texts are
      sorted and chunked together; false embeds each view by its own call.
    """

    def __init__(self, backbone: nn.Module, tokenizer, settings: EncoderSettings):
        super().__init__()
        check_pooling(settings.pooling, has_templates=bool(settings.prompt_templates))
        settings.check_speed()
        # from_pretrained returns the model in eval mode; Lightning keeps module modes as found,
        # so without this dropout would be off in training (and virtual views would be identical)
        self.backbone = backbone.train()
        self.tokenizer = tokenizer
        self.pooling = settings.pooling
        self.max_length = settings.max_length
        self.dim = backbone.config.hidden_size
        self.mlp = pooler_mlp(settings.pooling, self.dim)
        templates = settings.prompt_templates
        self.prompt = PromptTemplates(tokenizer, templates) if templates else None
        self.chunk_tokens = int(settings.chunk_tokens)
        self.concat_views = bool(settings.concat_views)
        self.grad_cache_tokens = int(settings.grad_cache_tokens)

    @classmethod
    def from_name(cls, name: str, settings: EncoderSettings, **tiny_kwargs) -> "TextEncoder":
        """The backbone and tokenizer named ``name`` (``textcore.encoding.backbone``) with ``settings``."""
        return cls(load_backbone(name, **tiny_kwargs), load_tokenizer(name), settings)

    def compile_backbone(self, dynamic: bool = True, backend: str = "inductor") -> None:
        """``torch.compile`` the backbone in place (``nn.Module.compile``: its weights and checkpoint keys stay as
        they are). ``dynamic``: one graph for every batch and chunk shape instead of a recompilation for each
        new one (the encoder's calls change width and rows from step to step)."""
        self.backbone.compile(dynamic=dynamic, backend=backend)

    def tokenize(self, texts: Sequence[str], pad_to_max: bool = False) -> dict[str, torch.Tensor]:
        """Pad to the longest text of the batch (or to ``max_length`` when asked)."""
        return self.tokenizer(
            list(texts),
            padding="max_length" if pad_to_max else "longest",
            truncation=True,
            max_length=self.max_length,
            return_tensors="pt",
        )

    def forward(self, input_ids, attention_mask, pooling: str | None = None, token_counts=None,
                **extra) -> torch.Tensor:
        """Pooled embeddings [B, d] of a token batch, in row order (chunked when ``chunk_tokens``).

        ``token_counts``: each row's token count as a Python list when the batch is right-padded (collators
        add it, :func:`with_token_counts`); without it the counts are read from ``attention_mask``, which on a
        GPU waits for the device."""
        pooling = pooling or self.pooling
        if pooling in PROMPT_POOLINGS:
            return prompt_pooling.prompted(self, input_ids, attention_mask, pooling)
        if pooling == MASK_STATE and self.prompt is None:
            raise ConfigError("the mask-state pooling needs prompt templates (method.prompt_templates)")
        if token_counts is not None and len(token_counts) != input_ids.shape[0]:
            raise ValueError(f"token_counts has {len(token_counts)} rows, the batch {input_ids.shape[0]}")
        run = functools.partial(self._pooled, pooling=pooling)
        token_type_ids = extra.get("token_type_ids")
        if self.grad_cache_tokens and self.training and torch.is_grad_enabled():
            params = [p for p in self.parameters() if p.requires_grad]
            return cached_forward(run, self.backbone, params, input_ids, attention_mask, token_type_ids,
                                  token_counts, self.grad_cache_tokens)
        return chunked_forward(run, self.backbone, input_ids, attention_mask, token_type_ids, token_counts,
                               self.chunk_tokens)

    def _pooled(self, input_ids, attention_mask, token_type_ids=None, pooling: str = "mean", inputs_embeds=None,
                full: bool | None = None) -> torch.Tensor:
        """One backbone call on these rows, pooled. ``inputs_embeds``: the rows' word embeddings, given in place
        of ``input_ids`` (position and token-type embeddings are added inside); ``full``: known on the host that
        no row has padding (None: not known)."""
        kwargs = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        if inputs_embeds is None:
            kwargs["input_ids"] = input_ids
        else:
            kwargs["inputs_embeds"] = inputs_embeds
        mask = backbone_mask(self.backbone, attention_mask, full, inputs_embeds)
        hidden = self.backbone(attention_mask=mask, **kwargs).last_hidden_state  # [b, T, d]
        mask_id = None if self.prompt is None else self.prompt.mask_id
        return pool(hidden, attention_mask, input_ids, pooling, self.mlp, mask_id)

    def forward_views(self, views: Sequence[dict], pooling: str | None = None) -> list[torch.Tensor]:
        """Embeddings [n_v, d] of each token batch in ``views`` (the views of one training step).

        With ``concat_views`` the views are padded to a common width and concatenated, so one
        forward sorts and chunks all their texts together; otherwise one forward per view.
        """
        if not self.concat_views or len(views) == 1:
            return [self(**view, pooling=pooling) for view in views]
        keys = [k for k in ("input_ids", "attention_mask", "token_type_ids") if all(k in v for v in views)]
        counts = [v.get(TOKEN_COUNTS) for v in views]
        width = max(v["input_ids"].shape[1] for v in views)
        pad_id = self.tokenizer.pad_token_id or 0
        joined = {
            key: torch.cat(
                [
                    nn.functional.pad(v[key], (0, width - v[key].shape[1]), value=pad_id if key == "input_ids" else 0)
                    for v in views
                ]
            )  # [sum n_v, width]
            for key in keys
        }
        if all(c is not None for c in counts):  # padding on the right stays on the right
            joined[TOKEN_COUNTS] = [n for c in counts for n in c]
        return list(self(**joined, pooling=pooling).split([v["input_ids"].shape[0] for v in views]))

    def prompt_views(self, tokens: dict, denoise: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """The two training views of a prompt method ([n, d] each):
        :func:`textcore.encoding.prompt_pooling.prompt_views`."""
        return prompt_pooling.prompt_views(self, tokens, denoise)

    def encode(self, texts: Sequence[str], batch_size: int = 128, pooling: str | None = None,
               sort_by_length: bool = True, pad_to_max: bool = False) -> torch.Tensor:
        """[len(texts), d] on CPU in input order, in eval mode: :func:`textcore.encoding.inference.encode_texts`."""
        return encode_texts(self, texts, batch_size, pooling, sort_by_length, pad_to_max)
