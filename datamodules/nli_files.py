"""The NLI files PairSupCon reads (docs/methods/pairsupcon.md): their layouts, detection and readers.

Every reader yields ``(sentence1, sentence2, y)`` with ``y = 1`` for entailment and ``y = 0`` for
contradiction; neutral pairs and pairs without a gold label (``-`` or empty, as in SNLI/MultiNLI
where annotators disagreed) are dropped, as PairSupCon does.

Supported layouts (detected from the file name and its header, see :func:`detect_format`):

- ``jsonl``: SNLI/MultiNLI ``*.jsonl`` releases, one JSON object per line with ``sentence1``,
  ``sentence2`` and ``gold_label``.
- ``tsv``: SNLI/MultiNLI ``*.txt``/``*.tsv`` releases, tab-separated with a header naming
  ``gold_label``, ``sentence1`` and ``sentence2`` among other columns.
- ``triplet_csv``: SimCSE's ``nli_for_simcse.csv`` layout ``sent0,sent1,hard_neg``; each row
  gives two pairs, ``(sent0, sent1, 1)`` and ``(sent0, hard_neg, 0)``.
- ``pair_csv``: ``sentence1,sentence2,label`` (or ``gold_label``, as in
  ``nli_sample.csv``). The label is either text (entailment / contradiction /
  neutral, any case; ``-`` or empty = unlabeled) or an integer in THIS project's convention:
  ``1 = entailment, 0 = contradiction``. Other integers are rejected, because Hugging Face's
  SNLI/MNLI use 0 = entailment, 1 = neutral, 2 = contradiction and silently mixing the two
  conventions would flip the labels.
- ``senteval``: SentEval's SNLI layout, three aligned files ``s1.<split>``, ``s2.<split>``,
  ``labels.<split>`` in one folder; pass the path of any of the three.

The readers are lazy (one record at a time); ``datamodules.nli`` streams them or loads them whole.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path
from typing import Callable, Iterator

from datamodules import text_decoding
from textcore.errors import DataConfigError

ENTAILMENT, CONTRADICTION = 1, 0
NLIPair = tuple[str, str, int]
FORMATS = ("jsonl", "tsv", "triplet_csv", "pair_csv", "senteval")
_TEXT_LABELS = {"entailment": ENTAILMENT, "contradiction": CONTRADICTION, "neutral": None, "-": None, "": None}
_INT_LABELS = {"1": ENTAILMENT, "0": CONTRADICTION}
_SENTEVAL_NAME = re.compile(r"^(s1|s2|labels)\.(.+)$")
_EXPECTED = (
    "expected one of: jsonl with keys sentence1, sentence2, gold_label; a tab-separated .txt/.tsv "
    "with columns gold_label, sentence1, sentence2; a .csv with columns sent0, sent1, hard_neg "
    "(SimCSE triplets) or sentence1, sentence2, label|gold_label; or SentEval's s1.<split>, "
    "s2.<split>, labels.<split>"
)

# SNLI/MultiNLI sentences can exceed the csv module's default 128 KiB field limit in odd rows.
csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


class NLIFormatError(DataConfigError):
    """An NLI file whose layout or labels cannot be read; the message names file, row and fix."""


# -- labels -------------------------------------------------------------------------------------
def parse_label(value: str, where: str, allow_int: bool = False) -> int | None:
    """Map a gold label to 1 (entailment), 0 (contradiction) or None (neutral / unlabeled)."""
    key = (value or "").strip().lower()
    if key in _TEXT_LABELS:
        return _TEXT_LABELS[key]
    if allow_int and key in _INT_LABELS:
        return _INT_LABELS[key]
    allowed = "entailment, contradiction, neutral, '-' or empty" + (", or the integers 1/0" if allow_int else "")
    hint = (
        " Integer labels here mean 1 = entailment, 0 = contradiction; convert Hugging Face's "
        "0/1/2 (entailment/neutral/contradiction) labels to text first."
        if allow_int
        else ""
    )
    raise NLIFormatError(f"{where}: unknown label '{value}'; allowed: {allowed}.{hint}")


# -- format detection ----------------------------------------------------------------------------
def _senteval_files(path: Path) -> dict[str, Path] | None:
    match = _SENTEVAL_NAME.match(path.name)
    if not match:
        return None
    split = match.group(2)
    return {part: path.with_name(f"{part}.{split}") for part in ("s1", "s2", "labels")}


def _header(path: Path, delimiter: str, encoding: str | None = None) -> list[str]:
    codec = text_decoding.reading_encoding(encoding)
    with text_decoding.decoding(path, encoding), open(path, newline="", encoding=codec) as f:
        if delimiter == "\t":
            first = f.readline().rstrip("\r\n")
            return first.split("\t") if first else []
        return next(csv.reader(f), [])


def detect_format(path: str | Path, encoding: str | None = None) -> str:
    """Name of the layout of ``path`` (one of :data:`FORMATS`), from its name and header."""
    path = Path(path)
    if _senteval_files(path) is not None:
        return "senteval"
    if not path.exists():
        raise NLIFormatError(f"NLI file '{path}' does not exist; point `path` (or data_dir + file) at it.")
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json"):
        return "jsonl"
    if suffix in (".txt", ".tsv"):
        columns = _header(path, "\t", encoding)
        if {"gold_label", "sentence1", "sentence2"} <= set(columns):
            return "tsv"
    elif suffix == ".csv":
        columns = _header(path, ",", encoding)
        if {"sent0", "sent1", "hard_neg"} <= set(columns):
            return "triplet_csv"
        if {"sentence1", "sentence2"} <= set(columns) and ({"label", "gold_label"} & set(columns)):
            return "pair_csv"
    else:
        raise NLIFormatError(f"NLI file '{path}': unknown extension '{suffix}'; {_EXPECTED}.")
    raise NLIFormatError(f"NLI file '{path}': header has columns {columns}; {_EXPECTED}.")


# -- readers (lazy, one record at a time) --------------------------------------------------------
def _read_jsonl(path: Path, encoding: str | None = None) -> Iterator[NLIPair]:
    with open(path, encoding=text_decoding.reading_encoding(encoding)) as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path} line {line_no}"
            try:
                record = json.loads(line)
                s1, s2, gold = record["sentence1"], record["sentence2"], record.get("gold_label", "")
            except json.JSONDecodeError as err:
                raise NLIFormatError(f"{where}: not valid JSON ({err.msg}); each line must be one object.") from None
            except (KeyError, TypeError):
                keys = sorted(record) if isinstance(record, dict) else type(record).__name__
                raise NLIFormatError(f"{where}: keys {keys}; {_EXPECTED}.") from None
            y = parse_label(gold, where)
            if y is not None:
                yield s1, s2, y


def _read_tsv(path: Path, encoding: str | None = None) -> Iterator[NLIPair]:
    with open(path, encoding=text_decoding.reading_encoding(encoding), newline="") as f:
        columns = f.readline().rstrip("\r\n").split("\t")
        _check_columns(path, columns, [("gold_label",), ("sentence1",), ("sentence2",)])
        i_gold, i_s1, i_s2 = (columns.index(c) for c in ("gold_label", "sentence1", "sentence2"))
        needed = max(i_gold, i_s1, i_s2)
        # split on tabs ourselves: the release files contain bare quotes that csv would misread
        for line_no, line in enumerate(f, start=2):
            fields = line.rstrip("\r\n").split("\t")
            if len(fields) == 1 and not fields[0]:
                continue
            where = f"{path} line {line_no}"
            if len(fields) <= needed:
                raise NLIFormatError(f"{where}: {len(fields)} tab-separated fields, the header has {len(columns)}.")
            y = parse_label(fields[i_gold], where)
            if y is not None:
                yield fields[i_s1], fields[i_s2], y


def _check_columns(path: Path, columns: list[str], groups: list[tuple[str, ...]]) -> None:
    """Each group lists alternatives of which at least one column must be present."""
    if not all(set(group) & set(columns) for group in groups):
        raise NLIFormatError(f"NLI file '{path}': header has columns {columns}; {_EXPECTED}.")


def _csv_rows(path: Path, groups: list[tuple[str, ...]], encoding: str | None = None) -> Iterator[tuple[int, dict]]:
    with open(path, encoding=text_decoding.reading_encoding(encoding), newline="") as f:
        reader = csv.DictReader(f)
        _check_columns(path, list(reader.fieldnames or []), groups)
        for row in reader:
            yield reader.line_num, row


def _read_triplet_csv(path: Path, encoding: str | None = None) -> Iterator[NLIPair]:
    for line_no, row in _csv_rows(path, [("sent0",), ("sent1",), ("hard_neg",)], encoding):
        if None in row.values():
            raise NLIFormatError(f"{path} line {line_no}: fewer fields than the header sent0,sent1,hard_neg.")
        yield row["sent0"], row["sent1"], ENTAILMENT
        yield row["sent0"], row["hard_neg"], CONTRADICTION


def _read_pair_csv(path: Path, encoding: str | None = None) -> Iterator[NLIPair]:
    label_column = None
    for line_no, row in _csv_rows(path, [("sentence1",), ("sentence2",), ("label", "gold_label")], encoding):
        if label_column is None:
            label_column = "label" if "label" in row else "gold_label"
        where = f"{path} line {line_no} column '{label_column}'"
        if row[label_column] is None or row["sentence2"] is None:
            raise NLIFormatError(f"{path} line {line_no}: fewer fields than the header.")
        y = parse_label(row[label_column], where, allow_int=True)
        if y is not None:
            yield row["sentence1"], row["sentence2"], y


def _read_senteval(path: Path, encoding: str | None = None) -> Iterator[NLIPair]:
    files = _senteval_files(path)
    missing = [str(p) for p in files.values() if not p.exists()]
    if missing:
        raise NLIFormatError(f"SentEval NLI layout of '{path}' needs s1/s2/labels files; missing {missing}.")
    handles = [open(files[k], encoding=text_decoding.reading_encoding(encoding)) for k in ("s1", "s2", "labels")]
    try:
        line_no = 0
        while True:
            lines = [h.readline() for h in handles]
            line_no += 1
            ended = [not line for line in lines]
            if all(ended):
                return
            if any(ended):
                short = [str(files[k]) for k, e in zip(("s1", "s2", "labels"), ended) if e]
                raise NLIFormatError(f"{short} end at line {line_no} before the other SentEval files.")
            s1, s2, gold = (line.rstrip("\r\n") for line in lines)
            y = parse_label(gold, f"{files['labels']} line {line_no}")
            if y is not None:
                yield s1, s2, y
    finally:
        for h in handles:
            h.close()


_READERS: dict[str, Callable[[Path, str | None], Iterator[NLIPair]]] = {
    "jsonl": _read_jsonl,
    "tsv": _read_tsv,
    "triplet_csv": _read_triplet_csv,
    "pair_csv": _read_pair_csv,
    "senteval": _read_senteval,
}


def iter_pairs(path: str | Path, fmt: str | None = None, encoding: str | None = None) -> Iterator[NLIPair]:
    """Lazily yield (sentence1, sentence2, y) from ``path``; neutral and unlabeled pairs dropped.

    A byte that is not valid in ``encoding`` (UTF-8 by default) raises
    :class:`datamodules.text_decoding.TextDecodeError` naming the file and its line.
    """
    path = Path(path)
    fmt = fmt or detect_format(path, encoding)
    if fmt not in _READERS:
        raise NLIFormatError(f"NLI format '{fmt}' for '{path}' is not one of {FORMATS}.")
    return _decode_guard(_READERS[fmt](path, encoding), path, fmt, encoding)


def _decode_guard(pairs: Iterator[NLIPair], path: Path, fmt: str, encoding: str | None) -> Iterator[NLIPair]:
    try:
        yield from pairs
    except UnicodeError as err:  # also a codec's own check (UTF-16 without a byte-order mark)
        files = list(_senteval_files(path).values()) if fmt == "senteval" else [path]
        bad = next((f for f in files if text_decoding.locate_decode_error(f, encoding) is not None), path)
        raise text_decoding.decode_error(bad, encoding, "dataset.encoding", err) from None


def read_pairs(path: str | Path, fmt: str | None = None, encoding: str | None = None) -> list[NLIPair]:
    return list(iter_pairs(path, fmt, encoding))


def count_pairs(path: str | Path, fmt: str | None = None, encoding: str | None = None) -> int:
    return sum(1 for _ in iter_pairs(path, fmt, encoding))


def has_pairs(path: str | Path, fmt: str | None = None, encoding: str | None = None) -> bool:
    """Whether ``path`` holds at least one entailment or contradiction pair (stops at the first)."""
    return next(iter(iter_pairs(path, fmt, encoding)), None) is not None
