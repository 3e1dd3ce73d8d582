"""Text encoder: a Hugging Face backbone plus a pooler (docs/methods/shared.md).

Backbones by name: :mod:`textcore.encoding.backbone`; token counts and chunk plans:
:mod:`textcore.encoding.token_batches`.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from torch import nn

from textcore.device_settings import OUTSIDE_TRAINING
from textcore.encoding.backbone import (
    load_backbone,
    load_tokenizer,
)
from textcore.encoding.grad_cache import cached_encoding
from textcore.encoding.prompt import PromptTemplates, mask_states
from textcore.encoding.token_batches import (
    TOKEN_COUNTS,
    host_token_counts,
    length_chunks,
    token_lengths,
    tokenize_batch,
)
from textcore.errors import ConfigError

# prompt poolings (PromptBERT; textcore/encoding/prompt.py) wrap each text in the first template and take
# the state at its [MASK]: ``prompt`` through the MLP (training), ``prompt_before_pooler`` without it,
# ``prompt_denoised`` without it minus the empty template's state (template denoising), and ``prompt_text`` as the
# authors' final test does it: the template filled as text (a period added to a sentence without a final
# one), the whole string tokenized
PROMPT_POOLINGS = ("prompt", "prompt_before_pooler", "prompt_denoised", "prompt_text")
POOLINGS = ("mean", "cls", "cls_before_pooler", *PROMPT_POOLINGS)
MLP_POOLINGS = ("cls", "prompt")
# the state at the [MASK] token of texts already wrapped in a template (used inside the prompt poolings)
MASK_STATE = "mask"
# backbones whose embedding layer, given ``inputs_embeds`` = word_embeddings(input_ids), computes
# exactly what it computes from ``input_ids`` (positions from the sequence, no scaling)
WORDS_FIRST = ("bert", "roberta", "xlm-roberta", "distilbert", "mpnet")
# chunk a batch only when its chunks hold fewer padded tokens than this share of one padded call (a call has a cost)
CHUNK_IF_BELOW = 0.9


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Average of token states over non-padding positions."""
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)  # [B, T, 1]
    return (hidden * mask).sum(1) / mask.sum(1).clamp_min(1e-9)  # [B, d]


def _with_embeds(run, embeds):
    """``run`` (a partial of ``TextEncoder._pooled``) given its rows' word embeddings."""
    return run(inputs_embeds=embeds)


def _no_padding(counts: Sequence[int] | None, width: int) -> bool | None:
    """Whether every row fills ``width`` tokens (None: counts not known on the host)."""
    return None if counts is None else all(int(n) >= width for n in counts)


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


class TextEncoder(nn.Module):
    """Backbone + pooler. ``cls`` adds SimCSE's Linear+Tanh MLP on the [CLS] state.

    Speed settings (the embeddings are the same up to float rounding whatever they are):

    - ``chunk_tokens``: every forward sorts its rows by token count and runs the backbone on
      chunks of at most this many padded tokens, each cut to its own longest text, then puts
      the rows back in batch order (``length_chunks``). A text's embedding does not depend on
      the other rows of its batch (padding is masked), so losses computed on the full batch
      see the same negatives, values and gradients, with far fewer padded tokens. Dropout
      draws an independent mask for every token of every row, chunked or not. 0 turns it off
      (one call on the batch as padded by the collator). A batch whose chunks would save less
      than 10 % of the padded tokens (e.g. evaluation's length-sorted batches) goes through in
      one call cut to its longest text. Only right-padded batches are chunked; others go
      through unchanged.
    - ``concat_views``: ``forward_views`` embeds the views of a training step (SCCL's three,
      AECL's two, PairSupCon's s1/s2, SimCSE's doubled batch) in one call, so their texts are
      sorted and chunked together; false embeds each view by its own call.
    """

    def __init__(self, backbone: nn.Module, tokenizer, settings: EncoderSettings):
        super().__init__()
        pooling, chunk_tokens, grad_cache_tokens = settings.pooling, settings.chunk_tokens, settings.grad_cache_tokens
        if pooling not in POOLINGS:
            raise ConfigError(f"method.pooling must be one of {POOLINGS} (method.eval_pooling too), got '{pooling}'")
        if chunk_tokens is None:
            raise ConfigError("encoder_chunk_tokens is null: run.py chooses it for the run's device "
                              "(textcore/device_settings.py); a model built outside run.py needs a number (0: one "
                              "padded call per batch)")
        if int(chunk_tokens) < 0:
            raise ConfigError(f"encoder_chunk_tokens must be >= 0 (0: no chunking), got {chunk_tokens}")
        # from_pretrained returns the model in eval mode; Lightning keeps module modes as found,
        # so without this dropout would be off in training (and virtual views would be identical)
        self.backbone = backbone.train()
        self.tokenizer = tokenizer
        self.pooling = pooling
        self.max_length = settings.max_length
        self.dim = backbone.config.hidden_size
        self.mlp = (
            nn.Sequential(nn.Linear(self.dim, self.dim), nn.Tanh()) if pooling in MLP_POOLINGS else None
        )
        templates = settings.prompt_templates
        self.prompt = PromptTemplates(tokenizer, templates) if templates else None
        if pooling in PROMPT_POOLINGS and self.prompt is None:
            raise ConfigError(f"pooling '{pooling}' needs prompt templates (method.prompt_templates), e.g. "
                              "['*cls*_This_sentence_:_\"*sent_0*\"_means*mask*.*sep+*']")
        self.chunk_tokens = int(chunk_tokens)
        self.concat_views = bool(settings.concat_views)
        if grad_cache_tokens is None or int(grad_cache_tokens) < 0:
            raise ConfigError(f"grad_cache_tokens must be >= 0 (0: off), got {grad_cache_tokens}")
        self.grad_cache_tokens = int(grad_cache_tokens)

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
        token_type_ids = extra.get("token_type_ids")
        if pooling in PROMPT_POOLINGS:
            return self._prompted(input_ids, attention_mask, pooling)
        if pooling == MASK_STATE and self.prompt is None:
            raise ConfigError("the mask-state pooling needs prompt templates (method.prompt_templates)")
        if token_counts is not None and len(token_counts) != input_ids.shape[0]:
            raise ValueError(f"token_counts has {len(token_counts)} rows, the batch {input_ids.shape[0]}")
        if self.grad_cache_tokens and self.training and torch.is_grad_enabled():
            return self._cached(input_ids, attention_mask, token_type_ids, pooling, token_counts)
        if not self.chunk_tokens:
            return self._pooled(input_ids, attention_mask, token_type_ids, pooling,
                                full=_no_padding(token_counts, input_ids.shape[1]))
        counts = token_counts if token_counts is not None else host_token_counts(attention_mask)
        if counts is None:
            return self._pooled(input_ids, attention_mask, token_type_ids, pooling)
        width = max(max(counts, default=1), 1)
        chunks = length_chunks(counts, self.chunk_tokens)
        if sum(len(rows) * counts[rows[-1]] for rows in chunks) > CHUNK_IF_BELOW * len(counts) * width:
            # rows of nearly one length (evaluation's length-sorted batches): one call, cut to the longest
            kwargs = {} if token_type_ids is None else {"token_type_ids": token_type_ids[:, :width]}
            return self._pooled(input_ids[:, :width], attention_mask[:, :width], pooling=pooling,
                                full=_no_padding(counts, width), **kwargs)
        # The word-embedding lookup of every chunk would give its own dense [vocab, d] gradient in
        # backward; looked up once for the batch, the embedding table gets one.
        words = None
        if len(chunks) > 1 and torch.is_grad_enabled() and self.backbone.config.model_type in WORDS_FIRST:
            words = self.backbone.get_input_embeddings()(input_ids)  # [B, T, d]
        parts = []
        for rows in chunks:
            width = max(int(counts[rows[-1]]), 1)  # rows are sorted by length: the last is the longest
            index = torch.tensor(rows, device=input_ids.device)  # [b]
            parts.append(
                self._pooled(
                    input_ids.index_select(0, index)[:, :width],  # [b, width]
                    attention_mask.index_select(0, index)[:, :width],  # [b, width]
                    None if token_type_ids is None else token_type_ids.index_select(0, index)[:, :width],
                    pooling,
                    None if words is None else words.index_select(0, index)[:, :width],  # [b, width, d]
                    full=_no_padding([counts[i] for i in rows], width),
                )
            )
        order = torch.tensor([i for rows in chunks for i in rows], device=input_ids.device)  # [B]
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(order.numel(), device=order.device)
        return torch.cat(parts).index_select(0, inverse)  # [B, d] back in batch order

    def _prompted(self, input_ids, attention_mask, pooling: str) -> torch.Tensor:
        """[B, d]: the texts wrapped in the first template, the [MASK] state, denoised or through the MLP."""
        if self.prompt is None:
            raise ConfigError(f"pooling '{pooling}' needs prompt templates (method.prompt_templates)")
        if pooling == "prompt_text":
            return self._prompt_filled_as_text(input_ids, attention_mask)
        wrapped, lengths = self.prompt.wrap({"input_ids": input_ids, "attention_mask": attention_mask}, 0)
        state = self(**wrapped, pooling=MASK_STATE)  # [B, d]
        if pooling == "prompt_denoised":
            state = state - self.template_noise(0, lengths)
        if pooling == "prompt" and self.mlp is not None:
            state = self.mlp(state)
        return state

    def _prompt_filled_as_text(self, input_ids, attention_mask) -> torch.Tensor:
        """[B, d]: each row's text (its tokens decoded, without the special tokens) put into the first
        template as text and tokenized whole; the [MASK] state, no MLP."""
        lengths = attention_mask.sum(dim=1).tolist()
        texts = self.tokenizer.batch_decode([input_ids[i, 1 : int(n) - 1].tolist() for i, n in enumerate(lengths)])
        filled = [self.prompt.fill_text(text.strip(), self.tokenizer.mask_token) for text in texts]
        limit = min(int(self.tokenizer.model_max_length), int(self.backbone.config.max_position_embeddings))
        tokens = self.tokenizer(filled, padding=True, truncation=True, max_length=limit, return_tensors="pt")
        device = input_ids.device
        return self(input_ids=tokens["input_ids"].to(device), attention_mask=tokens["attention_mask"].to(device),
                    pooling=MASK_STATE)

    def prompt_views(self, tokens: dict, denoise: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """The two training views of a prompt method ([n, d] each): the batch in the first and the second
        template (the first twice when only one is given; dropout still differs), [MASK] states,
        minus each template's empty state when ``denoise``, then the MLP when the pooling has one."""
        second = 1 if len(self.prompt) > 1 else 0
        (v1, n1), (v2, n2) = self.prompt.wrap(tokens, 0), self.prompt.wrap(tokens, second)
        s1, s2 = self.forward_views([v1, v2], pooling=MASK_STATE)
        if denoise:
            s1, s2 = s1 - self.template_noise(0, n1), s2 - self.template_noise(second, n2)
        if self.mlp is not None:
            s1, s2 = self.mlp(s1), self.mlp(s2)
        return s1, s2

    def template_noise(self, index: int, lengths: torch.Tensor) -> torch.Tensor:
        """[B, d]: the [MASK] state of template ``index`` with no sentence, placed as after a sentence of
        each row's length (template denoising: subtracted from the sentence's state). One backbone
        call per distinct length; gradients flow through it when enabled, as in the authors' training."""
        unique, inverse = lengths.unique(return_inverse=True)  # [U], [B]
        batch = self.prompt.empty_batch(index, unique.to(next(self.parameters()).device))
        hidden = self.backbone(**batch).last_hidden_state  # [U, T0, d]
        return mask_states(hidden, batch["input_ids"], self.prompt.mask_id)[inverse.to(hidden.device)]  # [B, d]

    def _cached(self, input_ids, attention_mask, token_type_ids, pooling: str, token_counts=None) -> torch.Tensor:
        """Embeddings [B, d] with cached gradients (``grad_cache_tokens``; textcore/encoding/grad_cache.py):
        mini-batches of at most ``grad_cache_tokens`` padded tokens, length-sorted when the batch is
        right-padded, the graph of one mini-batch at a time."""
        counts = token_counts if token_counts is not None else host_token_counts(attention_mask)
        right_padded = counts is not None
        if not right_padded:  # cannot cut the padding: every row counts as the full width, in batch order
            counts = [attention_mask.shape[1]] * attention_mask.shape[0]
        # the word embeddings looked up once for the batch, outside the cached function: a lookup per mini-batch
        # would give the embedding table a dense [vocab, d] gradient per mini-batch in the replays
        words = None
        if self.backbone.config.model_type in WORDS_FIRST:
            words = self.backbone.get_input_embeddings()(input_ids)  # [B, T, d]
        chunks, rows, widths = [], [], []
        for members in length_chunks(counts, self.grad_cache_tokens):
            width = max(int(max(counts[i] for i in members)), 1)
            index = torch.tensor(members, device=input_ids.device)  # [b]
            ids, mask = input_ids.index_select(0, index)[:, :width], attention_mask.index_select(0, index)[:, :width]
            types = None if token_type_ids is None else token_type_ids.index_select(0, index)[:, :width]
            full = _no_padding([counts[i] for i in members], width) if right_padded else None
            run = functools.partial(self._pooled, ids, mask, types, pooling, full=full)
            chunks.append(run if words is None else functools.partial(_with_embeds, run))
            rows.append(index)
            widths.append(width)
        params = [p for p in self.parameters() if p.requires_grad]
        return cached_encoding(chunks, rows, params, input_ids.device, words, widths if words is not None else None)

    def _pooled(
        self, input_ids, attention_mask, token_type_ids=None, pooling: str = "mean", inputs_embeds=None,
        full: bool | None = None,
    ) -> torch.Tensor:
        """``full``: known on the host that no row has padding (None: not known)."""
        kwargs = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        if inputs_embeds is None:
            kwargs["input_ids"] = input_ids
        else:  # the word embeddings of input_ids; position and token-type embeddings are added inside
            kwargs["inputs_embeds"] = inputs_embeds
        mask = self._backbone_mask(attention_mask, full, inputs_embeds)
        hidden = self.backbone(attention_mask=mask, **kwargs).last_hidden_state
        if pooling == MASK_STATE:
            return mask_states(hidden, input_ids, self.prompt.mask_id)
        if pooling == "mean":
            return mean_pool(hidden, attention_mask)
        cls_state = hidden[:, 0]  # [B, d]
        if pooling == "cls" and self.mlp is not None:
            return self.mlp(cls_state)
        return cls_state

    def _backbone_mask(self, attention_mask: torch.Tensor, full: bool | None, inputs_embeds=None):
        """The mask the backbone is given. Given a [B, T] mask, transformers asks the device whether any token
        is padding (to drop the mask and reach the flash kernel), which waits for the GPU; a mask already in
        the [B, 1, 1, T] form of the attention implementation is used as it is. No padding known on the host:
        no mask at all (what transformers would have chosen). Other implementations get the [B, T] mask."""
        implementation = getattr(self.backbone.config, "_attn_implementation", None)
        if full:
            return None
        if implementation == "sdpa":
            return attention_mask.bool()[:, None, None, :]  # [B, 1, 1, T], True = attend
        if implementation == "eager":
            dtype = (inputs_embeds.dtype if inputs_embeds is not None
                     else self.backbone.get_input_embeddings().weight.dtype)
            keep = attention_mask[:, None, None, :].to(dtype)  # [B, 1, 1, T]
            return (1.0 - keep) * torch.finfo(dtype).min  # added to the scores
        return attention_mask

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

    @torch.no_grad()
    def encode(
        self,
        texts: Sequence[str],
        batch_size: int = 128,
        pooling: str | None = None,
        sort_by_length: bool = True,
        pad_to_max: bool = False,
    ) -> torch.Tensor:
        """Embed ``texts`` in eval mode, returning [len(texts), d] on CPU in input order.

        Sorting by length keeps padding small; the output order is restored. A pass of more than a few seconds
        writes progress lines (``textcore.console.PhaseProgress``).
        """
        from textcore.console import PhaseProgress

        was_training = self.training
        self.eval()
        device = next(self.parameters()).device
        if sort_by_length:
            lengths = token_lengths(self.tokenizer, texts, self.max_length)
            order = np.lexsort((np.arange(len(texts)), lengths))  # by token count, then position
        else:
            order = np.arange(len(texts))
        out = torch.empty(len(texts), self.dim)
        with PhaseProgress("embedding", len(texts), "texts") as progress:
            for start in range(0, len(texts), batch_size):
                idx = order[start : start + batch_size]
                batch = tokenize_batch(self.tokenizer, [texts[i] for i in idx], self.max_length, pad_to_max)
                batch = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
                out[torch.from_numpy(idx)] = self(**batch, pooling=pooling).float().cpu()
                progress.advance(len(idx))
        self.train(was_training)
        return out
