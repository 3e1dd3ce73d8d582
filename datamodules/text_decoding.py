"""Reading text files in a named encoding, with undecodable bytes reported by file and line.

Every reader of user data (the tables of :mod:`datamodules.table_reader`, NLI files, Wikipedia lines, the
augmentation tool, the evaluation and prediction CLIs) goes through these helpers, so that a byte that is not
valid in the configured encoding stops the program with one message naming the file, the line, the byte and the
option to change (``dataset.encoding=...`` for run.py, ``--encoding ...`` for a CLI), instead of a
``UnicodeDecodeError`` traceback.

Python's text files decode in chunks of several KiB, so the line at which a decode error
surfaces is not the line that holds the bad byte; :func:`locate_decode_error` finds the real line
by re-reading the file byte line by byte line (only once an error has happened, so the normal
path costs nothing).
"""
from __future__ import annotations

import codecs
import contextlib
from pathlib import Path
from typing import Iterator

from textcore.errors import UserError

DEFAULT_ENCODING = "utf-8"
_UTF8 = codecs.lookup("utf-8").name


class TextDecodeError(UserError, ValueError):
    """A byte of a data file is not valid in the configured encoding; names file, line and fix."""


def _set_option(option: str, value: str) -> str:
    """How a user sets ``option``: ``dataset.encoding=latin-1`` or ``--encoding latin-1``."""
    return f"{option} {value}" if option.startswith("-") else f"{option}={value}"


def check_encoding(encoding: str | None, option: str = "dataset.encoding") -> str:
    """The encoding's canonical name; an unknown name is a ``UserError`` naming the option."""
    # `dataset.encoding=1` arrives as a number; `dataset.encoding=''` is a name left out, not "the default"
    if encoding is not None and (not isinstance(encoding, str) or not encoding.strip()):
        raise TextDecodeError(f"{option}={encoding!r}: an encoding is a name such as utf-8, latin-1 or cp1252 "
                              f"(`{_set_option(option, 'utf-8')}`).")
    name = encoding or DEFAULT_ENCODING
    try:
        return codecs.lookup(name).name
    except LookupError:
        raise TextDecodeError(
            f"{option}: unknown encoding '{name}'; use a Python codec name such as utf-8, latin-1, cp1252 "
            f"or utf-16 (`{_set_option(option, 'utf-8')}`)."
        ) from None


def reading_encoding(encoding: str | None) -> str:
    """The codec to open a file with: UTF-8 files may start with a byte-order mark, which is dropped."""
    name = check_encoding(encoding)
    return "utf-8-sig" if name == _UTF8 else name


def locate_decode_error(path: str | Path, encoding: str | None = None) -> tuple[int, int, bytes, str] | None:
    """(line, byte column, offending bytes, reason) of the first undecodable byte of ``path``, 1-based;
    None when the whole file decodes.

    The file is read as bytes, line by line, through an incremental decoder (which also handles
    multi-byte characters and encodings such as UTF-16 whose lines do not split on b'\\n').
    """
    decoder = codecs.getincrementaldecoder(reading_encoding(encoding))()
    line_no = 1
    with open(path, "rb") as handle:
        for raw in handle:
            try:
                text = decoder.decode(raw)
            except UnicodeDecodeError as err:
                before = _text_before(raw, err, encoding)
                return line_no + before.count("\n"), err.start + 1, err.object[err.start : err.end], err.reason
            except UnicodeError as err:  # a codec's own check, e.g. UTF-16 without a byte-order mark
                return line_no, 1, raw[:2], str(err)
            line_no += text.count("\n")
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError as err:
            return line_no, err.start + 1, err.object[err.start : err.end], err.reason
        except UnicodeError as err:
            return line_no, 1, b"", str(err)
    return None


def _text_before(raw: bytes, err: UnicodeDecodeError, encoding: str | None) -> str:
    """The text of ``raw`` before the bad byte (it may contain line breaks in UTF-16 files)."""
    try:
        return raw[: err.start].decode(reading_encoding(encoding), errors="replace")
    except Exception:  # noqa: BLE001 - only used to count line breaks
        return ""


def decode_error(path: str | Path, encoding: str | None = None, option: str | None = "dataset.encoding",
                 err: UnicodeError | None = None) -> TextDecodeError:
    """The one-line error for an undecodable byte of ``path``, with its real line number."""
    name = check_encoding(encoding, option or "encoding")
    found = locate_decode_error(path, encoding)
    if found is not None:
        line, column, raw, reason = found
        where = f"'{path}' line {line} (byte {column} of the line)"
        shown = " ".join(f"0x{b:02x}" for b in raw) or "?"
        noun, verb = ("bytes", "are") if len(raw) > 1 else ("byte", "is")
        what = f"{noun} {shown} {verb} not valid {name} ({reason})"
    else:  # the decode error came from somewhere we cannot re-read (should not happen)
        where = f"'{path}'"
        what = f"not valid {name}" + (f" ({getattr(err, 'reason', err)})" if err is not None else "")
    if option is None:  # a format with a fixed encoding
        return TextDecodeError(f"{where}: {what}. The file must be {name}: re-save it as {name}.")
    # UTF-16 without a byte-order mark decodes once its byte order is named
    other = "latin-1" if name == _UTF8 else ("utf-16-le" if name == "utf-16" else "utf-8")
    return TextDecodeError(
        f"{where}: {what}. Re-save the file as UTF-8, or give its encoding with "
        f"`{_set_option(option, other)}` (or cp1252, utf-16, ...)."
    )


@contextlib.contextmanager
def decoding(path: str | Path, encoding: str | None = None, option: str | None = "dataset.encoding"):
    """Turns a ``UnicodeDecodeError`` raised while reading ``path`` into a :class:`TextDecodeError`.

    Works around plain ``open`` loops and ``pandas.read_csv`` alike. Not for generators: a
    ``with`` inside a generator function is what :func:`iter_lines` does.
    """
    try:
        yield
    except UnicodeError as err:  # also a codec's own check (UTF-16 without a byte-order mark)
        raise decode_error(path, encoding, option, err) from None


def iter_lines(path: str | Path, encoding: str | None = None, option: str = "dataset.encoding",
               newline: str | None = None) -> Iterator[str]:
    """The lines of ``path`` (with their line ends), decoded; a bad byte raises :class:`TextDecodeError`
    naming its real line. A UTF-8 byte-order mark is dropped."""
    codec = reading_encoding(encoding)
    with open(path, encoding=codec, newline=newline) as handle:
        try:
            yield from handle
        except UnicodeError as err:
            raise decode_error(path, encoding, option, err) from None
