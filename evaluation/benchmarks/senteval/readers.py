"""Readers of the SentEval transfer tasks' files: each task as labelled :class:`Split` s, in the file order
(``senteval_order`` gives SentEval's), for ``evaluation.benchmarks.transfer`` and
``evaluation.benchmarks.senteval.few_shot``.

File encodings follow SentEval: Latin-1 for MR/CR/SUBJ/MPQA/TREC (TREC's train file is
Latin-1), UTF-8 for SST-2 and SICK, UTF-8 with an optional BOM for MRPC (whose first line is a
header).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from textcore.errors import UserError

TASKS = ("MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC")  # the papers' seven, the default list
ALL_TASKS = TASKS + ("SICKE",)
CV_TASKS = ("MR", "CR", "SUBJ", "MPQA")
PAIR_TASKS = ("MRPC", "SICKE")

# (file of label 1, file of label 0); SentEval labels SUBJ's objective sentences 1
BINARY_FILES = {
    "MR": ("rt-polarity.pos", "rt-polarity.neg"),
    "CR": ("custrev.pos", "custrev.neg"),
    "SUBJ": ("subj.objective", "subj.subjective"),
    "MPQA": ("mpqa.pos", "mpqa.neg"),
}
TREC_CLASSES = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")
SICK_LABELS = ("CONTRADICTION", "NEUTRAL", "ENTAILMENT")  # SentEval's ids 0, 1, 2

class TransferDataError(UserError, ValueError):
    """A SentEval file is missing or malformed; the message names the file and line."""


@dataclass
class Split:
    texts: list[str]  # for MRPC: the first sentences
    labels: np.ndarray  # [n] int
    texts_b: list[str] | None = None  # MRPC: the second sentences

    def __len__(self) -> int:
        return len(self.texts)

    def subset(self, idx: np.ndarray) -> "Split":
        pick = lambda xs: [xs[i] for i in idx]  # noqa: E731
        return Split(pick(self.texts), self.labels[idx], pick(self.texts_b) if self.texts_b is not None else None)


# -- readers -------------------------------------------------------------------------------------
def _lines(path: Path, encoding: str) -> list[str]:
    if not path.is_file():
        raise TransferDataError(f"SentEval file '{path}' is missing; the task folder is incomplete.")
    with open(path, encoding=encoding, newline="") as f:
        return f.read().splitlines()


def _clean(text: str) -> str:
    # SentEval tokenises on whitespace and joins with one space
    return " ".join(text.split())


def read_binary(folder: Path, task: str, keep_empty: bool = False) -> Split:
    """MR/CR/SUBJ/MPQA: one sentence per line, label from the file (label-1 file first); empty
    lines dropped unless ``keep_empty`` (SentEval keeps them)."""
    texts, labels = [], []
    for label, name in zip((1, 0), BINARY_FILES[task]):
        kept = [_clean(line) for line in _lines(folder / name, "latin-1")]
        kept = [t for t in kept if t or keep_empty]
        texts += kept
        labels += [label] * len(kept)
    return Split(texts, np.asarray(labels, dtype=np.int64))


def read_sst2(folder: Path) -> dict[str, Split]:
    out = {}
    for split in ("train", "dev", "test"):
        path = folder / f"sentiment-{split}"
        texts, labels = [], []
        for line_no, line in enumerate(_lines(path, "utf-8"), start=1):
            if not line.strip():
                continue
            text, _, label = line.rpartition("\t")
            if label.strip() not in ("0", "1") or not text:
                raise TransferDataError(f"{path} line {line_no}: expected 'sentence<TAB>0|1', got {line[:80]!r}.")
            texts.append(_clean(text))
            labels.append(int(label))
        out[split] = Split(texts, np.asarray(labels, dtype=np.int64))
    return out


def read_trec(folder: Path) -> dict[str, Split]:
    """``COARSE:fine question`` per line; the label is the coarse class (6 classes)."""
    out = {}
    for split, name in (("train", "train_5500.label"), ("test", "TREC_10.label")):
        path = folder / name
        texts, labels = [], []
        for line_no, line in enumerate(_lines(path, "latin-1"), start=1):
            if not line.strip():
                continue
            coarse, _, rest = line.strip().partition(":")
            _, _, question = rest.partition(" ")
            if coarse not in TREC_CLASSES or not question.strip():
                raise TransferDataError(
                    f"{path} line {line_no}: expected 'CLASS:fine question' with CLASS in {TREC_CLASSES}, "
                    f"got {line[:80]!r}."
                )
            texts.append(_clean(question))
            labels.append(TREC_CLASSES.index(coarse))
        out[split] = Split(texts, np.asarray(labels, dtype=np.int64))
    return out


def _header_columns(path: Path, lines: list[str], needed: tuple[str, ...]) -> tuple[int, list[int]]:
    """(number of columns, position of each ``needed`` column) of a tab-separated file's header line."""
    header = lines[0].split("\t") if lines else []
    if not set(needed) <= set(header):
        raise TransferDataError(f"{path}: header has columns {header}; expected {list(needed)} among them.")
    return len(header), [header.index(c) for c in needed]


def _read_pairs(path: Path, encoding: str, needed: tuple[str, ...], label_at: int, labels: tuple[str, ...],
                rule: str) -> Split:
    """A tab-separated file of sentence pairs with a header: ``needed`` names the columns of the first sentence,
    the second and (at ``label_at``) the label, whose value must be one of ``labels`` (its position there is the
    label); a line that is not so names ``rule``."""
    lines = _lines(path, encoding)
    width, positions = _header_columns(path, lines, needed)
    il = positions.pop(label_at)
    ia, ib = positions
    a, b, ids = [], [], []
    for line_no, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < width or fields[il] not in labels:
            raise TransferDataError(f"{path} line {line_no}: expected {width} tab-separated fields with {rule}.")
        a.append(_clean(fields[ia]))
        b.append(_clean(fields[ib]))
        ids.append(labels.index(fields[il]))
    return Split(a, np.asarray(ids, dtype=np.int64), b)


def read_mrpc(folder: Path) -> dict[str, Split]:
    """Tab-separated with a header (Quality, #1 ID, #2 ID, #1 String, #2 String); BOM allowed."""
    return {split: _read_pairs(folder / f"msr_paraphrase_{split}.txt", "utf-8-sig",
                               ("Quality", "#1 String", "#2 String"), 0, ("0", "1"), "Quality 0|1")
            for split in ("train", "test")}


def read_sick_entailment(folder: Path) -> dict[str, Split]:
    """SICK-E: tab-separated with a header (pair_ID, sentence_A, sentence_B, relatedness_score,
    entailment_judgment); train ``SICK_train.txt``, dev ``SICK_trial.txt``, test
    ``SICK_test_annotated.txt``; labels as SentEval: CONTRADICTION 0, NEUTRAL 1, ENTAILMENT 2."""
    return {split: _read_pairs(folder / name, "utf-8", ("sentence_A", "sentence_B", "entailment_judgment"), 2,
                               SICK_LABELS, f"entailment_judgment in {SICK_LABELS}")
            for split, name in (("train", "SICK_train.txt"), ("dev", "SICK_trial.txt"),
                                ("test", "SICK_test_annotated.txt"))}


def senteval_order(split: Split) -> Split:
    """The rows in SentEval's order, which its folds are drawn on: sorted by whitespace token
    count then label (pairs: tokens of the first sentence, of the second, then label); ties keep
    the file order (Python's sort is stable)."""

    def key(i: int):
        label = int(split.labels[i])
        if split.texts_b is None:
            return (len(split.texts[i].split()), label)
        return (len(split.texts[i].split()), len(split.texts_b[i].split()), label)

    return split.subset(np.asarray(sorted(range(len(split)), key=key), dtype=np.int64))


