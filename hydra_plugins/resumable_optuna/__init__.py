"""Hydra's Optuna sweeper with a study that survives the sweep and its driver.

The study is stored in a database (an SQLite file in the sweep folder by default, ``hydra.sweeper.storage``), so a
restarted, requeued or killed sweep given the same command and ``hydra.sweep.dir`` continues the same study:

- ``hydra.sweeper.n_trials`` is the number of COMPLETE trials the study should have: a resumed sweep runs the
  trials that are missing (none when the study has them all). A FAIL trial does not count; to extend a study, raise
  ``n_trials``;
- a trial that a killed driver left RUNNING runs again, with the same number and parameters, in its own job folder,
  where its job continues from its last.ckpt (``killed_trials.py``: how a driver that is gone is told from one
  that runs, also with several drivers on one database);
- the sampler of a resumed study is seeded anew from the configured seed, the number of trials in the study and the
  sweep folder, so it does not draw the parameters of the first start's trials again (a fixed seed would);
- each trial runs in the job folder ``<hydra.sweep.dir>/<trial number>`` (``hydra.sweep.subdir``), so the job
  folders of an earlier start are never overwritten and a trial run again finds its own;
- a trial that fails (an exception, a NaN loss, an objective that is not a number) is ``FAIL`` in the study
  (``max_failure_rate: 1.0`` in conf/hparams_search: the sweep goes on), with the first line of its error and its run
  folder as the trial's user attributes ``error`` and ``run`` (optuna-dashboard shows them).

Settings beyond the Optuna sweeper's (``hydra/sweeper=resumable_optuna``): ``heartbeat_seconds`` (30), how often the
driver records that its running trials are alive, and ``grace_seconds`` (300), how old the last heartbeat of a trial
whose driver runs on another host must be before the trial is run again.

Hydra takes sweepers only from the ``hydra_plugins`` namespace, of which this folder is a portion (the repository
root is on the path of every run). What it needs to know about the storage, and the one line for a storage that
cannot be opened (Hydra would print the database's traceback), is in ``study_storage.py``.
"""
from __future__ import annotations

import logging
import sqlite3
import zlib
from dataclasses import dataclass
from pathlib import Path

from hydra.core.config_store import ConfigStore
from hydra_plugins.hydra_optuna_sweeper.config import OptunaSweeperConf
from hydra_plugins.hydra_optuna_sweeper.optuna_sweeper import OptunaSweeper

from hydra_plugins.resumable_optuna.killed_trials import DRIVER, Heartbeat, driver_record, requeue_killed_trials
from hydra_plugins.resumable_optuna.study_storage import (
    check_sqlite_file,
    existing_study,
    note_errors,
    sqlite_file,
    storage_failure,
)
from textcore.errors import ConfigError, exit_on_user_error

log = logging.getLogger(__name__)


@dataclass
class ResumableOptunaSweeperConf(OptunaSweeperConf):
    _target_: str = "hydra_plugins.resumable_optuna.ResumableOptunaSweeper"
    heartbeat_seconds: float = 30.0
    grace_seconds: float = 300.0


ConfigStore.instance().store(group="hydra/sweeper", name="resumable_optuna", node=ResumableOptunaSweeperConf,
                             provider="resumable_optuna")


def _database_errors() -> tuple[type[BaseException], ...]:
    from optuna.exceptions import StorageInternalError

    try:
        from sqlalchemy.exc import SQLAlchemyError
    except ImportError:  # a storage without SQLAlchemy (Optuna's own in-memory or Redis storages)
        return (sqlite3.Error, StorageInternalError)
    return (sqlite3.Error, SQLAlchemyError, StorageInternalError)


def resumed_seed(seed: int, trials_in_study: int, sweep_dir: str) -> int:
    """The sampler's seed for a study that already holds trials: another for every count of trials and every sweep
    folder (drivers of one database in other folders), the same for the same ones."""
    return (int(seed) + trials_in_study + zlib.crc32(str(sweep_dir).encode("utf-8"))) % 2**31


class ResumableOptunaSweeper(OptunaSweeper):
    def __init__(self, *args, heartbeat_seconds: float = 30.0, grace_seconds: float = 300.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.heartbeat_seconds = heartbeat_seconds
        self.grace_seconds = grace_seconds

    # setup runs in Hydra's own error handler, outside run.py's: the decorator gives the one-line exit
    @exit_on_user_error
    def setup(self, *, hydra_context, task_function, config) -> None:
        super().setup(hydra_context=hydra_context, task_function=task_function, config=config)
        if not 0 < float(self.heartbeat_seconds) < float(self.grace_seconds):
            raise ConfigError(
                f"hydra.sweeper.heartbeat_seconds={self.heartbeat_seconds} and grace_seconds={self.grace_seconds}: "
                "the heartbeat must be positive and more frequent than the grace period (e.g. 30 and 300)")
        impl = self.sweeper
        path = sqlite_file(impl.storage)
        if path is not None:
            check_sqlite_file(path)
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            study = existing_study(impl.storage, impl.study_name)
            requeued = requeue_killed_trials(study, impl.storage, float(self.grace_seconds)) if study else []
            trials = existing_study(impl.storage, impl.study_name).get_trials(deepcopy=False) if study else []
        except _database_errors() as err:
            raise storage_failure(impl.storage, err) from err
        self._resume(impl, config, trials, requeued)
        self._run_trials_in_their_folders(impl)

    def _resume(self, impl, config, trials: list, requeued: list[int]) -> None:
        """n_trials counted as COMPLETE trials of the study; the sampler seeded anew for a study with trials."""
        impl.job_idx = len(trials)
        if not trials:
            return
        complete = sum(t.state.name == "COMPLETE" for t in trials)
        wanted = int(impl.n_trials)
        impl.n_trials = max(0, wanted - complete)
        log.info("study %s: %d of hydra.sweeper.n_trials=%d trials complete, %d to run%s", impl.study_name, complete,
                 wanted, impl.n_trials, f" (trials {', '.join(map(str, requeued))} again: their driver was killed)"
                 if requeued else "")
        sampler_cfg = config.hydra.sweeper.get("sampler") or {}
        if sampler_cfg.get("seed") is not None and "GridSampler" not in str(sampler_cfg.get("_target_", "")):
            from hydra.utils import instantiate

            seed = resumed_seed(sampler_cfg.seed, len(trials), str(Path(str(impl.sweep_dir)).resolve()))
            impl.sampler = instantiate(sampler_cfg, seed=seed)
            log.info("sampler seeded with %d (seed %s, %d trials in the study): a resumed study draws new parameters",
                     seed, sampler_cfg.seed, len(trials))

    def _run_trials_in_their_folders(self, impl) -> None:
        """Every trial's job in ``<sweep dir>/<trial number>`` with its driver and run folder recorded before it
        starts, heartbeats while it runs, and its error noted after."""
        configure, launch = impl._configure_trials, impl.launcher.launch
        sweep_dir = Path(str(impl.sweep_dir))
        url = str(impl.storage) if impl.storage else None
        batch: list = []

        def configure_in_their_folders(trials, distributions, fixed):
            overrides = configure(trials, distributions, fixed)
            batch[:] = trials
            placed = []
            for trial, job in zip(trials, overrides):
                trial.set_user_attr("run", str(sweep_dir / str(trial.number)))  # before it starts: kept if killed
                trial.set_system_attr(DRIVER, driver_record())
                placed.append((*job, f"hydra.sweep.subdir={trial.number}"))
            return placed

        def launch_with_heartbeat(job_overrides, initial_job_idx):
            trials = list(batch)
            with Heartbeat(url, [t._trial_id for t in trials], float(self.heartbeat_seconds)):
                returns = launch(job_overrides, trials[0].number if trials else initial_job_idx)
            note_errors(trials, returns)
            return returns

        impl._configure_trials = configure_in_their_folders
        impl.launcher.launch = launch_with_heartbeat
