"""Prompt templates (PromptBERT, Jiang et al., EMNLP 2022): a sentence is embedded by the hidden state at the
[MASK] token of a template that wraps it, e.g. ``This sentence : "<sentence>" means [MASK] .``
(docs/methods/clusterns.md, "Prompt-based ClusterNS").

A template is written either in our form, with ``{sentence}`` and ``{mask}`` placeholders::

    This sentence : "{sentence}" means{mask}.

or in the form of the PromptBERT / ClusterNS scripts, which spell spaces as ``_`` and mark the
special tokens with stars (copied from a run script as it is)::

    *cls*_This_sentence_:_"*sent_0*"_means*mask*.*sep+*

Wrapping works on token ids, as the authors' code does: the text is tokenized alone (the collator's
output), its special tokens are taken off and the template's tokens are put around it, so the
sentence's tokens are the same whatever the template. The prefix is tokenized with the leading
special token ([CLS] / <s>) and stripped of surrounding spaces; the suffix keeps its leading space
(it matters to byte-level BPE such as RoBERTa's) and ends with the closing special token.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from textcore.errors import ConfigError

AUTHORS_SENTENCE = "*sent_0*"
# the authors' final test (evaluation_prompt.py) ends a sentence with a period unless it ends in one of these
SENTENCE_ENDS = '.?"\''


def split_template(template: str) -> tuple[str, str]:
    """(text before the sentence, text after it) with the mask written ``{mask}``, from either form."""
    if AUTHORS_SENTENCE in template:
        body = template.replace("*cls*", "").replace("*sep+*", "")
        if body.count(AUTHORS_SENTENCE) != 1:
            raise ConfigError(f"prompt template {template!r} must hold '{AUTHORS_SENTENCE}' exactly once")
        before, after = body.split(AUTHORS_SENTENCE)
        before, after = (part.replace("*mask*", "{mask}").replace("_", " ") for part in (before, after))
    else:
        if template.count("{sentence}") != 1:
            raise ConfigError(
                f"prompt template {template!r} must hold '{{sentence}}' exactly once (or '{AUTHORS_SENTENCE}' in the "
                "form of the PromptBERT scripts), e.g. 'This sentence : \"{sentence}\" means{mask}.'"
            )
        before, after = template.split("{sentence}")
    if (before + after).count("{mask}") != 1:
        raise ConfigError(f"prompt template {template!r} must hold the mask ('{{mask}}' or '*mask*') exactly once")
    return before, after


@dataclass(frozen=True)
class Template:
    """One template: its text before and after the sentence (``split_template``), and their token ids:
    ``prefix`` starts with the opening special token, ``suffix`` ends with the closing one (a row is wrapped
    as ``prefix + sentence + suffix``); ``joined`` is the template with an empty sentence, the two texts joined
    and tokenized as one string (the authors' empty template; see the module's docstring)."""

    before: str
    after: str
    prefix: tuple[int, ...]
    suffix: tuple[int, ...]
    joined: tuple[int, ...]

    @property
    def empty(self) -> list[int]:
        """The empty template of template denoising: ``joined``, not ``prefix + suffix``."""
        return list(self.joined)


def build_template(tokenizer, template: str) -> Template:
    mask = tokenizer.mask_token
    if mask is None:
        raise ConfigError(f"prompt templates need a tokenizer with a mask token; '{tokenizer.name_or_path}' has none")
    before, after = split_template(template)
    opening, closing = _special_ends(tokenizer)
    before_text, after_text = before.replace("{mask}", mask).strip(), after.replace("{mask}", mask)
    prefix = tokenizer(before_text)["input_ids"][:-1]  # [opening, prefix tokens]
    suffix = tokenizer(after_text)["input_ids"][1:]  # [suffix tokens, closing]
    joined = tokenizer(before_text + after_text)["input_ids"]  # the authors' tokenizer.encode(bs + es)
    for ids in (prefix + suffix, joined):
        if ids[:1] != [opening] or ids[-1:] != [closing]:
            raise ConfigError(f"prompt template {template!r}: the tokenizer did not put its special tokens at the "
                              "ends")
        if ids.count(tokenizer.mask_token_id) != 1:
            raise ConfigError(f"prompt template {template!r} gives {ids.count(tokenizer.mask_token_id)} mask tokens "
                              "once tokenized; it must give one")
    return Template(before, after, tuple(prefix), tuple(suffix), tuple(joined))


def _special_ends(tokenizer) -> tuple[int, int]:
    """The one special token a tokenizer puts before and after a single text ([CLS] ... [SEP], <s> ... </s>)."""
    empty = tokenizer("")["input_ids"]
    if len(empty) != 2:
        raise ConfigError(f"prompt templates need a tokenizer that wraps a text in exactly two special tokens; "
                          f"'{tokenizer.name_or_path}' gives {empty} for an empty text")
    return empty[0], empty[1]


class PromptTemplates:
    """The templates of a run: the first embeds texts at evaluation and gives the first training view;
    the second (when given) gives the second view, so the positive pair differs by its template."""

    def __init__(self, tokenizer, templates: Sequence[str]):
        templates = [templates] if isinstance(templates, str) else list(templates or [])
        if not 1 <= len(templates) <= 2:
            raise ConfigError(f"method.prompt_templates takes one or two templates, got {len(templates)}")
        self.templates = [build_template(tokenizer, t) for t in templates]
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.mask_id = tokenizer.mask_token_id

    def __len__(self) -> int:
        return len(self.templates)

    def fill_text(self, text: str, mask_token: str, index: int = 0) -> str:
        """The template filled as text, the way the authors' final test embeds a sentence: a period
        appended when the sentence does not end in one of ``.?"'``, surrounding spaces stripped."""
        template = self.templates[index]
        if text and text[-1] not in SENTENCE_ENDS:
            text += "."
        return (template.before + text + template.after).replace("{mask}", mask_token).strip()

    def wrap(self, tokens: dict[str, torch.Tensor], index: int = 0) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """Template ``index`` around every row of a right-padded token batch (opening and closing
        special tokens of each row replaced by the template's).

        Returns the new batch (``input_ids``, ``attention_mask`` [B, T']; right-padded; no
        ``token_type_ids``: a single segment) and each row's sentence length as the authors count it: the
        wrapped row's tokens minus the empty template's (``Template.joined``) [B]; the number of sentence
        tokens wherever the empty template is the prefix and suffix side by side.
        """
        template = self.templates[index]
        ids, mask = tokens["input_ids"], tokens["attention_mask"]  # [B, T]
        lengths = mask.sum(dim=1)  # [B] with the two special tokens
        rows = [[*template.prefix, *ids[i, 1 : int(n) - 1].tolist(), *template.suffix] for i, n in enumerate(lengths)]
        width = max(len(r) for r in rows)
        out_ids = torch.full((len(rows), width), self.pad_id, dtype=ids.dtype)
        out_mask = torch.zeros((len(rows), width), dtype=mask.dtype)
        for i, row in enumerate(rows):
            out_ids[i, : len(row)] = torch.tensor(row, dtype=ids.dtype)
            out_mask[i, : len(row)] = 1
        template_length = len(template.prefix) + len(template.suffix)  # the wrapped row = sentence + this
        sentence = (lengths - 2).clamp_min(0) + template_length - len(template.joined)
        sentence = sentence.clamp_min(0).to(torch.long)
        return {"input_ids": out_ids.to(ids.device), "attention_mask": out_mask.to(mask.device)}, sentence

    def empty_batch(self, index: int, lengths: torch.Tensor) -> dict[str, torch.Tensor]:
        """The template with no sentence, once per entry of ``lengths`` [U], with the position ids that
        its tokens after the prefix would have after a sentence of that many tokens (template
        denoising). Positions count from 0, as the authors' code passes them, whatever offset the
        backbone adds to its own positions (RoBERTa's start at 2)."""
        empty = torch.tensor(self.templates[index].empty, device=lengths.device)  # [T0]
        ids = empty.unsqueeze(0).repeat(lengths.numel(), 1)  # [U, T0]
        positions = torch.arange(empty.numel(), device=lengths.device).unsqueeze(0).repeat(lengths.numel(), 1)
        positions[:, len(self.templates[index].prefix):] += lengths.unsqueeze(1)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "position_ids": positions}


def mask_states(hidden: torch.Tensor, input_ids: torch.Tensor, mask_id: int) -> torch.Tensor:
    """[B, d]: each row's hidden state at its last mask token (the template's: it follows the sentence,
    so a literal mask token in a text does not take its place)."""
    is_mask = input_ids == mask_id  # [B, T]
    if not bool(is_mask.any(dim=1).all()):
        raise ValueError("a prompt pooling got a row without the mask token: the text was not wrapped in a template")
    positions = torch.arange(input_ids.shape[1], device=input_ids.device)  # [T]
    last = (is_mask.long() * (positions + 1)).argmax(dim=1)  # [B]
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
