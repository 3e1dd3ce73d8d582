"""Hydra callbacks (``hydra.callbacks`` in conf/hydra/default.yaml), not Lightning ones.

``OutputFolderCheck`` (every run and multirun): the run or sweep folder can be created, checked just before
Hydra creates it (Hydra's own failure there is a traceback), and no other live run or sweep writes it
(``runtime.run_lock``: a sweep holds its folder's lock while it runs); otherwise one line and exit 2.

``SweepCallback`` does the bookkeeping of a multirun (``python run.py -m ...``) whatever the
launcher (basic, joblib, submitit_local, submitit_slurm) or sweeper (basic grid, Optuna):

- **job start** (every run, in the job's own process): sets torch's thread count, so jobs that
  run side by side do not each start one thread per core (``threads_per_job``; with
  ``hydra/launcher=joblib`` and ``threads_per_job: null``: usable cores // ``n_jobs``);
- **a resumed sweep** (the same command and ``hydra.sweep.dir`` again): a job whose folder holds its
  finished results.json, with the same overrides, is not trained again (the run asks
  ``runtime.multirun.finished_job``); its objective goes to the sweeper. A killed or interrupted job continues
  from its last.ckpt (``ctclust.training.start_point``), a failed one runs again;
- **job end**: the job's W&B run is finished (the next job of the process gets its own); a job
  that raised writes ``failed.json`` (type and message) into its folder (run.py does the same
  for a user error, and lets the other jobs go on);
- **multirun end** (in the launching process): ``evaluation.across_runs.aggregate`` tables of every job
  (``aggregate.md/.csv/.json``) and, for an Optuna sweep, ``trials.md/.csv`` (one row per trial:
  the searched parameters and the objective) in the sweep folder, the table printed, and the
  aggregate logged to W&B when the sweep logs there; the trials table has the study's view of each trial
  (waiting to run again, why an earlier attempt was killed). If a job this start of the sweep ran failed, the multirun
  exits with status 2 after writing them (``fail_on_job_errors``); jobs of an earlier start that did not
  finish get a ``note:`` line instead. When the sweeper itself stops on a failed
  job (Hydra's basic sweeper raises once its batch is done), the tables are still written as the
  process exits.
"""
from __future__ import annotations

import atexit
import contextlib
import logging
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from runtime.multirun import hydra_config, is_multirun, write_failure
from runtime.run_lock import (
    FolderInUseError,
    FolderLock,
    earlier_run,
    gone_holder,
    launch_rank,
    refuse_earlier_run,
    restart_count,
)
from textcore import run_folder
from textcore.device_settings import usable_cores
from textcore.errors import USER_ERROR_EXIT_CODE, ConfigError, report_user_error
from textcore.run_folder import folder_problem

log = logging.getLogger(__name__)


class OutputFolderCheck(Callback):
    """Hydra callback: stops with one line (exit 2) when the run or sweep folder cannot be created.

    Hydra creates ``hydra.run.dir`` before it calls ``run.py``'s main, and a failure there ends in
    Hydra's own traceback; this check runs just before.
    """

    def _check(self, folder: str, key: str) -> None:
        problem = folder_problem(folder)
        if problem:
            print(
                f"error: cannot create the run folder '{folder}': {problem}. Write elsewhere with `{key}=<folder>` "
                "or `paths.log_dir=<folder>`.",
                file=sys.stderr,
                flush=True,
            )
            sys.exit(USER_ERROR_EXIT_CODE)

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        folder = str(config.hydra.run.dir)
        self._check(folder, "hydra.run.dir")
        # refused before Hydra writes its .hydra/ over the other run's (the run's lifecycle checks again)
        if launch_rank() == 0:
            self._refuse_if_held(lambda: self._check_run_folder(config, folder))

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        folder = str(config.hydra.sweep.dir)
        self._check(folder, "hydra.sweep.dir")
        if launch_rank() == 0:  # two sweeps in one folder would number their jobs alike
            self._sweep_lock = FolderLock(folder, what="sweep", key="hydra.sweep.dir")
            self._refuse_if_held(self._sweep_lock.acquire)
            atexit.register(self._sweep_lock.release)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if getattr(self, "_sweep_lock", None) is not None:
            self._sweep_lock.release()

    @staticmethod
    def _check_run_folder(config: DictConfig, folder: str) -> None:
        FolderLock(folder).check()
        found = earlier_run(folder)
        if found and not config.get("ckpt_path") and restart_count() == 0:  # a requeued job finds its own record
            raise refuse_earlier_run(folder, found)

    @staticmethod
    def _refuse_if_held(check) -> None:
        try:
            check()
        except FolderInUseError as err:
            report_user_error(err)
            sys.exit(USER_ERROR_EXIT_CODE)


def threads_for_job(setting, launcher: DictConfig | dict | None, cores: int) -> int | None:
    """torch threads for one job: ``setting`` if given; with the joblib launcher cores // n_jobs
    (joblib's n_jobs: -1 = all cores, -2 = all but one, ...); otherwise None (torch's default)."""
    if setting is not None:
        threads = int(setting)
        if threads < 1:
            raise ConfigError(f"threads_per_job must be >= 1 or null, got {setting}")
        return threads
    target = str((launcher or {}).get("_target_", ""))
    if "joblib" not in target.lower():
        return None
    n_jobs = int((launcher or {}).get("n_jobs", -1) or -1)
    if n_jobs < 0:
        n_jobs = max(1, cores + 1 + n_jobs)
    return max(1, cores // n_jobs)


def job_starts(sweep_dir: Path) -> dict[str, int]:
    """Job folder name -> when Hydra last started a job there (the time of its ``.hydra/hydra.yaml``, which Hydra
    writes as every job starts, in the job's process, whatever the launcher)."""
    starts = {}
    for marker in sweep_dir.glob(f"*/{run_folder.HYDRA}/hydra.yaml"):
        with contextlib.suppress(OSError):
            starts[marker.parent.parent.name] = marker.stat().st_mtime_ns
    return starts


def started_since(sweep_dir: Path, before: dict[str, int]) -> set[str]:
    """The job folders in which a job started since ``before`` (:func:`job_starts`) was taken: the jobs this start
    of the sweep ran. Each folder's time is compared with its own earlier one, so other hosts' clocks do not matter."""
    return {name for name, when in job_starts(sweep_dir).items() if before.get(name) != when}


def unfinished_reason(folder: Path, reason: str) -> str:
    """Why a job folder of an earlier start of the sweep has no result: killed, when the lock its process held is
    left behind by a process that is gone; else the aggregate table's reason."""
    holder = FolderLock(folder).holder()
    gone = gone_holder(holder) if holder else None
    return f"killed (its process, {gone}; its {run_folder.LOCK} is left behind)" if gone else reason


def study_records(storage, study_name) -> list[dict] | None:
    """The trials of an Optuna study as the trials table reads them (number, state, run folder, error, why earlier
    attempts were killed), or None without a study that can be read."""
    if not storage or not study_name:
        return None
    try:
        from hydra_plugins.resumable_optuna.study_storage import existing_study

        study = existing_study(str(storage), str(study_name))
        if study is None:
            return None
        return [{"number": t.number, "state": t.state.name.lower(), "run": t.user_attrs.get("run"),
                 "error": t.user_attrs.get("error"), "killed": list(t.user_attrs.get("killed") or [])}
                for t in study.get_trials(deepcopy=False)]
    except Exception as err:  # noqa: BLE001 - the table is still written from the run folders
        log.warning("trials table without the study's states: %s cannot be read (%s)", storage, err)
        return None


def finish_wandb_run(failed: bool = False) -> None:
    """Close the job's W&B run: Lightning's WandbLogger leaves it open, and the next job of a
    multirun in the same process (basic and joblib launchers) would otherwise log into it."""
    wandb = sys.modules.get("wandb")
    if wandb is not None and getattr(wandb, "run", None) is not None:
        wandb.finish(exit_code=1 if failed else 0)


class SweepCallback(Callback):
    """Thread division at job start, failure records at job end, tables when a multirun ends.

    Args:
        aggregate: write the aggregate (and trials) tables into the sweep folder.
        fail_on_job_errors: exit with status 2 after the tables when a job failed.
        print_table: print the aggregate Markdown table to the console.
    """

    def __init__(self, aggregate: bool = True, fail_on_job_errors: bool = True, print_table: bool = True):
        self.aggregate = aggregate
        self.fail_on_job_errors = fail_on_job_errors
        self.print_table = print_table
        self._pending: DictConfig | None = None

    # -- every job ----------------------------------------------------------------------------------------
    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        hydra_cfg = hydra_config()
        if hydra_cfg is not None and hydra_cfg.runtime.output_dir:  # a requeued job's earlier failure is stale
            (Path(hydra_cfg.runtime.output_dir) / run_folder.FAILED).unlink(missing_ok=True)
        launcher = config.hydra.launcher if is_multirun() else None
        threads = threads_for_job(config.get("threads_per_job"), launcher, usable_cores())
        if threads is not None:
            import torch

            torch.set_num_threads(threads)
            log.info("torch threads for this job: %d", threads)

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        from hydra.core.utils import JobStatus

        failed = job_return.status == JobStatus.FAILED
        output_dir = Path(hydra_config().runtime.output_dir)
        finish_wandb_run(failed or (output_dir / run_folder.FAILED).exists())  # run.py's user errors return
        if not failed or not is_multirun():
            return
        try:
            job_return.return_value  # raises the job's exception
        except Exception as err:  # noqa: BLE001 - recorded, Hydra reports it
            if not (output_dir / run_folder.FAILED).exists():
                write_failure(output_dir, err)

    # -- the launching process --------------------------------------------------------------------------
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._started_before = job_starts(Path(str(config.hydra.sweep.dir)))
        if self.aggregate:
            self._pending = config
            atexit.register(self._write_if_pending)  # the sweeper may raise before on_multirun_end

    def _write_if_pending(self) -> None:
        if self._pending is not None:
            config, self._pending = self._pending, None
            try:
                self.write_tables(config)
            except Exception as err:  # noqa: BLE001 - at exit, report and go
                if not any(Path(str(config.hydra.sweep.dir)).glob("*/.hydra")):
                    return  # the sweeper stopped before any job (its own error said why): no table was due
                print(f"aggregate table not written: {err}", file=sys.stderr)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        self._pending = None
        if not self.aggregate:
            return
        sweep_dir = Path(str(config.hydra.sweep.dir))
        failed = self.write_tables(config)
        ran_now = started_since(sweep_dir, getattr(self, "_started_before", {}))
        mine = [job for job in failed if Path(job["run"]).name in ran_now]
        earlier = [job for job in failed if Path(job["run"]).name not in ran_now]
        if earlier:  # a resumed sweep's status is about the jobs it ran; the others are reported as what they are
            first = earlier[0]
            print(f"note: {len(earlier)} job(s) of an earlier start of this sweep, not run by this one, did not "
                  f"finish, e.g. {first['run']}: {unfinished_reason(Path(first['run']), first['reason'])} (all listed "
                  f"in {sweep_dir / 'aggregate.md'})", file=sys.stderr)
        if mine and self.fail_on_job_errors:
            first = mine[0]
            print(f"error: {len(mine)} job(s) of the multirun failed, e.g. {first['run']}: {first['reason']} "
                  f"(all listed in {sweep_dir / 'aggregate.md'})", file=sys.stderr)
            sys.exit(USER_ERROR_EXIT_CODE)

    def write_tables(self, config: DictConfig) -> list[dict]:
        """Aggregate (and trials) tables into the sweep folder; returns the failed jobs."""
        from evaluation.across_runs.aggregate import aggregate_folders, markdown, write_outputs
        from evaluation.across_runs.sweep_trials import trials, write_trials

        sweep_dir = Path(str(config.hydra.sweep.dir))
        if not sweep_dir.is_dir():
            return []
        agg, runs = aggregate_folders([sweep_dir])
        title = f"Multirun {sweep_dir}"
        paths = write_outputs(agg, sweep_dir, title)
        if self.print_table:
            print(markdown(agg, title), flush=True)
        sweeper = config.hydra.get("sweeper") or {}
        if "optuna" in str(sweeper.get("_target_", "")).lower():
            params = [str(k) for k in (sweeper.get("params") or {})]
            direction = str(sweeper.get("direction", "maximize")).split(".")[-1]
            study = study_records(sweeper.get("storage"), sweeper.get("study_name"))
            paths += write_trials(trials(runs, params, study), params, sweep_dir, direction)
        log.info("multirun tables: %s", ", ".join(str(p) for p in paths))
        if "wandb" in (config.get("logger") or {}):
            from evaluation.across_runs.wandb_dashboard import log_aggregate

            log_aggregate(agg, config, sweep_dir)
        return agg["failed"]
