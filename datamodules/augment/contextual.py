"""Contextual augmentation with a masked language model (docs/data.md): the project's one contextual
substitution, behind ``python tools.py augment --method contextual`` and SCCL's views (``download <set>_views``).

SCCL made its augmented views with nlpaug's ContextualWordEmbsAug (BERT-base / RoBERTa): some
words are replaced by what a masked LM predicts in their place; this is the project's own implementation of
that idea, not nlpaug, so its views are not byte-identical to the authors'. Here, for each copy of a text,
``max(1, round(share * number of words))`` whole words are chosen with a seeded RNG, each is
replaced by one mask token (all of a copy's words at once, so one forward pass per copy), and
each mask gets the highest-scoring prediction that is a whole word of letters (not a "##x" /
"x" continuation piece, punctuation, a number or a special token) and differs from the word it
replaces. Non-words are filtered out before taking the top-k, so top-k counts whole words only
(as nlpaug does); where none of the k best differs from the original, or the mask fell past the
model's maximum length, the original word stays. Punctuation around a word and the word's
capitalisation pattern are kept.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch

from textcore.errors import UserError

from .eda import Token, derive_seed, detokenize, is_plain_word, match_case, tokenize


class MaskedLMUnavailableError(UserError, RuntimeError):
    """The masked LM could not be loaded (no network, wrong name, not a masked LM)."""


def _is_connection_problem(err: BaseException) -> bool:
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        text = f"{type(err).__name__} {err}".lower()
        if any(s in text for s in ("couldn't connect", "connection", "name or service not known",
                                   "offline", "timed out")):
            return True
        err = err.__cause__ or err.__context__
    return False


def load_masked_lm(name: str):
    """``(tokenizer, model)`` for a Hub name or a local folder saved with ``save_pretrained``. Without network
    a Hub name that is not in the local cache stops at once, with the command that fetches it elsewhere."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from textcore.encoding.hub import offline_reason

    local = Path(name).expanduser()
    # a Hub name is "name" or "org/name"; anything else names a folder, whose absence the load below explains
    hub_name = not name.startswith((".", "/", "~")) and name.count("/") <= 1
    reason = offline_reason(name) if hub_name and not local.exists() else None
    if reason:
        raise MaskedLMUnavailableError(
            f"masked LM '{name}' cannot be loaded ({reason}). Where there is network: `hf download {name} "
            f"--local-dir models/{name}`, copy that folder here and pass --model models/{name}; or fill the Hugging "
            "Face cache (HF_HOME) there and copy it here.")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(local) if local.exists() else name)
        model, info = AutoModelForMaskedLM.from_pretrained(
            str(local) if local.exists() else name, output_loading_info=True
        )
    except (OSError, ValueError) as err:
        if local.exists():
            raise MaskedLMUnavailableError(
                f"Could not load a masked LM from the folder '{local}': {err}. The folder must hold "
                "a model and tokenizer saved with save_pretrained (config.json, weights, tokenizer files)."
            ) from err
        if _is_connection_problem(err):
            reason = (
                f"Could not download the masked LM '{name}': the Hugging Face Hub cannot be reached "
                "(no network, or HF_HUB_OFFLINE=1 with no cached copy)."
            )
        else:
            reason = (
                f"'{name}' is neither an existing local folder nor a masked LM available on the "
                f"Hugging Face Hub ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})."
            )
        raise MaskedLMUnavailableError(
            reason + " Pass --model with a local folder holding a masked LM and its tokenizer "
            "(e.g. saved elsewhere with AutoModelForMaskedLM/AutoTokenizer .save_pretrained)."
        ) from err
    if info.get("missing_keys"):
        missing = sorted(info["missing_keys"])
        raise MaskedLMUnavailableError(
            f"The checkpoint '{name}' lacks weights of the masked-LM model ({', '.join(missing[:4])}"
            f"{', ...' if len(missing) > 4 else ''}), so its predictions would be random. Use a "
            "checkpoint trained with a masked-LM head (e.g. bert-base-uncased, roberta-base), not a "
            "sentence encoder."
        )
    if tokenizer.mask_token is None or tokenizer.mask_token_id is None:
        raise MaskedLMUnavailableError(f"The tokenizer of '{name}' has no mask token.")
    model.eval()
    return tokenizer, model


def whole_word_vocabulary(tokenizer, vocab_size: int) -> tuple[torch.Tensor, list[str]]:
    """Which vocabulary entries are a whole word of letters, and that word's text.

    Sub-word conventions differ: WordPiece marks continuations with "##"; byte-level BPE
    (RoBERTa, "Ġx") and SentencePiece ("▁x") mark word starts instead. The convention is read
    off the vocabulary itself, so any masked LM works.
    """
    pieces = tokenizer.convert_ids_to_tokens(list(range(min(vocab_size, len(tokenizer)))))
    pieces = [p if isinstance(p, str) else "" for p in pieces]
    counts = {marker: sum(p.startswith(marker) for p in pieces) for marker in ("##", "Ġ", "▁")}
    marker = max(counts, key=counts.get) if max(counts.values()) > 0 else None
    special = set(tokenizer.all_special_ids)
    valid = torch.zeros(vocab_size, dtype=torch.bool)
    words = [""] * vocab_size
    for i, piece in enumerate(pieces):
        if i in special:
            continue
        if marker == "##":
            word = "" if piece.startswith("##") else piece
        elif marker is not None:
            word = piece[len(marker):] if piece.startswith(marker) else ""
        else:
            word = piece
        if word.isalpha():
            valid[i] = True
            words[i] = word
    return valid, words


@dataclass
class _Slot:
    """One copy of one text to fill: the text's position in the input list, the copy number,
    its tokens and the positions of the masked words."""

    index: int
    copy: int
    tokens: list[Token]
    masked: list[int]


class ContextualAugmenter:
    """Replaces a share of the words of each text by a masked LM's predictions."""

    def __init__(
        self,
        tokenizer,
        model,
        model_name: str = "custom",
        *,
        share: float,
        copies: int,
        seed: int,
        top_k: int,
        batch_size: int,
        max_length: int,
        device: str,
        first_copy: int = 0,
    ):
        if not 0.0 < share <= 1.0:
            raise ValueError(f"share must lie in (0, 1], got {share}")
        if copies < 1 or top_k < 1 or batch_size < 1 or max_length < 2:
            raise ValueError("copies, top_k and batch_size must be at least 1, max_length at least 2")
        self.model_name, self.share, self.copies, self.seed = model_name, share, copies, seed
        # copy k of a text draws its words with the number first_copy + k: several masked LMs writing copies
        # of one text (SCCL's two views) replace different words
        self.first_copy = first_copy
        self.top_k, self.batch_size, self.max_length = top_k, batch_size, max_length
        self.tokenizer, self.model = tokenizer, model
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        self.model.to(self.device).eval()  # no dropout: the same text gives the same predictions
        vocab_size = self.model.get_output_embeddings().weight.shape[0]
        self.valid, self.words = whole_word_vocabulary(self.tokenizer, vocab_size)
        self.valid = self.valid.to(self.device)

    @classmethod
    def from_pretrained(cls, name: str, **settings) -> "ContextualAugmenter":
        """Load the masked LM ``name`` (Hub name or local folder); ``settings`` as in __init__."""
        tokenizer, model = load_masked_lm(name)
        return cls(tokenizer, model, model_name=name, **settings)

    def plan(self, text: str, row: int, copy: int, index: int = 0) -> _Slot:
        """Choose the words to mask; the choice depends only on (seed, row, copy)."""
        tokens = tokenize(text)
        eligible = [i for i, t in enumerate(tokens) if is_plain_word(t.core)]
        if self.tokenizer.mask_token in text:
            eligible = []  # a literal mask token in the text would shift predictions onto wrong words
        n = min(len(eligible), max(1, round(self.share * len(tokens))))
        rng = random.Random(derive_seed("contextual", self.seed, row, self.first_copy + copy))
        return _Slot(index, copy, tokens, sorted(rng.sample(eligible, n)))

    def _masked_text(self, slot: _Slot) -> str:
        mask = self.tokenizer.mask_token
        chosen = set(slot.masked)
        return " ".join(
            t.lead + mask + t.trail if i in chosen else t.text for i, t in enumerate(slot.tokens)
        )

    @torch.inference_mode()
    def _fill(self, slots: Sequence[_Slot]) -> list[str]:
        enc = self.tokenizer(
            [self._masked_text(s) for s in slots],
            padding=True, truncation=True, max_length=self.max_length, return_tensors="pt",
        ).to(self.device)
        logits = self.model(**enc).logits  # [B, T, V]
        is_mask = enc["input_ids"] == self.tokenizer.mask_token_id  # [B, T]
        scores = logits[is_mask].float()  # [M, V], masks in row-major order
        scores[:, ~self.valid] = float("-inf")
        top = scores.topk(min(self.top_k, int(self.valid.sum())), dim=-1).indices.cpu()  # [M, k]
        per_row = is_mask.sum(dim=1).tolist()  # masks that survived truncation, per text
        out, cursor = [], 0
        for slot, n_found in zip(slots, per_row):
            tokens = list(slot.tokens)
            for position, candidates in zip(slot.masked, top[cursor: cursor + n_found].tolist()):
                original = tokens[position].core
                for token_id in candidates:
                    word = self.words[token_id]
                    if word and word.lower() != original.lower():
                        tokens[position] = Token(
                            tokens[position].lead, match_case(word, original), tokens[position].trail
                        )
                        break
            cursor += n_found
            out.append(detokenize(tokens))
        return out

    def augment_all(
        self, texts: Sequence[str], rows: Sequence[int] | None = None, progress: bool = True
    ) -> list[list[str]]:
        """``copies`` augmentations of every text. ``rows`` are the texts' 0-based data-row
        indices in their file (default 0..n-1); they seed the choice of masked words."""
        rows = list(range(len(texts))) if rows is None else list(rows)
        if len(rows) != len(texts):
            raise ValueError(f"got {len(texts)} texts but {len(rows)} row indices")
        slots = [
            self.plan(text, row, copy, index)
            for index, (row, text) in enumerate(zip(rows, texts))
            for copy in range(self.copies)
        ]
        results: list[list[str]] = [[text] * self.copies for text in texts]
        todo = [s for s in slots if s.masked]
        # Similar lengths together wastes less padding; results go back by (row, copy).
        todo.sort(key=lambda s: len(s.tokens))
        batches = [todo[i: i + self.batch_size] for i in range(0, len(todo), self.batch_size)]
        from tqdm.auto import tqdm

        for batch in tqdm(batches, desc=f"contextual ({self.model_name})", unit="batch",
                          disable=not progress):
            for slot, new_text in zip(batch, self._fill(batch)):
                results[slot.index][slot.copy] = new_text
        return results
