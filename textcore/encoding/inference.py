"""Texts in, embeddings out: a :class:`~textcore.encoding.encoder.TextEncoder` over a list of texts outside
training (evaluation, prediction, the K scan), in batches sorted by length."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from textcore.console import PhaseProgress, text_bar
from textcore.encoding.token_batches import token_lengths, tokenize_batch


@torch.no_grad()
def encode_texts(encoder, texts: Sequence[str], batch_size: int = 128, pooling: str | None = None,
                 sort_by_length: bool = True, pad_to_max: bool = False) -> torch.Tensor:
    """Embed ``texts`` in eval mode, returning [len(texts), d] on CPU in input order (the encoder's mode is put
    back afterwards).

    Sorting by length keeps padding small; the output order is restored. A pass of more than a few seconds
    writes progress lines (``textcore.console.PhaseProgress``).
    """
    was_training = encoder.training
    encoder.eval()
    device = next(encoder.parameters()).device
    if sort_by_length:
        lengths = token_lengths(encoder.tokenizer, texts, encoder.max_length)
        order = np.lexsort((np.arange(len(texts)), lengths))  # by token count, then position
    else:
        order = np.arange(len(texts))
    out = torch.empty(len(texts), encoder.dim)
    with PhaseProgress("embedding", len(texts), "texts") as progress, text_bar(len(texts)) as bar:
        for start in range(0, len(texts), batch_size):
            idx = order[start : start + batch_size]
            batch = tokenize_batch(encoder.tokenizer, [texts[i] for i in idx], encoder.max_length, pad_to_max)
            batch = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
            out[torch.from_numpy(idx)] = encoder(**batch, pooling=pooling).float().cpu()
            progress.advance(len(idx))
            bar.update(len(idx))
    encoder.train(was_training)
    return out
