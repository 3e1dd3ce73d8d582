"""The prompt poolings of :class:`~textcore.encoding.encoder.TextEncoder` (PromptBERT; docs/methods/clusterns.md):
a text wrapped in a template (:mod:`textcore.encoding.prompt`) is embedded by the backbone's state at the template's
[MASK] token, minus the empty template's state when denoised, through the pooler's MLP for ``prompt``.

Each function takes the encoder: it calls the encoder itself (``pooling="mask"``) so that the wrapped texts are
chunked and cached like any other batch, and its backbone directly for the empty templates.
"""
from __future__ import annotations

import torch

from textcore.encoding.pooling import MASK_STATE
from textcore.encoding.prompt import mask_states
from textcore.errors import ConfigError


def prompted(encoder, input_ids, attention_mask, pooling: str) -> torch.Tensor:
    """[B, d]: the texts wrapped in the first template, the [MASK] state, denoised or through the MLP."""
    if encoder.prompt is None:
        raise ConfigError(f"pooling '{pooling}' needs prompt templates (method.prompt_templates)")
    if pooling == "prompt_text":
        return filled_as_text(encoder, input_ids, attention_mask)
    wrapped, lengths = encoder.prompt.wrap({"input_ids": input_ids, "attention_mask": attention_mask}, 0)
    state = encoder(**wrapped, pooling=MASK_STATE)  # [B, d]
    if pooling == "prompt_denoised":
        state = state - template_noise(encoder, 0, lengths)
    if pooling == "prompt" and encoder.mlp is not None:
        state = encoder.mlp(state)
    return state


def filled_as_text(encoder, input_ids, attention_mask) -> torch.Tensor:
    """[B, d]: each row's text (its tokens decoded, without the special tokens) put into the first template as
    text and tokenized whole; the [MASK] state, no MLP."""
    tokenizer = encoder.tokenizer
    lengths = attention_mask.sum(dim=1).tolist()
    texts = tokenizer.batch_decode([input_ids[i, 1 : int(n) - 1].tolist() for i, n in enumerate(lengths)])
    filled = [encoder.prompt.fill_text(text.strip(), tokenizer.mask_token) for text in texts]
    limit = min(int(tokenizer.model_max_length), int(encoder.backbone.config.max_position_embeddings))
    tokens = tokenizer(filled, padding=True, truncation=True, max_length=limit, return_tensors="pt")
    device = input_ids.device
    return encoder(input_ids=tokens["input_ids"].to(device), attention_mask=tokens["attention_mask"].to(device),
                   pooling=MASK_STATE)


def prompt_views(encoder, tokens: dict, denoise: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The two training views of a prompt method ([n, d] each): the batch in the first and the second template
    (the first twice when only one is given; dropout still differs), [MASK] states, minus each template's empty
    state when ``denoise``, then the MLP when the pooling has one."""
    second = 1 if len(encoder.prompt) > 1 else 0
    (v1, n1), (v2, n2) = encoder.prompt.wrap(tokens, 0), encoder.prompt.wrap(tokens, second)
    s1, s2 = encoder.forward_views([v1, v2], pooling=MASK_STATE)
    if denoise:
        s1, s2 = s1 - template_noise(encoder, 0, n1), s2 - template_noise(encoder, second, n2)
    if encoder.mlp is not None:
        s1, s2 = encoder.mlp(s1), encoder.mlp(s2)
    return s1, s2


def template_noise(encoder, index: int, lengths: torch.Tensor) -> torch.Tensor:
    """[B, d]: the [MASK] state of template ``index`` with no sentence, placed as after a sentence of each row's
    length (template denoising: subtracted from the sentence's state). One backbone call per distinct length;
    gradients flow through it when enabled, as in the authors' training."""
    unique, inverse = lengths.unique(return_inverse=True)  # [U], [B]
    batch = encoder.prompt.empty_batch(index, unique.to(next(encoder.parameters()).device))
    hidden = encoder.backbone(**batch).last_hidden_state  # [U, T0, d]
    return mask_states(hidden, batch["input_ids"], encoder.prompt.mask_id)[inverse.to(hidden.device)]  # [B, d]
