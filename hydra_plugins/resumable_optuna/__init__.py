"""Hydra's Optuna sweeper with a study that survives the sweep: stored in a database (an SQLite file in the
sweep folder by default, ``hydra.sweeper.storage``), so a restarted or requeued sweep given the same
``hydra.sweep.dir`` continues the same study.

The plugin numbers its jobs from 0 at every start; here the numbering continues after the trials already in
the study, so the job folders of an earlier session are never overwritten, and a resumed sweep never runs a
trial again. A trial that fails (an exception, a NaN loss, an objective that is not a number) is ``FAIL`` in the
study (``max_failure_rate: 1.0`` in conf/hparams_search: the sweep goes on), with the first line of its error
and its run folder as the trial's user attributes ``error`` and ``run`` (optuna-dashboard shows them).

Hydra takes sweepers only from the ``hydra_plugins`` namespace, of which this folder is a portion (the repository
root is on the path of every run). What it needs to know about the storage, and the one line for a storage that
cannot be opened (Hydra would print the database's traceback), is in ``study_storage.py``.
"""
import sqlite3

from hydra_plugins.hydra_optuna_sweeper.optuna_sweeper import OptunaSweeper

from hydra_plugins.resumable_optuna.study_storage import (
    check_sqlite_file,
    note_trials,
    sqlite_file,
    storage_failure,
    trials_in_storage,
)
from textcore.errors import exit_on_user_error


def _database_errors() -> tuple[type[BaseException], ...]:
    from optuna.exceptions import StorageInternalError

    try:
        from sqlalchemy.exc import SQLAlchemyError
    except ImportError:  # a storage without SQLAlchemy (Optuna's own in-memory or Redis storages)
        return (sqlite3.Error, StorageInternalError)
    return (sqlite3.Error, SQLAlchemyError, StorageInternalError)


class ResumableOptunaSweeper(OptunaSweeper):
    # setup runs in Hydra's own error handler, outside run.py's: the decorator gives the one-line exit
    @exit_on_user_error
    def setup(self, *, hydra_context, task_function, config) -> None:
        super().setup(hydra_context=hydra_context, task_function=task_function, config=config)
        impl = self.sweeper
        path = sqlite_file(impl.storage)
        if path is not None:
            check_sqlite_file(path)
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            impl.job_idx = trials_in_storage(impl.storage, impl.study_name)
        except _database_errors() as err:
            raise storage_failure(impl.storage, err) from err
        launch = impl.launcher.launch

        def launch_and_note(job_overrides, initial_job_idx):
            returns = launch(job_overrides, initial_job_idx)
            note_trials(impl.storage, impl.study_name, returns, initial_job_idx)
            return returns

        impl.launcher.launch = launch_and_note
