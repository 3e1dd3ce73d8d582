"""Files written so that a crash, a signal or a full disk never leaves half a file under the name.

The new content goes into a temporary file in the target's folder, is flushed and fsync'ed, and is
renamed over the target (``os.replace``, atomic on one file system): the target is the old file or
the complete new one. A failure removes the temporary file and raises the ``OSError`` (or whatever the
writer raised); callers turn it into the one-line error of every failed write (``textcore.errors.writing``).
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import IO, Any, Callable


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable (a crash right after it could otherwise lose the new name)."""
    with contextlib.suppress(OSError):  # not every file system lets a folder be opened
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write(path: str | os.PathLike, write: Callable[[IO[Any]], None], binary: bool = True,
                 newline: str | None = None) -> None:
    """Call ``write(handle)`` on a temporary file beside ``path``, then put it in place (``newline``: text mode's)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        text = {} if binary else {"encoding": "utf-8", "newline": newline}
        with os.fdopen(fd, "wb" if binary else "w", **text) as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def atomic_write_text(path: str | os.PathLike, text: str, newline: str | None = None) -> None:
    """``text`` (UTF-8) into ``path`` with :func:`atomic_write`."""
    atomic_write(path, lambda handle: handle.write(text), binary=False, newline=newline)
