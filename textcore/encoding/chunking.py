"""A token batch through the backbone in length-sorted chunks (docs/methods/shared.md, "speed settings").

Every function here takes ``run(input_ids, attention_mask, token_type_ids, inputs_embeds=None, full=None)``: one
backbone call on some rows, pooled to [b, d] (``TextEncoder._pooled``). :func:`chunked_forward` sorts a batch's
rows by token count, runs them in chunks of at most a token budget, each cut to its own longest text, and puts the
rows back in batch order; :func:`cached_forward` does the same with cached gradients
(:mod:`textcore.encoding.grad_cache`). A text's embedding does not depend on the other rows of its batch (padding
is masked), so the chunks give the embeddings of one padded call with far fewer padded tokens.
"""
from __future__ import annotations

import functools
from typing import Callable, Sequence

import torch
from torch import nn

from textcore.encoding.grad_cache import cached_encoding
from textcore.encoding.token_batches import host_token_counts, length_chunks

# backbones whose embedding layer, given ``inputs_embeds`` = word_embeddings(input_ids), computes
# exactly what it computes from ``input_ids`` (positions from the sequence, no scaling)
WORDS_FIRST = ("bert", "roberta", "xlm-roberta", "distilbert", "mpnet")
# chunk a batch only when its chunks hold fewer padded tokens than this share of one padded call (a call has a cost)
CHUNK_IF_BELOW = 0.9

Run = Callable[..., torch.Tensor]


def no_padding(counts: Sequence[int] | None, width: int) -> bool | None:
    """Whether every row fills ``width`` tokens (None: counts not known on the host)."""
    return None if counts is None else all(int(n) >= width for n in counts)


def backbone_mask(backbone: nn.Module, attention_mask: torch.Tensor, full: bool | None, inputs_embeds=None):
    """The mask the backbone is given. Given a [B, T] mask, transformers asks the device whether any token is
    padding (to drop the mask and reach the flash kernel), which waits for the GPU; a mask already in the
    [B, 1, 1, T] form of the attention implementation is used as it is. No padding known on the host (``full``):
    no mask at all (what transformers would have chosen). Other implementations get the [B, T] mask."""
    implementation = getattr(backbone.config, "_attn_implementation", None)
    if full:
        return None
    if implementation == "sdpa":
        return attention_mask.bool()[:, None, None, :]  # [B, 1, 1, T], True = attend
    if implementation == "eager":
        dtype = inputs_embeds.dtype if inputs_embeds is not None else backbone.get_input_embeddings().weight.dtype
        keep = attention_mask[:, None, None, :].to(dtype)  # [B, 1, 1, T]
        return (1.0 - keep) * torch.finfo(dtype).min  # added to the scores
    return attention_mask


def batch_words(backbone: nn.Module, input_ids: torch.Tensor) -> torch.Tensor | None:
    """[B, T, d]: the batch's word embeddings looked up once, for backbones that take them in place of the ids
    (else None). A lookup per chunk would give the embedding table a dense [vocab, d] gradient per chunk."""
    if backbone.config.model_type not in WORDS_FIRST:
        return None
    return backbone.get_input_embeddings()(input_ids)


def _rows(tensor: torch.Tensor | None, index: torch.Tensor, width: int) -> torch.Tensor | None:
    """Rows ``index`` of a [B, T, ...] tensor cut to ``width`` tokens (None stays None)."""
    return None if tensor is None else tensor.index_select(0, index)[:, :width]


def _batch_order(parts: Sequence[torch.Tensor], order: torch.Tensor) -> torch.Tensor:
    """The chunks' rows [B, d], given in chunk ``order`` [B], put back in batch order."""
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(order.numel(), device=order.device)
    return torch.cat(list(parts)).index_select(0, inverse)


def chunked_forward(run: Run, backbone: nn.Module, input_ids, attention_mask, token_type_ids,
                    token_counts: Sequence[int] | None, chunk_tokens: int) -> torch.Tensor:
    """[B, d] in row order. ``chunk_tokens`` 0: one call on the batch as padded. A batch whose chunks would save
    less than ``1 - CHUNK_IF_BELOW`` of the padded tokens (rows of nearly one length, e.g. evaluation's
    length-sorted batches) goes through in one call cut to its longest text; a batch not right-padded (counts not
    known on the host) in one call as it is."""
    if not chunk_tokens:
        return run(input_ids, attention_mask, token_type_ids, full=no_padding(token_counts, input_ids.shape[1]))
    counts = token_counts if token_counts is not None else host_token_counts(attention_mask)
    if counts is None:
        return run(input_ids, attention_mask, token_type_ids)
    width = max(max(counts, default=1), 1)
    chunks = length_chunks(counts, chunk_tokens)
    if sum(len(rows) * counts[rows[-1]] for rows in chunks) > CHUNK_IF_BELOW * len(counts) * width:
        types = None if token_type_ids is None else token_type_ids[:, :width]
        return run(input_ids[:, :width], attention_mask[:, :width], types, full=no_padding(counts, width))
    words = batch_words(backbone, input_ids) if len(chunks) > 1 and torch.is_grad_enabled() else None
    parts = []
    for rows in chunks:
        width = max(int(counts[rows[-1]]), 1)  # rows are sorted by length: the last is the longest
        index = torch.tensor(rows, device=input_ids.device)  # [b]
        parts.append(run(_rows(input_ids, index, width), _rows(attention_mask, index, width),
                         _rows(token_type_ids, index, width), inputs_embeds=_rows(words, index, width),
                         full=no_padding([counts[i] for i in rows], width)))
    order = torch.tensor([i for rows in chunks for i in rows], device=input_ids.device)  # [B]
    return _batch_order(parts, order)


def _with_embeds(run: Run, embeds: torch.Tensor) -> torch.Tensor:
    """``run`` given its rows' word embeddings (the one argument :func:`cached_encoding` passes a chunk)."""
    return run(inputs_embeds=embeds)


def cached_forward(run: Run, backbone: nn.Module, params: Sequence[torch.Tensor], input_ids, attention_mask,
                   token_type_ids, token_counts: Sequence[int] | None, budget: int) -> torch.Tensor:
    """[B, d] with cached gradients: mini-batches of at most ``budget`` padded tokens, length-sorted when the batch
    is right-padded, the graph of one mini-batch at a time. ``params``: the trainable parameters ``run`` uses."""
    counts = token_counts if token_counts is not None else host_token_counts(attention_mask)
    right_padded = counts is not None
    if not right_padded:  # cannot cut the padding: every row counts as the full width, in batch order
        counts = [attention_mask.shape[1]] * attention_mask.shape[0]
    # looked up outside the cached function, once for the batch (see batch_words)
    words = batch_words(backbone, input_ids)
    chunks, rows, widths = [], [], []
    for members in length_chunks(counts, budget):
        width = max(int(max(counts[i] for i in members)), 1)
        index = torch.tensor(members, device=input_ids.device)  # [b]
        full = no_padding([counts[i] for i in members], width) if right_padded else None
        chunk = functools.partial(run, _rows(input_ids, index, width), _rows(attention_mask, index, width),
                                  _rows(token_type_ids, index, width), full=full)
        chunks.append(chunk if words is None else functools.partial(_with_embeds, chunk))
        rows.append(index)
        widths.append(width)
    return cached_encoding(chunks, rows, params, input_ids.device, words, widths if words is not None else None)
