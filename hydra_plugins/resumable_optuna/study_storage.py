"""What the resumable sweeper needs to know about a study's storage: which one the user chose, the SQLite or journal
file to create, the study it already holds, a database it cannot open (which stops the sweep with one line that names
it), and the errors of the jobs it ran.

``hydra.sweeper.storage`` is one of

- ``sqlite:///<file>``: an SQLite file, for drivers of one machine (the default, ``<sweep folder>/optuna.db``);
- ``journal:<file>``: Optuna's journal file (``JournalStorage(JournalFileBackend(file))``), appended to under a
  lock that works on a shared (NFS) file system: drivers on several machines share one study without a server;
- any other database URL SQLAlchemy knows (``postgresql+psycopg://user:password@host/db``, ``mysql+pymysql://...``).

Without the check of an SQLite file a damaged ``<sweep>/optuna.db`` (a partial copy, a file of another program
under that name) ends in a long SQLAlchemy traceback before the first trial.
"""
from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

from textcore import run_folder
from textcore.errors import UserError

SQLITE_HEADER = b"SQLite format 3\x00"
JOURNAL = "journal:"


class StudyStorageError(UserError):
    """The study storage of an Optuna sweep cannot be opened; the message names it and the way out."""


def sqlite_file(storage: Any) -> Path | None:
    """The database file of an ``sqlite:///<path>`` storage URL (None for other storages)."""
    text = str(storage or "")
    return Path(text[len("sqlite:///"):]) if text.startswith("sqlite:///") else None


def journal_file(storage: Any) -> Path | None:
    """The file of a ``journal:<path>`` storage (None for other storages)."""
    text = str(storage or "")
    return Path(text[len(JOURNAL):].removeprefix("//")) if text.startswith(JOURNAL) else None


def dashboard_command(storage: Any) -> str | None:
    """The optuna-dashboard command that shows the study (it takes a journal file by its path)."""
    if not storage:
        return None
    path = journal_file(storage)
    return f"optuna-dashboard {path if path is not None else storage}"


def check_storage_value(storage: Any) -> None:
    """A storage value the sweeper can open: a database URL, ``journal:<file>`` or null; else a ConfigError."""
    text = str(storage or "")
    if text and "://" not in text and not text.startswith(JOURNAL):
        from textcore.errors import ConfigError

        raise ConfigError(f"hydra.sweeper.storage={text}: neither a database URL nor a journal file; write "
                          f"sqlite:///{text} (one machine), journal:{text} (a shared file system) or a server's URL "
                          "(postgresql+psycopg://user@host/db)")


def open_storage(storage: Any, heartbeat_seconds: float | None = None, grace_seconds: float | None = None,
                 stale_callback=None):
    """The Optuna storage of ``hydra.sweeper.storage`` (None: in memory). With ``heartbeat_seconds``, the storage
    records Optuna's heartbeat of each running trial, and ``optuna.storages.fail_stale_trials`` fails a trial whose
    heartbeat is older than ``grace_seconds`` and hands it to ``stale_callback`` (killed_trials.py)."""
    if not storage:
        return None
    import warnings

    import optuna

    path = journal_file(storage)
    if path is not None:
        from optuna.storages.journal import JournalFileBackend

        if heartbeat_seconds is None:
            return optuna.storages.JournalStorage(JournalFileBackend(str(path)))
        from hydra_plugins.resumable_optuna.killed_trials import heartbeat_journal_storage

        return heartbeat_journal_storage(JournalFileBackend(str(path)), heartbeat_seconds, grace_seconds,
                                         stale_callback)
    if heartbeat_seconds is None:
        return optuna.storages.RDBStorage(str(storage))
    import inspect

    key = "heartbeat_stale_trial_callback" if "heartbeat_stale_trial_callback" in \
        inspect.signature(optuna.storages.RDBStorage).parameters else "failed_trial_callback"
    from sqlalchemy.exc import IntegrityError, ProgrammingError

    for attempt in range(5):
        try:
            with warnings.catch_warnings():  # heartbeats are "experimental" in Optuna's words since 2.9
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.storages.RDBStorage(str(storage), heartbeat_interval=heartbeat_seconds,
                                                  grace_period=grace_seconds, **{key: stale_callback})
        except (IntegrityError, ProgrammingError):
            # Optuna creates its tables unguarded: drivers started at once on an empty PostgreSQL database race on
            # CREATE TYPE/TABLE, and all but one fail; a moment later the tables are there and opening succeeds
            if attempt == 4:
                raise
            time.sleep(0.5 + random.random())


def trials_in_storage(storage: Any, study_name: str | None) -> int:
    """Trials the named study already holds in ``storage`` (0: no storage, no such study yet)."""
    if not storage or not study_name:
        return 0
    path = sqlite_file(storage) or journal_file(storage)
    if path is not None and not path.is_file():
        return 0
    import optuna

    summaries = optuna.get_all_study_summaries(storage=open_storage(storage))
    return next((s.n_trials for s in summaries if s.study_name == study_name), 0)


def _way_out(what: str) -> str:
    return (f"{what}. To start a new study, move the file away (or use another hydra.sweep.dir); to use another "
            "database, set hydra.sweeper.storage=<URL> (e.g. sqlite:///<file>).")


def check_sqlite_file(path: Path) -> None:
    """``path`` is absent, empty (SQLite creates the tables) or an SQLite database; else a StudyStorageError."""
    if not path.exists():
        return
    if not path.is_file():
        raise StudyStorageError(_way_out(f"the study database '{path}' (hydra.sweeper.storage) is a folder, "
                                         "not an SQLite file"))
    try:
        with open(path, "rb") as handle:
            head = handle.read(len(SQLITE_HEADER))
    except OSError as err:
        raise StudyStorageError(_way_out(f"the study database '{path}' cannot be read ({err.strerror})")) from None
    if head and head != SQLITE_HEADER:
        raise StudyStorageError(_way_out(f"the study database '{path}' (hydra.sweeper.storage) is not an SQLite "
                                         "database (damaged, or another program's file)"))


def storage_failure(storage: Any, err: Exception) -> StudyStorageError:
    """The one-line error for a storage that the database layer refused (SQLAlchemy, sqlite3, Optuna's schema)."""
    while err.__cause__ is not None:  # Optuna wraps the database's own, more telling, error
        err = err.__cause__
    first = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__
    return StudyStorageError(_way_out(f"the study storage '{storage}' (hydra.sweeper.storage) cannot be opened "
                                      f"({type(err).__name__}: {first})"))


def database_errors() -> tuple[type[BaseException], ...]:
    """What the storages raise for a database they cannot open or read."""
    import sqlite3

    from optuna.exceptions import StorageInternalError

    try:
        from sqlalchemy.exc import SQLAlchemyError
    except ImportError:  # an Optuna without SQLAlchemy (journal storage only)
        return (sqlite3.Error, StorageInternalError, OSError)
    return (sqlite3.Error, SQLAlchemyError, StorageInternalError, OSError)


def job_error(ret: Any, folder: Path | None) -> str | None:
    """The first line of a finished job's error: its ``failed.json`` (run.py's user errors, the sweep callback's
    record of an exception), else the exception Hydra kept; None for a job that succeeded."""
    text = None
    if folder is not None and run_folder.RunFolder(folder).has(run_folder.FAILED):
        try:
            text = run_folder.RunFolder(folder).json(run_folder.FAILED).get("error")
        except run_folder.RunFileError:
            text = f"failed ({run_folder.FAILED} unreadable)"
    elif isinstance(getattr(ret, "_return_value", None), BaseException):
        err = ret._return_value
        text = f"{type(err).__name__}: {err}"
    if not text:
        return None
    lines = str(text).strip().splitlines()
    return lines[0] if lines else str(text)


def existing_study(storage: Any, study_name: str | None):
    """The named study in ``storage``, or None (no storage, no such study yet)."""
    if not storage or not study_name or trials_in_storage(storage, study_name) == 0:
        return None
    import optuna

    return optuna.load_study(study_name=study_name, storage=open_storage(storage))


def job_folder(ret: Any) -> Path | None:
    """The run folder of a job Hydra returned."""
    output_dir = getattr(getattr(getattr(getattr(ret, "hydra_cfg", None), "hydra", None), "runtime", None),
                         "output_dir", None)
    return Path(str(output_dir)) if output_dir else None


def note_errors(trials: list, returns: list) -> None:
    """Each failed job's first error line as its trial's user attribute ``error``, while the trial still runs (the
    sweeper tells its state next); ``trials[i]`` is the trial of ``returns[i]``."""
    for trial, ret in zip(trials, returns):
        error = job_error(ret, job_folder(ret))
        if error:
            trial.set_user_attr("error", error[:500])
