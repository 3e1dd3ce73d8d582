"""Files written so that a crash, a signal or a full disk never leaves half a file under the name.

The new content goes into a temporary file in the target's folder, is flushed and fsync'ed, and is
renamed over the target (``os.replace``, atomic on one file system): the target is the old file or
the complete new one, even when the process is killed in the middle of the write. :func:`atomic_open` is the
handle form (a csv writer), :func:`atomic_write` the callback form (``torch.save``), :func:`atomic_write_text`
the string form. A failure removes the temporary file and raises the ``OSError`` (or whatever the
writer raised); callers turn it into the one-line error of every failed write (``textcore.errors.writing``).
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import IO, Any, Callable, Iterator


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable (a crash right after it could otherwise lose the new name)."""
    with contextlib.suppress(OSError):  # not every file system lets a folder be opened
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", newline: str | None = None) -> Iterator[IO[Any]]:
    """``open(path, mode)`` for writing (``"w"`` text in UTF-8, ``"wb"`` bytes), except that ``path`` is replaced
    only when the block ends without an error: until then the handle writes a temporary file beside it. The drop-in
    for ``with open(path, "w", newline="") as handle:`` around a csv writer."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes a whole file: mode 'w' or 'wb', not {mode!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        text = {} if mode == "wb" else {"encoding": "utf-8", "newline": newline}
        with os.fdopen(fd, mode, **text) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def atomic_write(path: str | os.PathLike, write: Callable[[IO[Any]], None], binary: bool = True,
                 newline: str | None = None) -> None:
    """Call ``write(handle)`` on a temporary file beside ``path``, then put it in place (``newline``: text mode's)."""
    with atomic_open(path, "wb" if binary else "w", newline=newline) as handle:
        write(handle)


def atomic_write_text(path: str | os.PathLike, text: str, newline: str | None = None) -> None:
    """``text`` (UTF-8) into ``path`` with :func:`atomic_write`."""
    atomic_write(path, lambda handle: handle.write(text), binary=False, newline=newline)
