"""A data file as a table of strings, whatever its format: CSV/TSV, JSON Lines, Parquet or plain text with one text
per line (:data:`FORMATS`, by extension), read whole (:func:`read_table`) or in chunks (:func:`iter_table`), and
the file line each row starts on (:func:`row_start_lines`), so that an error about a row names the line a user
opens. A malformed file is one ``UserError`` naming the file and the line; an undecodable byte is
:mod:`datamodules.text_decoding`'s.
"""
from __future__ import annotations

import codecs
from pathlib import Path

from datamodules.text_decoding import decoding, iter_lines, reading_encoding
from textcore.errors import UserError


class TableError(UserError, ValueError):
    """A CSV/TSV file that cannot be parsed as a table."""


class EmptyTableError(TableError):
    """A CSV/TSV file without even a header row."""


def table_separator(path: str | Path, sep: str | None = None) -> str:
    """``sep``, or a tab for ``.tsv``/``.tab`` files and a comma otherwise."""
    if sep:
        return sep
    return "\t" if Path(path).suffix.lower() in (".tsv", ".tab") else ","


# file formats by extension; every reader returns a DataFrame of strings (missing cells NaN)
FORMATS = {".csv": "csv", ".tsv": "csv", ".tab": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl",
           ".parquet": "parquet", ".pq": "parquet", ".txt": "text"}
TEXT_FILE_COLUMN = "text"  # the one column of a plain-text file (one text per line)


def table_format(path: str | Path) -> str:
    """``csv`` (also TSV), ``jsonl``, ``parquet`` or ``text``, from the file's extension (CSV when unknown)."""
    return FORMATS.get(Path(path).suffix.lower(), "csv")


def _as_strings(frame):
    """Every cell as a string, as the CSV reader gives them; missing and empty cells NaN."""
    import pandas as pd

    def cell(value):
        if value is None or (not isinstance(value, (list, dict)) and pd.isna(value)) or value == "":
            return float("nan")
        return value if isinstance(value, str) else str(value)

    return frame.astype(object).map(cell)


def _jsonl_chunks(path: Path, encoding: str | None, option: str, chunk_rows: int | None):
    """JSON Lines: one JSON object per line (blank lines skipped); the error names the line."""
    import json

    import pandas as pd

    rows, seen = [], False
    for number, line in enumerate(iter_lines(path, encoding, option), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise TableError(f"'{path}' line {number} is not valid JSON ({err.msg}, column {err.colno}): a JSON "
                             'Lines file holds one object per line, e.g. {"text": "...", "label": "..."}.') from None
        if not isinstance(row, dict):
            raise TableError(f"'{path}' line {number} holds a JSON {type(row).__name__}, not an object: each line "
                             'must be one object, e.g. {"text": "...", "label": "..."}.')
        rows.append(row)
        if chunk_rows and len(rows) == chunk_rows:
            yield _as_strings(pd.DataFrame(rows))
            rows, seen = [], True
    if not rows and not seen:
        raise EmptyTableError(f"'{path}' has no JSON object: it needs at least one line such as "
                              '{"text": "..."}.')
    if rows:
        yield _as_strings(pd.DataFrame(rows))


def _parquet_chunks(path: Path, chunk_rows: int | None):
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise TableError(f"'{path}': reading Parquet needs pyarrow (`pip install pyarrow`).") from None
    try:
        table = pq.ParquetFile(path)
        batches = table.iter_batches(batch_size=chunk_rows) if chunk_rows else [table.read()]
        empty = True
        for batch in batches:
            frame = batch.to_pandas()
            if len(frame):
                empty = False
                yield _as_strings(frame)
    except TableError:
        raise
    except Exception as err:  # noqa: BLE001 - any failure to read is the user's file, reported in one line
        raise TableError(f"'{path}' cannot be read as Parquet ({type(err).__name__}: "
                         f"{str(err).strip().splitlines()[0][:160]}); is it a Parquet file?") from None
    if empty:
        raise EmptyTableError(f"'{path}' has no rows.")


def _text_chunks(path: Path, encoding: str | None, option: str, chunk_rows: int | None):
    """One text per line, in a single column named ``text``; blank lines are rows without text."""
    import pandas as pd

    texts, any_text = [], False
    for line in iter_lines(path, encoding, option):
        texts.append(line.rstrip("\r\n"))
        any_text = any_text or bool(texts[-1].strip())
        if chunk_rows and len(texts) == chunk_rows:
            yield _as_strings(pd.DataFrame({TEXT_FILE_COLUMN: texts}))
            texts = []
    if not any_text:
        raise EmptyTableError(f"'{path}' holds no text: a plain-text file has one text per line.")
    if texts:
        yield _as_strings(pd.DataFrame({TEXT_FILE_COLUMN: texts}))


def _csv_chunks(path: Path, encoding: str | None, sep: str | None, option: str, chunk_rows: int | None, kwargs):
    import pandas as pd

    options = {"dtype": str, "keep_default_na": False, "na_values": [""]}
    options.update(kwargs)
    kind = "TSV" if table_separator(path, sep) == "\t" else "CSV"
    try:
        with decoding(path, encoding, option):
            if not chunk_rows:
                yield pd.read_csv(path, sep=table_separator(path, sep), encoding=reading_encoding(encoding), **options)
                return
            with pd.read_csv(path, sep=table_separator(path, sep), encoding=reading_encoding(encoding),
                             chunksize=chunk_rows, **options) as reader:
                yield from reader
    except pd.errors.EmptyDataError:
        raise EmptyTableError(f"'{path}' is empty: it needs a header row and at least one data row.") from None
    except pd.errors.ParserError as err:
        found = locate_table_error(path, encoding, sep, unclosed_quote="EOF inside string" in str(err))
        if found is not None:  # pandas counts rows, not the file's lines, once a quoted text spans lines
            line, what = found
            raise TableError(f"'{path}' line {line}: {what}, so it cannot be parsed as {kind}. Fix that line "
                             "(quote a text that holds the separator, double a quote inside a quoted text) or "
                             "remove it.") from None
        raise TableError(f"'{path}' cannot be parsed as {kind}: {str(err).strip()}. Check quoting and the "
                         "number of fields on that line.") from None


def read_hub_dataset(name: str, split: str = "train", subset: str | None = None):
    """A Hugging Face Hub dataset's split as a DataFrame of strings (through the ``datasets`` library)."""
    try:
        import datasets
    except ImportError:
        raise TableError(f"dataset.name={name}: reading a Hub dataset needs the `datasets` package "
                         "(`pip install datasets`).") from None
    try:
        data = datasets.load_dataset(name, subset, split=split)
    except Exception as err:  # noqa: BLE001 - offline, unknown name or split: one message
        raise TableError(
            f"dataset.name={name} (split '{split}'{f', subset {subset}' if subset else ''}) cannot be loaded from "
            f"the Hugging Face Hub ({type(err).__name__}: {str(err).strip().splitlines()[0][:200]}). Without network, "
            f"download it where there is one (`hf download {name} --repo-type dataset`) and point "
            "HF_HOME at that cache, or save the split as a file (CSV, JSON Lines, Parquet) and use dataset=csv "
            "dataset.file=<file>.") from None
    return _as_strings(data.to_pandas())


def read_table(path: str | Path, encoding: str | None = None, sep: str | None = None,
               option: str = "dataset.encoding", **kwargs):
    """A data file as a pandas DataFrame of strings (empty cells are NaN unless ``kwargs`` say otherwise).

    The format follows the extension (:data:`FORMATS`: CSV/TSV, JSON Lines, Parquet, plain text with one
    text per line in the column ``text``); for CSV the separator too, unless ``sep`` is given. A byte
    that is not valid in ``encoding`` raises :class:`TextDecodeError` with the file line; a missing file
    (``MissingFileError``), an empty file (:class:`EmptyTableError`) or a malformed table
    (:class:`TableError`, naming the line) raise ``UserError`` subclasses too. ``kwargs`` go to
    ``pandas.read_csv``. :func:`iter_table` gives the same rows in chunks.
    """
    import pandas as pd

    frames = list(iter_table(path, encoding, sep, option, chunk_rows=None, **kwargs))
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)


def iter_table(path: str | Path, encoding: str | None = None, sep: str | None = None,
               option: str = "dataset.encoding", chunk_rows: int | None = 50_000, **kwargs):
    """The rows of :func:`read_table`, as DataFrames of at most ``chunk_rows`` rows (None: one), read as they are
    asked for: a file of millions of rows is never held whole. The errors are :func:`read_table`'s, raised when
    the chunk that holds the bad row is read (a JSON Lines file's columns are those of each chunk's rows)."""
    from textcore.errors import MissingFileError

    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"'{path}' does not exist" + (" (it is a folder)" if path.is_dir() else "") + ".")
    kind = table_format(path) if not sep else "csv"
    if kind == "jsonl":
        return _jsonl_chunks(path, encoding, option, chunk_rows)
    if kind == "parquet":
        return _parquet_chunks(path, chunk_rows)
    if kind == "text":
        return _text_chunks(path, encoding, option, chunk_rows)
    return _csv_chunks(path, encoding, sep, option, chunk_rows, kwargs)


def locate_table_error(path: str | Path, encoding: str | None = None, sep: str | None = None,
                       unclosed_quote: bool = False) -> tuple[int, str] | None:
    """(file line, what is wrong) of the first row of a CSV/TSV that pandas refuses: more fields than the header
    (pandas fills a row with fewer), or, with ``unclosed_quote``, the row whose opening quote is never closed (it
    swallows the rest of the file). Read only once an error has happened: the normal path costs nothing."""
    import csv

    delimiter = table_separator(path, sep)
    limit = csv.field_size_limit(2**31 - 1)
    try:
        with open(path, encoding=reading_encoding(encoding), newline="") as handle:
            reader = csv.reader(handle, delimiter=delimiter)
            header, start, last = None, 1, None
            for row in reader:
                if row and header is None:
                    header = len(row)
                elif header is not None and len(row) > header:
                    return start, f"{len(row)} fields where the header has {header}"
                last, start = start, reader.line_num + 1
    except (csv.Error, UnicodeError, OSError):
        return None
    finally:
        csv.field_size_limit(limit)
    if unclosed_quote and last is not None:
        return last, "a quote opens a text here and no quote closes it before the end of the file"
    return None


def row_start_lines(path: str | Path, encoding: str | None = None, sep: str | None = None,
                    rows: int | None = None) -> list[int] | None:
    """File line (1-based) on which each data row starts: for CSV/TSV the header excluded and blank lines
    skipped as pandas does (quoted fields may span lines); for JSON Lines the non-blank lines; for a text
    file every line. None when the file cannot be read so, and for Parquet (rows, not lines).

    ``rows``: the rows the reader found. When the file has exactly one line more than that (the header) and one
    line per row, as almost every file does, no row can span lines nor any line be blank, and the lines are
    known from a count of line ends, without reading the file as a table a second time."""
    import csv

    kind = table_format(path) if not sep else "csv"
    if kind == "parquet":
        return None
    if rows is not None and kind == "csv":
        simple = _one_line_per_row(path, encoding, rows)
        if simple is not None:
            return simple
    if kind in ("jsonl", "text"):
        try:
            with open(path, encoding=reading_encoding(encoding)) as handle:
                return [n for n, line in enumerate(handle, 1) if kind == "text" or line.strip()]
        except (UnicodeError, OSError):
            return None

    delimiter = table_separator(path, sep)
    lines: list[int] = []
    limit = csv.field_size_limit(2**31 - 1)  # pandas reads a text of any length; so must this count
    try:
        with open(path, encoding=reading_encoding(encoding), newline="") as handle:
            raw = _RawLines(handle)
            reader = csv.reader(raw, delimiter=delimiter)
            start, header_seen = 1, False
            for row in reader:
                if row and not (reader.line_num == start and _pandas_blank(raw.last, delimiter)):
                    if header_seen:
                        lines.append(start)
                    header_seen = True
                start = reader.line_num + 1
    except (csv.Error, UnicodeError, OSError):
        return None
    finally:
        csv.field_size_limit(limit)
    return lines


def file_lines(path: str | Path, encoding: str | None, rows: int) -> list[int]:
    """The file line of each of the ``rows`` data rows (:func:`row_start_lines`), or row + 2 when the file cannot be
    read so (Parquet, or a count that does not match)."""
    lines = row_start_lines(path, encoding, rows=rows)
    return lines if lines is not None and len(lines) == rows else [i + 2 for i in range(rows)]


def _one_line_per_row(path: str | Path, encoding: str | None, rows: int) -> list[int] | None:
    """Lines 2..rows+1 when the file holds exactly rows + 1 lines (a header and one line per row), else None;
    only for encodings whose line end is the byte 0x0a (not UTF-16)."""
    encoder = codecs.getincrementalencoder(reading_encoding(encoding))()
    encoder.encode("a")  # past a byte-order mark
    if encoder.encode("\n") != b"\n":
        return None
    count, last = 0, b""
    with open(path, "rb") as handle:
        while block := handle.read(1 << 22):
            count += block.count(b"\n")
            last = block[-1:]
    lines = count + (1 if last not in (b"", b"\n") else 0)
    return list(range(2, rows + 2)) if lines == rows + 1 else None


class _RawLines:
    """The lines of a file as ``csv.reader`` takes them, remembering the last one it took."""

    def __init__(self, handle):
        self.handle, self.last = handle, ""

    def __iter__(self):
        return self

    def __next__(self) -> str:
        self.last = next(self.handle)
        return self.last


def _pandas_blank(line: str, delimiter: str) -> bool:
    """Whether pandas' CSV reader skips this physical line as blank: nothing but spaces and tabs that are not
    the delimiter (``csv.reader`` gives such a line as a row of one field, which would shift every later line)."""
    body = line.rstrip("\r\n")
    return bool(body) and all(c in " \t" and c != delimiter for c in body)
