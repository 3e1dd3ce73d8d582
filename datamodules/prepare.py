"""Turn public files into what the paper recipes read (docs/data.md, "Preparing the authors' data").

    # SCCL's two contextual-substitution views (the authors' <set>_trans_subst_20.csv):
    python tools.py prepare substitute --input searchsnippets.csv --text-column text0 \
        [--models roberta-base,bert-base-uncased] [--share 0.2] [--seed 0] [--output <file>]
    # SimCSE's NLI triplets (nli_for_simcse.csv: sent0, sent1, hard_neg) as PairSupCon's labelled pairs:
    python tools.py prepare nli-pairs --input nli_for_simcse.csv [--output nli_pairs.csv]

``substitute`` writes ``label, text, text1, text2``: ``text`` the original, ``text1`` with a share of
its words replaced by the first masked language model's predictions, ``text2`` the same with the
second model. For each text and model, ``round(share x words)`` (at least one) word positions are
drawn with a generator seeded by (seed, row, view); each is replaced by one [MASK] and, in one
forward pass per batch, the masked LM proposes its ``--top-k`` tokens for every mask; the first
proposal that is a whole word of letters or digits, different from the original word, is sampled
with the same generator (weights: the model's probabilities). A position with no such proposal keeps
its word. The SCCL authors made their views with nlpaug's contextual word substitution (roberta-base
and bert-base masked LMs, 20 % of the words); this is our own implementation of that idea, not
nlpaug. The models come from the Hugging Face Hub (or a local folder); offline it stops with one
message naming the model and how to fetch it.

``nli-pairs`` writes ``sentence1, sentence2, gold_label``: every triplet gives (premise, entailment
hypothesis, entailment) and (premise, hard negative, contradiction), which is what PairSupCon trains on
(neutral pairs dropped); the file reads with ``dataset=nli dataset.file=<output>``.
"""
from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from errors import ConfigError, MissingFileError, UserError, exit_on_user_error

DEFAULT_MODELS = ("roberta-base", "bert-base-uncased")
_WORD = re.compile(r"^[^\W_]+$")  # letters/digits only, any script


class ModelUnavailableError(UserError, RuntimeError):
    """A masked language model cannot be loaded (offline, wrong name)."""


def load_masked_lm(name: str):
    """(tokenizer, model in eval mode) of a masked LM: Hub name, local folder, or ``tiny`` (random, for tests)."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    if name == "tiny":
        from transformers import BertConfig, BertForMaskedLM

        from lightning_modules.shared.backbone import load_tokenizer

        tokenizer = load_tokenizer("tiny")
        import torch

        torch.manual_seed(0)
        config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                            intermediate_size=64, max_position_embeddings=128)
        return tokenizer, BertForMaskedLM(config).eval()
    from lightning_modules.shared.hub import offline_reason

    how = (f"Where there is network: `hf download {name} --local-dir models/{name}` and pass --models "
           f"models/{name}; or fill the Hugging Face cache (HF_HOME) there and copy it here.")
    reason = offline_reason(name)
    if reason:
        raise ModelUnavailableError(f"masked language model '{name}' cannot be loaded ({reason}). {how}")
    try:
        tokenizer = AutoTokenizer.from_pretrained(name)
        model = AutoModelForMaskedLM.from_pretrained(name).eval()
    except (OSError, ValueError) as err:
        if Path(name).exists():
            raise ModelUnavailableError(f"'{name}' is a folder but not a masked language model ({err})") from None
        raise ModelUnavailableError(
            f"masked language model '{name}' cannot be loaded from the Hugging Face Hub (a wrong name, or no "
            f"access). {how}") from None
    if tokenizer.mask_token is None:
        raise ConfigError(f"'{name}' has no mask token: --models needs masked language models (BERT, RoBERTa, ...)")
    return tokenizer, model


def choose_positions(n_words: int, share: float, rng: np.random.Generator) -> list[int]:
    """``round(share x n_words)`` (at least one, at most all) distinct word positions, sorted."""
    if n_words == 0:
        return []
    count = min(n_words, max(1, int(round(share * n_words))))
    return sorted(rng.choice(n_words, size=count, replace=False).tolist())


def _candidate(token: str) -> str:
    """A vocabulary token as a word: without BERT's ## or the BPE/SentencePiece space marks."""
    return token.replace("##", "").lstrip("\u0120\u2581").strip()


def substitute_batch(texts: Sequence[str], tokenizer, model, share: float, rngs: Sequence[np.random.Generator],
                     top_k: int = 10, max_length: int = 128) -> list[str]:
    """One augmented copy of each text (module docstring); ``rngs``: one generator per text."""
    import torch

    words_per_text = [str(t).split() for t in texts]
    chosen = [choose_positions(len(w), share, rng) for w, rng in zip(words_per_text, rngs)]
    masked = [" ".join(tokenizer.mask_token if i in set(pos) else w for i, w in enumerate(words))
              for words, pos in zip(words_per_text, chosen)]
    batch = tokenizer(masked, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    with torch.no_grad():
        logits = model(**batch).logits  # [B, T, V]
    out = []
    for row, (words, positions, rng) in enumerate(zip(words_per_text, chosen, rngs)):
        mask_slots = (batch["input_ids"][row] == tokenizer.mask_token_id).nonzero().flatten().tolist()
        new_words = list(words)
        for position, slot in zip(positions, mask_slots):  # a mask cut off by truncation keeps its word
            probs = torch.softmax(logits[row, slot].float(), dim=-1)
            top = torch.topk(probs, top_k)
            options, weights = [], []
            for p, token_id in zip(top.values.tolist(), top.indices.tolist()):
                word = _candidate(tokenizer.convert_ids_to_tokens(token_id))
                if _WORD.match(word) and word.lower() != words[position].lower() and word not in options:
                    options.append(word)
                    weights.append(p)
            if options:
                weights = np.asarray(weights) / np.sum(weights)
                new_words[position] = options[int(rng.choice(len(options), p=weights))]
        out.append(" ".join(new_words))
    return out


def substitute_texts(texts: Sequence[str], model_name: str, share: float = 0.2, seed: int = 0, view: int = 1,
                     batch_size: int = 32, top_k: int = 10, log: Callable[[str], None] | None = None,
                     every_seconds: float = 30.0) -> list[str]:
    """Augmented copies of ``texts`` with one masked LM; generators seeded by (seed, row, view)."""
    tokenizer, model = load_masked_lm(model_name)
    out: list[str] = []
    start = last = time.perf_counter()
    for begin in range(0, len(texts), batch_size):
        chunk = texts[begin:begin + batch_size]
        rngs = [np.random.default_rng([seed, begin + i, view]) for i in range(len(chunk))]
        out += substitute_batch(chunk, tokenizer, model, share, rngs, top_k)
        now = time.perf_counter()
        if log and (now - last >= every_seconds or len(out) == len(texts)):
            rate = len(out) / max(now - start, 1e-9)
            eta = (len(texts) - len(out)) / max(rate, 1e-9)
            log(f"substitute ({model_name}): {len(out)}/{len(texts)} texts ({100 * len(out) / len(texts):.0f} %) "
                f"· {rate:.1f} texts/s · ETA {int(eta // 60)}m{int(eta % 60):02d}s")
            last = now
    return out


def substitute_file(path: Path, text_column: str, label_column: str | None, models: Sequence[str], output: Path,
                    share: float = 0.2, seed: int = 0, batch_size: int = 32, top_k: int = 10,
                    encoding: str | None = None, log: Callable[[str], None] | None = None):
    """Write ``label, text, text1, text2`` (one view per model) for a short-text file."""
    import pandas as pd

    from datamodules.text_io import read_table

    if len(models) != 2:
        raise ConfigError(f"--models needs two masked language models (one per view), got {list(models)}")
    if not 0 < share <= 1:
        raise ConfigError(f"--share {share}: a share of the words in (0, 1], e.g. 0.2")
    table = read_table(path, encoding)
    if text_column not in table.columns:
        raise ConfigError(f"'{path}' has no column '{text_column}' (columns: {list(table.columns)}); "
                          "set --text-column.")
    table = table.dropna(subset=[text_column])
    texts = table[text_column].astype(str).tolist()
    for name in models:  # both load before any work: an offline second model must not waste the first pass
        load_masked_lm(name)
    views = [substitute_texts(texts, name, share, seed, i + 1, batch_size, top_k, log) for i, name in enumerate(models)]
    frame = pd.DataFrame({"text": texts, "text1": views[0], "text2": views[1]})
    if label_column and label_column in table.columns:
        frame.insert(0, "label", table[label_column].tolist())
    output.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(output, index=False)
    return frame


def nli_pairs(path: Path, output: Path, encoding: str | None = None):
    """SimCSE's triplets (sent0, sent1, hard_neg) as entailment / contradiction pairs."""
    import pandas as pd

    from datamodules.text_io import read_table

    table = read_table(path, encoding)
    missing = [c for c in ("sent0", "sent1", "hard_neg") if c not in table.columns]
    if missing:
        raise ConfigError(f"'{path}' lacks the triplet column(s) {missing} (columns: {list(table.columns)}); "
                          "nli-pairs reads SimCSE's nli_for_simcse.csv layout: sent0, sent1, hard_neg.")
    table = table.dropna(subset=["sent0", "sent1", "hard_neg"])
    entail = pd.DataFrame({"sentence1": table["sent0"], "sentence2": table["sent1"], "gold_label": "entailment"})
    contra = pd.DataFrame({"sentence1": table["sent0"], "sentence2": table["hard_neg"], "gold_label": "contradiction"})
    # each triplet's two pairs side by side, in file order
    pairs = pd.concat([entail, contra]).sort_index(kind="stable").reset_index(drop=True)
    output.parent.mkdir(parents=True, exist_ok=True)
    pairs.to_csv(output, index=False)
    return pairs


@exit_on_user_error
def main(argv: Sequence[str] | None = None):
    parser = argparse.ArgumentParser(prog="python tools.py prepare", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("substitute", help="SCCL's two contextual-substitution views of a short-text file")
    s.add_argument("--input", required=True, type=Path)
    s.add_argument("--text-column", default="text")
    s.add_argument("--label-column", default="label")
    s.add_argument("--models", default=",".join(DEFAULT_MODELS), help="two masked LMs (Hub names or folders)")
    s.add_argument("--share", type=float, default=0.2, help="share of the words replaced (default 0.2)")
    s.add_argument("--top-k", type=int, default=10, help="proposals considered per masked word")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--batch-size", type=int, default=32)
    s.add_argument("--encoding", default=None)
    s.add_argument("--output", type=Path, default=None,
                   help="default: <input folder>/<stem>_trans_subst_<share x 100>.csv (the authors' name)")
    n = sub.add_parser("nli-pairs", help="SimCSE's NLI triplets as PairSupCon's labelled pairs")
    n.add_argument("--input", required=True, type=Path)
    n.add_argument("--output", type=Path, default=None, help="default: <input folder>/nli_pairs.csv")
    n.add_argument("--encoding", default=None)
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    if not args.input.is_file():
        raise MissingFileError(f"--input '{args.input}' does not exist.")
    if args.command == "substitute":
        output = args.output or args.input.with_name(f"{args.input.stem}_trans_subst_{round(100 * args.share)}.csv")
        models = [m.strip() for m in args.models.split(",") if m.strip()]
        frame = substitute_file(args.input, args.text_column, args.label_column, models, output, args.share,
                                args.seed, args.batch_size, args.top_k, args.encoding, log)
    else:
        output = args.output or args.input.with_name("nli_pairs.csv")
        frame = nli_pairs(args.input, output, args.encoding)
    print(f"wrote {output} ({len(frame)} rows)")
    return frame


if __name__ == "__main__":
    import console

    console.run_cli(main)
