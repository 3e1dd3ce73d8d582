"""Token counts of a batch, counted on the host where it is tokenised: the lengths that group texts of similar
length, and the length-sorted chunks a batch is encoded in (docs/gpu.md)."""
from __future__ import annotations

from typing import Sequence

import torch


def token_lengths(tokenizer, texts: Sequence[str], max_length: int) -> list[int]:
    """Number of tokens of each text after truncation to ``max_length`` (special tokens included).

    Padding to the longest text of a batch costs what the longest token count says, so this is
    the key for grouping texts of similar length.
    """
    encoded = tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"]
    return [len(ids) for ids in encoded]


def length_chunks(lengths: Sequence[int], chunk_tokens: int) -> list[list[int]]:
    """Row indices of a batch grouped into length-sorted chunks of at most ``chunk_tokens`` padded tokens.

    Rows are sorted by (token count, row); a chunk grows while (rows + 1) x (its longest row)
    stays within the budget, and holds at least one row. Each chunk is then padded only to its
    own longest text, so a batch of mostly short texts no longer pays for its longest one.
    ``chunk_tokens <= 0`` gives one chunk with every row in batch order.
    """
    if chunk_tokens <= 0:
        return [list(range(len(lengths)))]
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    chunks: list[list[int]] = []
    current: list[int] = []
    for i in order:
        if current and (len(current) + 1) * max(int(lengths[i]), 1) > chunk_tokens:
            chunks.append(current)
            current = []
        current.append(i)
    if current:
        chunks.append(current)
    return chunks


# key of a token batch holding each row's token count as a Python list (None: not right-padded), made on the
# host where the batch is tokenised, so planning chunks never reads a value back from the GPU
TOKEN_COUNTS = "token_counts"


def host_token_counts(attention_mask: torch.Tensor) -> list[int] | None:
    """Each row's token count when the mask is ones then zeros (right padding), else None. For masks still on
    the host (collators, ``encode``): on a GPU tensor this would wait for the device."""
    lengths = attention_mask.sum(dim=1)  # [B]
    return lengths.tolist() if _right_padded(attention_mask, lengths) else None


def with_token_counts(tokens: dict) -> dict:
    """``tokens`` (a tokenizer's output, on the host) with :data:`TOKEN_COUNTS` added."""
    tokens = dict(tokens)
    tokens[TOKEN_COUNTS] = host_token_counts(tokens["attention_mask"])
    return tokens


def _right_padded(attention_mask: torch.Tensor, lengths: torch.Tensor) -> bool:
    """True when every row's mask is ones then zeros (padding only on the right)."""
    positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)  # [T]
    return bool(torch.equal(attention_mask.bool(), positions.unsqueeze(0) < lengths.unsqueeze(1)))
