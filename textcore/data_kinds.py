"""Kinds of training data: a datamodule's ``data_kind`` and a method's ``trains_on`` name one of these."""
from __future__ import annotations

SHORT_TEXT, SENTENCES, NLI = "short_text", "sentences", "nli"
DATA_KIND_NAMES = {SHORT_TEXT: "short texts (a CSV/TSV)", SENTENCES: "sentences, one per line",
                   NLI: "NLI sentence pairs"}
