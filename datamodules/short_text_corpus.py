"""A short-text corpus read from a CSV/TSV/JSONL/Parquet/text file: texts, augmentation columns, labels, and the
file line each kept row starts on (docs/evaluation.md, "Your own texts")."""
from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from datamodules import table_reader
from textcore.errors import DataConfigError

log = logging.getLogger(__name__)


@dataclass
class ShortTextCorpus:
    """Texts of one corpus, with cleaned views and optional labels.

    ``lines`` holds the file line (1-based, the header is line 1) each kept row starts on: rows
    without any text are dropped, so the position in ``texts`` is not the position in the file.
    """

    path: Path
    texts: list[str]
    augmentations: list[list[str]]  # one list per augmentation column
    labels: np.ndarray | None  # raw label values, or None when the file has no labels
    label_names: list | None = None
    lines: list[int] | None = None

    def __len__(self) -> int:
        return len(self.texts)


def read_table(path: Path, encoding: str | None = None) -> pd.DataFrame:
    if not path.exists():
        raise DataConfigError(
            f"Data file '{path}' does not exist. Set `data_dir=<folder>` (and `dataset.file=<name>`) "
            "to where the file is; the benchmark sets: `python tools.py download` (docs/data.md)."
        )
    try:
        frame = table_reader.read_table(path, encoding)
    except table_reader.EmptyTableError:
        raise DataConfigError(f"Data file '{path}' is empty: it needs a header row and at least one text.") from None
    if len(frame) == 0:
        raise DataConfigError(f"Data file '{path}' has a header but no rows: add texts to it.")
    return frame


def _line_list(lines: Sequence[int], limit: int = 10) -> str:
    shown = ", ".join(str(n) for n in lines[:limit])
    return shown + (f", ... ({len(lines) - limit} more)" if len(lines) > limit else "")


def text_column_of(frame: pd.DataFrame, path: Path, label_column: str | None) -> str:
    """The column ``dataset.text_column=null`` means: ``text`` when the file has one, else its only column of text
    (a column other than the label column whose values are not all numbers); several are an error that lists them."""
    if "text" in frame.columns:
        return "text"
    candidates = [c for c in frame.columns if c != label_column
                  and pd.to_numeric(frame[c].dropna(), errors="coerce").isna().any()]
    if len(candidates) == 1:
        log.info("dataset.text_column: '%s', the only column of text in %s", candidates[0], path)
        return candidates[0]
    raise DataConfigError(
        f"'{path}' has no column 'text' and {len(candidates) or 'no'} columns of text"
        + (f" ({candidates})" if candidates else f" (its columns: {list(frame.columns)})")
        + ": name the texts' column with `dataset.text_column=<column>`."
    )


def load_corpus(
    path: str | Path,
    text_column: str | None = "text",
    label_column: str | None = "label",
    aug_columns: Sequence[str] = (),
    encoding: str | None = None,
) -> ShortTextCorpus:
    """Read and validate a corpus (in ``encoding``, UTF-8 by default); ``text_column=None``: :func:`text_column_of`.

    Rows with no text in any used column (text and augmentation columns) are dropped and their
    file lines reported in one warning: an empty string would otherwise be trained on and scored
    as a text. In the other rows an empty text is replaced by its first augmentation and an empty
    augmentation by the text, reported in one warning.
    """
    path = Path(path)
    frame = read_table(path, encoding)
    columns = list(frame.columns)
    if text_column is None:
        text_column = text_column_of(frame, path, label_column)
    _check_columns(path, columns, text_column, aug_columns)
    file_lines = np.asarray(table_reader.file_lines(path, encoding, len(frame)))

    def blank(values: pd.Series) -> pd.Series:
        return values.isna() | (values.fillna("").str.strip() == "")

    no_text = blank(frame[text_column])
    for column in aug_columns:
        no_text &= blank(frame[column])
    if no_text.all():
        raise DataConfigError(
            f"'{path}' has no text in column '{text_column}'"
            + (f" or {list(aug_columns)}" if aug_columns else "")
            + ": every row is empty. Check `dataset.text_column` (the file has columns "
            f"{columns})."
        )
    if no_text.any():
        dropped = file_lines[no_text.to_numpy()].tolist()
        warnings.warn(
            f"{path}: dropped {len(dropped)} row(s) with no text in {[text_column, *aug_columns]} "
            f"(file lines {_line_list(dropped)}); they are not trained on, scored or predicted.",
            stacklevel=2,
        )
        keep = ~no_text.to_numpy()
        frame = frame[keep].reset_index(drop=True)
        file_lines = file_lines[keep]
    replaced: dict[str, int] = {}
    texts = frame[text_column]
    missing = blank(texts)
    if missing.any():
        replaced[text_column] = int(missing.sum())
        # an empty original falls back to its first non-empty augmentation
        fallback = pd.Series([""] * len(frame))
        for column in reversed(aug_columns):
            fallback = frame[column].where(~blank(frame[column]), fallback)
        texts = texts.where(~missing, fallback)
    texts = texts.fillna("").astype(str).tolist()
    augmentations = []
    for column in aug_columns:
        values = frame[column]
        missing = blank(values)
        if missing.any():
            replaced[column] = int(missing.sum())
        augmentations.append([t if not m else o for t, m, o in zip(values.fillna("").tolist(), missing, texts)])
    if replaced:
        detail = ", ".join(f"{n} in '{c}'" for c, n in replaced.items())
        warnings.warn(
            f"{path}: replaced empty or missing texts ({detail}); an empty text is replaced by its "
            "augmentation, an empty augmentation by the original text.",
            stacklevel=2,
        )
    labels = _labels(frame, path, label_column, file_lines, columns)
    return ShortTextCorpus(path, texts, augmentations, labels, lines=[int(n) for n in file_lines])


def _check_columns(path: Path, columns: list, text_column: str, aug_columns: Sequence[str]) -> None:
    """Each column the dataset config names is one of the file's; the error names the key to change."""
    for key, column in [("dataset.text_column", text_column)] + [
        (f"dataset.aug_columns[{i}]", c) for i, c in enumerate(aug_columns)
    ]:
        if column not in columns:
            raise DataConfigError(
                f"Column '{column}' ({key}) is not in '{path}'; the file has columns {columns}. "
                f"Set `{key.split('[')[0]}=...` to one of them"
                + (", or use `dataset.augmentation=virtual` with `dataset.aug_columns=[]`." if "aug" in key else ".")
            )


def _labels(frame: pd.DataFrame, path: Path, label_column: str | None, file_lines: np.ndarray,
            columns: list) -> np.ndarray | None:
    """The label of every row (None without a label column: a warning when the config names one)."""
    if label_column and label_column in frame.columns:
        if frame[label_column].isna().any():
            rows = file_lines[frame[label_column].isna().to_numpy()].tolist()
            raise DataConfigError(
                f"'{path}' has rows without a label in column '{label_column}' (file lines {_line_list(rows, 5)}). "
                "Fill them in, or set `dataset.label_column=null` to train without labels."
            )
        return frame[label_column].to_numpy()
    if label_column:
        warnings.warn(
            f"{path}: no label column '{label_column}' (columns {columns}); training without labels, "
            "predictions are written but no accuracy is reported.",
            stacklevel=3,  # the caller of load_corpus
        )
    return None
