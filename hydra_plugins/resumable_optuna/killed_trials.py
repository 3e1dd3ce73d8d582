"""Trials that a sweep driver left RUNNING when it died: found when a driver starts and before each batch it asks,
and run again.

Optuna's own machinery does most of it:

- while a trial's job runs, its driver records Optuna's heartbeat of the trial (``RDBStorage(heartbeat_interval,
  grace_period)``, the thread of ``Study.optimize``; :func:`beating`);
- ``optuna.storages.fail_stale_trials`` fails every RUNNING trial whose heartbeat is older than the grace period, and
  the storage's ``RetryHeartbeatStaleTrialCallback`` (``RetryFailedTrialCallback`` before Optuna 4.9) queues a copy
  of it with its parameters (:class:`RequeueStale` notes why in the copy's user attribute ``killed``); the sweeper
  runs that copy in the original trial's job folder, where its job continues from its last.ckpt.

What stays ours, because Optuna does not cover the case:

- Optuna's ``JournalStorage`` has no heartbeat (only ``RDBStorage`` implements ``BaseHeartbeat``, Optuna 5.0):
  :class:`HeartbeatJournalStorage` records it as a trial system attribute, so that the same heartbeat thread and
  ``fail_stale_trials`` work for a journal file on a shared file system;
- a driver of this host whose process is gone is known dead at once (Optuna waits for the grace period): its trial
  goes back to ``WAITING`` with its number, parameters and job folder (:func:`requeue_trials_of_gone_drivers`), so a
  restarted or requeued driver runs it again first;
- a trial whose job still holds its run folder's lock (a submitit job outlives its driver) is alive although its
  driver is not: its heartbeat is recorded for it (:func:`keep_trials_of_running_jobs`), so it is not run twice.

Each trial records its driver (system attribute ``driver``: pid, host, the process's start time, SLURM job), and
every attempt that ended without a result is noted in the user attribute ``killed`` (a list).
"""
from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path

from runtime import run_lock
from textcore import run_folder

log = logging.getLogger(__name__)

DRIVER = "driver"  # system attribute: the process that asked the trial
KILLED = "killed"  # user attribute: why each earlier attempt of the trial ended without a result
HEARTBEAT = "heartbeat"  # system attribute of a journal storage's trial: the driver's clock at its last heartbeat


def driver_record() -> dict:
    """This process, as a trial's ``driver`` attribute records it."""
    me = run_lock.this_process()
    return {key: me[key] for key in ("pid", "host", "started", "process_start", "slurm_job", "slurm_restart")}


def heartbeat_journal_storage(backend, heartbeat_seconds: float, grace_seconds: float, stale_callback=None):
    """A ``JournalStorage`` of ``backend`` with Optuna's heartbeat interface (:class:`HeartbeatJournalStorage`)."""
    return _journal_class()(backend, heartbeat_seconds, grace_seconds, stale_callback)


def _journal_class():
    import optuna
    from optuna.storages._heartbeat import BaseHeartbeat

    class HeartbeatJournalStorage(optuna.storages.JournalStorage, BaseHeartbeat):
        """Optuna's journal storage with a heartbeat: the system attribute ``heartbeat`` (the driver's wall clock;
        the drivers' clocks must agree to well within ``grace_seconds``, as NTP keeps a cluster's)."""

        def __init__(self, backend, heartbeat_seconds: float, grace_seconds: float, stale_callback=None):
            super().__init__(backend)
            self._heartbeat_seconds = heartbeat_seconds
            self._grace_seconds = grace_seconds
            self._stale_callback = stale_callback

        def record_heartbeat(self, trial_id: int) -> None:
            with contextlib.suppress(optuna.exceptions.UpdateFinishedTrialError):  # it ended meanwhile
                self.set_trial_system_attr(trial_id, HEARTBEAT, time.time())

        def _get_stale_trial_ids(self, study_id: int) -> list[int]:
            now = time.time()
            running = self.get_all_trials(study_id, deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
            return [t._trial_id for t in running  # as Optuna's RDBStorage: a trial without a heartbeat is not stale
                    if HEARTBEAT in t.system_attrs and now - float(t.system_attrs[HEARTBEAT]) > self._grace_seconds]

        def get_heartbeat_interval(self):
            return self._heartbeat_seconds

        def get_heartbeat_stale_trial_callback(self):
            return self._stale_callback

        def get_failed_trial_callback(self):  # the name before Optuna 4.9
            return self._stale_callback

    return HeartbeatJournalStorage


def retry_callback():
    """Optuna's callback that queues a copy of a trial its heartbeat declared stale (renamed in Optuna 4.9)."""
    import warnings

    import optuna

    retry = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None) or \
        optuna.storages.RetryFailedTrialCallback
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return retry()


class RequeueStale:
    """The storage's callback for a trial ``fail_stale_trials`` failed: Optuna's retry callback queues its copy, with
    why in ``killed`` and without the dead driver's heartbeat (the copy's own starts when a driver takes it)."""

    def __init__(self, grace_seconds: float):
        self.grace_seconds = grace_seconds
        self.retry = retry_callback()

    def __call__(self, study, trial) -> None:  # ``trial`` is a deep copy (fail_stale_trials)
        reason = (f"killed: no heartbeat from its sweep driver for over {self.grace_seconds:g} s "
                  f"(grace_seconds={self.grace_seconds:g}); trial {trial.number} runs again as a new trial")
        trial.user_attrs[KILLED] = [*trial.user_attrs.get(KILLED, []), reason]
        trial.system_attrs.pop(HEARTBEAT, None)
        trial.system_attrs.pop(DRIVER, None)
        self.retry(study, trial)
        log.warning("trial %d of study %s was %s", trial.number, study.study_name, reason)


@contextlib.contextmanager
def beating(storage, trial_ids: list[int]):
    """Optuna's heartbeat thread for each trial while the block runs (nothing for a storage without heartbeats)."""
    from optuna.storages._heartbeat import get_heartbeat_thread

    threads = [get_heartbeat_thread(trial_id, storage) for trial_id in trial_ids]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        for thread in threads:
            thread.join()


def gone_driver(trial) -> str | None:
    """Why the trial's driver, a process of this host, is gone; None when it may run (or runs on another host, or
    the trial has no driver record): Optuna's heartbeat decides those."""
    driver = trial.system_attrs.get(DRIVER)
    if not isinstance(driver, dict) or not isinstance(driver.get("pid"), int):
        return None
    gone = run_lock.gone_holder(driver)
    return f"its sweep driver ({gone})" if gone is not None else None


def job_still_runs(trial) -> str | None:
    """The live process that holds the trial's run folder (its job outlived the driver), or None."""
    folder = trial.user_attrs.get("run")
    if not folder:
        return None
    holder = run_lock.FolderLock(Path(folder)).holder()
    if not holder:
        return None
    if run_lock.holder_state(holder, run_lock.this_process()) in ("live", "unknown"):
        return run_lock.describe_holder(holder)
    return None


def _backend(study):
    """The study's storage past Optuna's cache of this process (RDB storages are wrapped in one)."""
    from optuna.storages._cached_storage import _CachedStorage

    storage = study._storage
    return storage._backend if isinstance(storage, _CachedStorage) else storage


def requeue_trials_of_gone_drivers(study) -> list[int]:
    """Every RUNNING trial whose driver on this host is gone, back to WAITING with its number (module docstring);
    returns their numbers."""
    import optuna

    requeued = []
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        why = gone_driver(trial)
        if why is None:
            continue
        job = job_still_runs(trial)
        if job is not None:
            log.warning("trial %d of study %s: %s, but its job still runs (%s, holds %s): left alone", trial.number,
                        study.study_name, why, job, Path(trial.user_attrs["run"]) / run_folder.LOCK)
            continue
        storage = _backend(study)
        reason = f"killed: {why}"
        try:
            storage.set_trial_user_attr(trial._trial_id, KILLED, [*trial.user_attrs.get(KILLED, []), reason])
            if not storage.set_trial_state_values(trial._trial_id, optuna.trial.TrialState.WAITING):
                continue
        except optuna.exceptions.UpdateFinishedTrialError:
            continue  # another driver failed it (its heartbeat was stale) and queued a copy
        log.warning("trial %d of study %s was %s; it runs again with the same parameters%s", trial.number,
                    study.study_name, reason, f" in {trial.user_attrs['run']}" if trial.user_attrs.get("run") else "")
        requeued.append(trial.number)
    return requeued


def keep_trials_of_running_jobs(study) -> None:
    """A heartbeat for each RUNNING trial whose job still holds its run folder, whatever became of its driver."""
    import optuna
    from optuna.storages._heartbeat import is_heartbeat_enabled

    storage = study._storage
    if not is_heartbeat_enabled(storage):
        return
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        if job_still_runs(trial) is not None:
            storage.record_heartbeat(trial._trial_id)


def requeue_killed_trials(study) -> list[int]:
    """The trials of drivers that are gone, run again: ours on this host at once (same number), the others' once
    their heartbeat is stale (Optuna's ``fail_stale_trials``: a copy). Returns the numbers requeued at once."""
    import warnings

    import optuna

    requeued = requeue_trials_of_gone_drivers(study)
    keep_trials_of_running_jobs(study)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)
    return requeued
