"""The project's one user-facing error type, and how entry points report it.

Every error whose message already tells the user what is wrong and how to fix it (a bad key, a
missing file, an undecodable byte, a checkpoint of another method, ...) derives from
``UserError``. Entry points (``run.py`` and every ``python -m ...`` CLI) print such an error as
one line on stderr, without a traceback, and exit with status 2; anything else is a bug and keeps
its traceback. New error kinds subclass ``UserError``; no entry point keeps a list of them.
"""
from __future__ import annotations

import functools
import sys
from typing import Callable, TypeVar

USER_ERROR_EXIT_CODE = 2

F = TypeVar("F", bound=Callable)


class UserError(Exception):
    """Bad input or configuration; the message names the file/row/key, the value and the fix."""


def find_user_error(err: BaseException | None) -> UserError | None:
    """``err`` itself or the first ``UserError`` in its cause/context chain (Hydra and Lightning
    wrap errors raised while instantiating configs or inside hooks)."""
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, UserError):
            return err
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return None


def report_user_error(err: UserError) -> None:
    print(f"error: {err}", file=sys.stderr, flush=True)


def exit_on_user_error(main: F) -> F:
    """Decorator for a CLI's ``main``: a ``UserError`` (possibly wrapped) becomes one line on stderr
    and exit status 2; other exceptions propagate with their traceback."""

    @functools.wraps(main)
    def wrapper(*args, **kwargs):
        try:
            return main(*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - re-raised unless it is (or wraps) a user error
            user_error = find_user_error(err)
            if user_error is None:
                raise
            report_user_error(user_error)
            sys.exit(USER_ERROR_EXIT_CODE)

    return wrapper  # type: ignore[return-value]


class MissingFileError(UserError, FileNotFoundError):
    """A file or folder the run needs does not exist; the message says which key points at it."""
