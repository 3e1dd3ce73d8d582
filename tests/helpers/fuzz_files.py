"""Writing generated tables as the files a user has (tests/fuzz/test_fuzz_readers.py), and what reading them must
give."""
from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd


@dataclass
class Written:
    path: Path
    fmt: str
    encoding: str  # the encoding the bytes are in (utf-8 when the texts cannot be written in the one asked)
    texts: list[str]  # the texts as a reader must see them, one per data row
    labels: list[str | None] | None  # None: no label column; a None entry: a missing label
    lines: list[int] | None  # the file line each data row starts on (None: not checked)


def _encode(content: str, encoding: str) -> tuple[bytes, str]:
    try:
        return content.encode(encoding), encoding
    except UnicodeEncodeError:
        return content.encode("utf-8"), "utf-8"


def write_table(folder: Path, texts: list[str], labels: list[str | None] | None, fmt: str, encoding: str,
                name: str = "data") -> Written:
    """``texts`` (and ``labels``) as a file of format ``fmt`` in ``encoding``."""
    path = folder / f"{name}.{fmt}"
    header = ["text"] + (["label"] if labels is not None else [])
    rows = [[t] + ([labels[i]] if labels is not None else []) for i, t in enumerate(texts)]
    lines: list[int] | None = None
    if fmt in ("csv", "tsv"):
        buffer = io.StringIO(newline="")
        csv.writer(buffer, delimiter="," if fmt == "csv" else "\t").writerows(
            [header] + [["" if c is None else c for c in r] for r in rows])
        data, used = _encode(buffer.getvalue(), encoding)
        # a line of nothing but spaces and tabs (an unquoted one-cell row) is a blank line to pandas: no row
        delimiter = "," if fmt == "csv" else "\t"
        blank_line = [len(r) == 1 and bool(r[0]) and all(c in " \t" and c != delimiter for c in r[0]) for r in rows]
        lines, at = [], 2  # each row ends with \r\n; a quoted line break inside a cell starts a new line
        for r, skipped in zip(rows, blank_line):
            if not skipped:
                lines.append(at)
            at += 1 + sum((c or "").count("\n") for c in r)
        if any("\r" in c.replace("\r\n", "") for r in rows for c in r if c):
            lines = None  # a lone carriage return: a line break to some readers, not to others
        texts = [t for t, skipped in zip(texts, blank_line) if not skipped]
        labels = [v for v, skipped in zip(labels, blank_line) if not skipped] if labels is not None else None
    elif fmt == "jsonl":
        body = "".join(json.dumps({k: v for k, v in zip(header, r) if v is not None}, ensure_ascii=False) + "\n"
                       for r in rows)
        data, used = _encode(body, encoding)
        lines = list(range(1, len(rows) + 1))
    elif fmt == "parquet":
        pd.DataFrame(rows, columns=header).to_parquet(path)
        return Written(path, fmt, "utf-8", list(texts), labels, None)
    else:  # one text per line: a line break inside a text starts another text
        content = "".join(t + "\n" for t in texts)
        data, used = _encode(content, encoding)
        split = content.replace("\r\n", "\n").replace("\r", "\n").split("\n")[:-1] if content else []
        texts, labels = split, None
        lines = list(range(1, len(split) + 1))
    path.write_bytes(data)
    return Written(path, fmt, used, list(texts), labels, lines)


def has_text(value) -> bool:
    return value is not None and value.strip() != ""


def kept_rows(written: Written) -> list[int]:
    """Rows a corpus keeps: those with text (the others are dropped with a warning)."""
    return [i for i, t in enumerate(written.texts) if has_text(t)]
