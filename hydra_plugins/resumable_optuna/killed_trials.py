"""Trials that a sweep driver left RUNNING when it was killed: found when a sweep starts, and run again.

Optuna's own heartbeat (``RDBStorage(heartbeat_interval=...)``, ``fail_stale_trials``) only works inside
``Study.optimize``, which Hydra's ask-and-tell loop never calls; a trial without a heartbeat row is never stale, and
its age check drops whole days. So this sweeper records, for every trial it asks:

- its driver: system attribute ``driver``, the process as ``runtime.run_lock`` records a run's (pid, host,
  the process's start time, SLURM job and restart count);
- a heartbeat in Optuna's ``trial_heartbeats`` table every ``heartbeat_seconds`` while the trial's job runs
  (:class:`Heartbeat`, a thread of the driver), by the database's clock.

A RUNNING trial's driver is gone when, on this host, its pid no longer runs (or now belongs to another program), when
it was an earlier attempt of this SLURM job, or, on another host (where a pid cannot be checked) and for a trial
without a driver record, when its last heartbeat is older than ``grace_seconds``. Such a trial goes back to
``WAITING`` with its number, parameters and run folder, and the reason in its user attribute ``killed`` (a list: one
entry per killed attempt): the next ``ask`` of any driver of the study runs it again, in the same job folder when it
is this sweep's, where the job continues from its last.ckpt (``ctclust.training.start_point``). A trial whose driver
may be alive, or whose job still holds its run folder's lock (a submitit job outlives its driver), is left alone,
and the log says why.
"""
from __future__ import annotations

import logging
import threading
from pathlib import Path

from runtime import run_lock
from textcore import run_folder

log = logging.getLogger(__name__)

DRIVER = "driver"  # system attribute: the process that asked the trial
KILLED = "killed"  # user attribute: why each earlier attempt of the trial ended without a result


def driver_record() -> dict:
    """This process, as a trial's ``driver`` attribute records it."""
    me = run_lock.this_process()
    return {key: me[key] for key in ("pid", "host", "started", "process_start", "slurm_job", "slurm_restart")}


class Heartbeat:
    """While the block runs, a thread records a heartbeat of every trial in ``trial_ids`` every ``seconds`` (an RDB
    storage ``url``; other storages have no heartbeat table, and nothing is recorded)."""

    def __init__(self, url: str | None, trial_ids: list[int], seconds: float):
        self.url = url if url and "://" in str(url) else None
        self.trial_ids = list(trial_ids)
        self.seconds = float(seconds)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _beat(self, storage) -> None:
        while True:
            for trial_id in self.trial_ids:
                try:
                    storage.record_heartbeat(trial_id)
                except Exception as err:  # noqa: BLE001 - a missed beat must not stop the sweep; the next one retries
                    log.debug("heartbeat of trial %s not recorded: %s", trial_id, err)
            if self._stop.wait(self.seconds):
                return

    def __enter__(self) -> Heartbeat:
        if self.url is not None and self.trial_ids:
            import optuna

            storage = optuna.storages.RDBStorage(self.url)
            storage.record_heartbeat(self.trial_ids[0])  # before the jobs start: a first beat that cannot be missed
            self._storage = storage
            self._thread = threading.Thread(target=self._beat, args=(storage,), name="trial-heartbeat", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._storage.engine.dispose()


def heartbeat_ages(url: str | None, study_id: int) -> dict[int, float]:
    """Trial id -> seconds since its last heartbeat, by the database's clock (every trial of the study that has one);
    empty for storages without a heartbeat table."""
    if not url or "://" not in str(url):
        return {}
    import optuna
    from optuna.storages._rdb import models
    from sqlalchemy import func

    storage = optuna.storages.RDBStorage(str(url))
    session = storage.scoped_session()
    try:
        now = session.execute(func.now()).scalar()
        rows = (session.query(models.TrialHeartbeatModel).join(models.TrialModel)
                .filter(models.TrialModel.study_id == study_id).all())
        return {row.trial_id: (_naive(now) - _naive(row.heartbeat)).total_seconds() for row in rows}
    finally:
        session.close()
        storage.engine.dispose()


def _naive(moment):
    from datetime import datetime

    if isinstance(moment, str):  # SQLite without SQLAlchemy's conversion
        moment = datetime.fromisoformat(moment)
    return moment.replace(tzinfo=None)


def gone_driver(trial, ages: dict[int, float], grace_seconds: float) -> tuple[str | None, str]:
    """(why the trial's driver is gone, None when it may be alive; what was found, for the log)."""
    driver = trial.system_attrs.get(DRIVER)
    if isinstance(driver, dict) and isinstance(driver.get("pid"), int):
        gone = run_lock.gone_holder(driver)
        if gone is not None:
            return f"its sweep driver ({gone})", "gone"
        state = run_lock.holder_state(driver, run_lock.this_process())
        if state != "unknown":
            return None, f"its driver, pid {driver['pid']} on this host, still runs"
        found = f"its driver runs on host {driver.get('host')}"
    else:
        found = "it has no driver record (asked by an older version of this sweeper)"
    age = ages.get(trial._trial_id)
    if age is None:
        return None, f"{found}, and no heartbeat was recorded"
    if age > grace_seconds:
        return f"no heartbeat from its sweep driver for {age:.0f} s (grace_seconds={grace_seconds:g})", "stale"
    return None, f"{found}, whose last heartbeat is {age:.0f} s old (grace_seconds={grace_seconds:g})"


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


def requeue_killed_trials(study, url: str | None, grace_seconds: float) -> list[int]:
    """Every RUNNING trial of ``study`` whose driver is gone back to WAITING (module docstring); returns their
    numbers."""
    import optuna

    running = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
    if not running:
        return []
    ages = heartbeat_ages(url, study._study_id)
    requeued = []
    for trial in running:
        why, found = gone_driver(trial, ages, grace_seconds)
        if why is None:
            log.warning("trial %d of study %s is RUNNING and left alone: %s", trial.number, study.study_name, found)
            continue
        job = job_still_runs(trial)
        if job is not None:
            log.warning("trial %d of study %s: %s, but its job still runs (%s, holds %s): left alone; start the "
                        "sweep again once it ended", trial.number, study.study_name, why, job,
                        Path(trial.user_attrs["run"]) / run_folder.LOCK)
            continue
        storage = getattr(study._storage, "_backend", study._storage)  # past Optuna's cache of this process
        reason = f"killed: {why}"
        storage.set_trial_user_attr(trial._trial_id, KILLED, [*trial.user_attrs.get(KILLED, []), reason])
        if not storage.set_trial_state(trial._trial_id, optuna.trial.TrialState.WAITING):
            continue  # another driver took it first
        log.warning("trial %d of study %s was %s; it runs again with the same parameters%s", trial.number,
                    study.study_name, reason, f" in {trial.user_attrs['run']}" if trial.user_attrs.get("run") else "")
        requeued.append(trial.number)
    return requeued
