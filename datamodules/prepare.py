"""Turn public files into what the paper recipes read (docs/data.md, "Preparing the authors' data").

    # SimCSE's NLI triplets (nli_for_simcse.csv: sent0, sent1, hard_neg) as PairSupCon's labelled pairs:
    python tools.py prepare nli-pairs --input nli_for_simcse.csv [--output nli_pairs.csv]

``nli-pairs`` writes ``sentence1, sentence2, gold_label``: every triplet gives (premise, entailment
hypothesis, entailment) and (premise, hard negative, contradiction), which is what PairSupCon trains on
(neutral pairs dropped); the file reads with ``dataset=nli dataset.file=<output>``. SCCL's
contextual-substitution views are the augment tool's (``datamodules.augment.columns``; ``download <set>_views``
writes them in the authors' layout).
"""
from __future__ import annotations

from pathlib import Path

from textcore.errors import ConfigError


def nli_pairs(path: Path, output: Path, encoding: str | None = None):
    """SimCSE's triplets (sent0, sent1, hard_neg) as entailment / contradiction pairs."""
    import pandas as pd

    from datamodules.table_reader import read_table

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
