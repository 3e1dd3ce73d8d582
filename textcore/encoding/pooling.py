"""From a backbone's token states to one embedding per text: the poolings by name (docs/methods/shared.md).

``mean`` averages the states of a text's tokens, ``cls`` takes the [CLS] state through SimCSE's Linear+Tanh MLP,
``cls_before_pooler`` the [CLS] state alone. The prompt poolings (PromptBERT) embed a text wrapped in a template by
the state at its [MASK] token: they need more backbone calls than one, so they are written in
:mod:`textcore.encoding.prompt_pooling`; here they are only named, and the [MASK] state itself is one pooling.
"""
from __future__ import annotations

import torch
from torch import nn

from textcore.encoding.prompt import mask_states
from textcore.errors import ConfigError

# ``prompt`` through the MLP (training), ``prompt_before_pooler`` without it, ``prompt_denoised`` without it minus the
# empty template's state (template denoising), and ``prompt_text`` as the authors' final test does it: the template
# filled as text (a period added to a sentence without a final one), the whole string tokenized
PROMPT_POOLINGS = ("prompt", "prompt_before_pooler", "prompt_denoised", "prompt_text")
POOLINGS = ("mean", "cls", "cls_before_pooler", *PROMPT_POOLINGS)
MLP_POOLINGS = ("cls", "prompt")
# the state at the [MASK] token of texts already wrapped in a template (used inside the prompt poolings)
MASK_STATE = "mask"


def check_pooling(pooling: str, has_templates: bool) -> None:
    """A clear error for a pooling the encoder cannot give."""
    if pooling not in POOLINGS:
        raise ConfigError(f"method.pooling must be one of {POOLINGS} (method.eval_pooling too), got '{pooling}'")
    if pooling in PROMPT_POOLINGS and not has_templates:
        raise ConfigError(f"pooling '{pooling}' needs prompt templates (method.prompt_templates), e.g. "
                          "['*cls*_This_sentence_:_\"*sent_0*\"_means*mask*.*sep+*']")


def pooler_mlp(pooling: str, dim: int) -> nn.Sequential | None:
    """SimCSE's Linear+Tanh MLP for the poolings that train through one, else None."""
    return nn.Sequential(nn.Linear(dim, dim), nn.Tanh()) if pooling in MLP_POOLINGS else None


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Average of token states over non-padding positions."""
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)  # [B, T, 1]
    return (hidden * mask).sum(1) / mask.sum(1).clamp_min(1e-9)  # [B, d]


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor, input_ids: torch.Tensor, pooling: str,
         mlp: nn.Module | None, mask_id: int | None) -> torch.Tensor:
    """[B, d] from the token states ``hidden`` [B, T, d] of one backbone call: ``mean``, ``cls`` (through
    ``mlp`` when there is one), ``cls_before_pooler`` or :data:`MASK_STATE` (``mask_id``: the tokenizer's
    [MASK])."""
    if pooling == MASK_STATE:
        return mask_states(hidden, input_ids, mask_id)
    if pooling == "mean":
        return mean_pool(hidden, attention_mask)
    cls_state = hidden[:, 0]  # [B, d]
    if pooling == "cls" and mlp is not None:
        return mlp(cls_state)
    return cls_state
