"""Token counts of a batch, counted on the host where it is tokenised: the lengths that group texts of similar
length, and the length-sorted chunks a batch is encoded in (docs/gpu.md)."""
from __future__ import annotations

import logging
from typing import Sequence

import numpy as np
import torch

COUNT_BLOCK = 8192  # texts tokenised at a time when only their token counts are kept


def token_lengths(tokenizer, texts: Sequence[str], max_length: int, block: int = COUNT_BLOCK) -> np.ndarray:
    """Number of tokens of each text after truncation to ``max_length`` (special tokens included), int32 [n].

    Padding to the longest text of a batch costs what the longest token count says, so this is
    the key for grouping texts of similar length. The texts are tokenised ``block`` at a time and only the counts
    are kept: a million texts tokenised at once held 5 GB of token lists.
    """
    from textcore.console import PhaseProgress

    counts = np.empty(len(texts), dtype=np.int32)
    direct = _direct(tokenizer)
    with PhaseProgress("tokenising", len(texts), "texts", logger=logging.getLogger(__name__)) as progress:
        for start in range(0, len(texts), block):
            part = [texts[i] for i in range(start, min(start + block, len(texts)))]
            if direct is not None:
                counts[start:start + len(part)] = direct.count(part, max_length)
            else:
                ids = tokenizer(part, truncation=True, max_length=max_length)["input_ids"]
                counts[start:start + len(part)] = [len(row) for row in ids]
            progress.advance(len(part))
    return counts


def tokenize_batch(tokenizer, texts: Sequence[str], max_length: int, pad_to_max: bool = False) -> dict:
    """``texts`` as tensors padded on the right to the batch's longest text (or to ``max_length``), with
    :data:`TOKEN_COUNTS`: what ``tokenizer(texts, padding="longest" | "max_length", truncation=True,
    max_length=max_length, return_tensors="pt")`` gives (tested equal), about twice as fast for short texts when
    the tokenizer has a Rust tokenizer (the wrapper's per-call work was half of an evaluation pass of a small
    model)."""
    direct = _direct(tokenizer)
    if direct is None:
        return with_token_counts(tokenizer(list(texts), padding="max_length" if pad_to_max else "longest",
                                           truncation=True, max_length=max_length, return_tensors="pt"))
    rows, counts = direct.encode(texts, max_length)
    width = max_length if pad_to_max else int(counts.max(initial=0))
    batch = {}
    for name in direct.names:
        fill = direct.pad_values[name]
        array = np.full((len(rows), width), fill, dtype=np.int64)
        for i, row in enumerate(rows):
            array[i, :len(row[name])] = row[name]
        batch[name] = torch.from_numpy(array)
    mask = np.arange(width)[None, :] < counts[:, None]  # [B, T] ones then zeros
    batch["attention_mask"] = torch.from_numpy(mask.astype(np.int64))
    batch[TOKEN_COUNTS] = counts.tolist()
    return batch


class _DirectTokenizer:
    """A copy of a transformers fast tokenizer's Rust tokenizer, with truncation on and padding off. A copy, so
    that the wrapper's own settings (which it changes at each call) and these never meet."""

    def __init__(self, tokenizer):
        from tokenizers import Tokenizer

        self.rust = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
        self.rust.no_padding()
        self.max_length: int | None = None
        self.direction = getattr(tokenizer, "truncation_side", "right")
        self.names = [n for n in tokenizer.model_input_names if n in ("input_ids", "token_type_ids")]
        self.pad_values = {"input_ids": tokenizer.pad_token_id or 0,
                           "token_type_ids": getattr(tokenizer, "pad_token_type_id", 0)}

    def encode(self, texts: Sequence[str], max_length: int) -> tuple[list[dict], np.ndarray]:
        encodings = self._encodings(texts, max_length)
        fields = {"input_ids": "ids", "token_type_ids": "type_ids"}
        rows = [{n: getattr(e, fields[n]) for n in self.names} for e in encodings]
        return rows, np.fromiter((len(e) for e in encodings), dtype=np.int32, count=len(encodings))

    def count(self, texts: Sequence[str], max_length: int) -> np.ndarray:
        """Token counts [n] only: the ids are not converted to Python lists."""
        encodings = self._encodings(texts, max_length)
        return np.fromiter((len(e) for e in encodings), dtype=np.int32, count=len(encodings))

    def _encodings(self, texts: Sequence[str], max_length: int) -> list:
        if max_length != self.max_length:
            self.rust.enable_truncation(max_length, stride=0, strategy="longest_first", direction=self.direction)
            self.max_length = max_length
        return self.rust.encode_batch(list(texts), add_special_tokens=True)


def _direct(tokenizer) -> _DirectTokenizer | None:
    """The direct path for ``tokenizer`` (made once and kept on it), or None where its output could differ: a slow
    tokenizer, padding on the left, inputs other than ids, token types and the attention mask."""
    if "_direct_tokenizer" in vars(tokenizer):
        return vars(tokenizer)["_direct_tokenizer"]
    direct = None
    if getattr(tokenizer, "is_fast", False) and getattr(tokenizer, "padding_side", "right") == "right" \
            and set(tokenizer.model_input_names) <= {"input_ids", "token_type_ids", "attention_mask"}:
        try:
            direct = _DirectTokenizer(tokenizer)
        except Exception:  # noqa: BLE001 - a tokenizer the copy does not handle keeps the plain path
            direct = None
    vars(tokenizer)["_direct_tokenizer"] = direct
    return direct


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
