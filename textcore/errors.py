"""The project's one user-facing error type, and how entry points report it.

Every error whose message already tells the user what is wrong and how to fix it (a bad key, a
missing file, an undecodable byte, a checkpoint of another method, ...) derives from
``UserError``. Entry points (``run.py`` and every command of ``tools.py``) print such an error as
one line on stderr, without a traceback, and exit with status 2; anything else is a bug and keeps
its traceback. New error kinds subclass ``UserError``; no entry point keeps a list of them.
An ``OSError`` that only reflects the machine's state (disk full, read-only file system,
permission denied on a named file) is reported the same way wherever it was raised.
"""
from __future__ import annotations

import contextlib
import errno
import functools
import os
import shutil
import sys
from pathlib import Path
from typing import Callable, TypeVar

USER_ERROR_EXIT_CODE = 2

F = TypeVar("F", bound=Callable)


class UserError(Exception):
    """Bad input or configuration; the message names the file/row/key, the value and the fix."""


def find_user_error(err: BaseException | None) -> UserError | None:
    """``err`` itself or the first ``UserError`` in its cause/context chain (Hydra and Lightning
    wrap errors raised while instantiating configs or inside hooks)."""
    seen = set()
    chain = []
    while err is not None and id(err) not in seen:
        if isinstance(err, UserError):
            return err
        seen.add(id(err))
        chain.append(err)
        err = err.__cause__ or err.__context__
    for link in chain:  # disk full & co.: not a bug, but raised by code that cannot name the key
        converted = _environment_error(link)
        if converted is not None:
            return converted
    return None


def report_user_error(err: UserError) -> None:
    print(f"error: {err}", file=sys.stderr, flush=True)


def report_user_error_or_raise(err: BaseException) -> UserError:
    """What an entry point does with an exception it caught: the ``UserError`` that ``err`` is or wraps, reported
    as one line on stderr and returned (the caller then exits with :data:`USER_ERROR_EXIT_CODE`); ``err`` raised
    again when it wraps none, so a bug keeps its traceback."""
    user_error = find_user_error(err)
    if user_error is None:
        raise err
    report_user_error(user_error)
    return user_error


def exit_on_user_error(main: F) -> F:
    """Decorator for a CLI's ``main``: a ``UserError`` (possibly wrapped) becomes one line on stderr
    and exit status 2; other exceptions propagate with their traceback."""

    @functools.wraps(main)
    def wrapper(*args, **kwargs):
        try:
            return main(*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - re-raised unless it is (or wraps) a user error
            report_user_error_or_raise(err)
            sys.exit(USER_ERROR_EXIT_CODE)

    return wrapper  # type: ignore[return-value]


class MissingFileError(UserError, FileNotFoundError):
    """A file or folder the run needs does not exist; the message says which key points at it."""


class ConfigError(UserError, ValueError):
    """A configuration value that cannot work; the message names the key, the value and the fix."""


class DataConfigError(UserError, ValueError):
    """A data file or its configuration cannot be used; the message says how to fix it."""


class OutputWriteError(UserError, OSError):
    """An output file could not be written (folder not writable, disk full, ...)."""


# the system refuses the path itself, whatever the space left: permissions, a read-only mount, and EPERM, which
# NFS root squash and container mounts give where a local disk would say EACCES
REFUSED_ERRNOS = {errno.EROFS: "the file system is read-only", errno.EACCES: "permission denied",
                  errno.EPERM: "the system does not permit writing there"}
# OS errors that are the machine's state, never a bug of ours: reported as one line wherever raised
# (output_error: results, tables, checkpoints), each with these words
ENVIRONMENT_ERRNOS = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exceeded",
                      errno.EFBIG: "the file is larger than this process may write", **REFUSED_ERRNOS}


def output_error(err: BaseException, path: str | os.PathLike | None = None, what: str = "",
                 atomic: bool = False) -> OutputWriteError:
    """The one-line ``OutputWriteError`` of every failed write: ``err`` raised while writing ``path`` (``what``
    it is, e.g. ``checkpoint``), its cause in the words of :data:`ENVIRONMENT_ERRNOS`, the space left there
    and, for a write through a temporary file and a rename (``atomic``), whether an earlier file under that
    name is intact."""
    target = path or getattr(err, "filename", None)
    folder = Path(target).parent if target else None
    code = getattr(err, "errno", None)
    if code is None and folder is not None and "write failed" in str(err):  # torch's zip writer: ENOSPC as text
        with contextlib.suppress(OSError):
            if shutil.disk_usage(folder).free < 64 * 2**20:
                code = errno.ENOSPC
    detail = getattr(err, "strerror", None) or str(err)
    reason = f"{ENVIRONMENT_ERRNOS[code]} ({detail})" if code in ENVIRONMENT_ERRNOS else detail
    free = ""
    if folder is not None:
        with contextlib.suppress(OSError):
            free = f", {shutil.disk_usage(folder).free / 2**30:.1f} GiB free there"
    kept = ""
    if atomic and target:
        kept = (f"; the previous {what or 'file'} under that name is intact" if Path(target).exists()
                else "; no file was left behind")
    where = f"{what} '{target}'".lstrip() if target else "an output file"
    fix = "Make the folder writable" if code in REFUSED_ERRNOS else "Free disk space or make the folder writable"
    return OutputWriteError(
        f"cannot write {where}: {reason}{free}{kept}. {fix}, or write "
        "elsewhere (run.py: `hydra.run.dir=<folder>` or `paths.log_dir=<folder>`; CLIs: `--out <folder>`)."
    )


@contextlib.contextmanager
def writing(path: str | os.PathLike, what: str = "", atomic: bool = False, catch: tuple = (OSError,)):
    """Turns an error of ``catch`` raised while writing ``path`` into the ``OutputWriteError`` of
    :func:`output_error` (``what`` and ``atomic`` as there)."""
    try:
        yield
    except UserError:
        raise
    except catch as err:
        raise output_error(err, path, what, atomic) from err


def _environment_error(err: BaseException) -> OutputWriteError | None:
    if isinstance(err, OSError) and not isinstance(err, UserError) and err.errno in ENVIRONMENT_ERRNOS:
        if err.errno in (errno.EACCES, errno.EPERM) and not err.filename:  # not a path (os.kill's EPERM, a socket)
            return None
        return output_error(err)
    return None


class SetupError(UserError, RuntimeError):
    """A part the configuration needs is missing at run time (e.g. a phase callback was removed)."""


class WrongMethodError(UserError, TypeError):
    """A callback used with a method it does not drive; the message says which method it is for."""
