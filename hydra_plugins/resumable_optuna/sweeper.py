"""The sweeper: Optuna's ask-and-tell loop around Hydra's launcher, on a study that outlives its drivers.

Each batch of ``n_jobs`` trials is asked, given to the launcher as one batch of jobs (a joblib pool, a SLURM array),
and told its results. Before each batch the driver counts the study's COMPLETE trials, wherever they ran: with several
drivers on one study, each stops once the study has ``n_trials`` (as Optuna's ``MaxTrialsCallback`` counts them in
``Study.optimize``: a driver that started its last trial before another finished one may add one, so the study ends
with between ``n_trials`` and ``n_trials`` + one batch per other driver). A driver also runs at most the trials that
were missing when it started, so trials that keep failing do not make it run forever.
"""
from __future__ import annotations

import inspect
import logging
import warnings
import zlib
from pathlib import Path
from typing import Any

from hydra.core.plugins import Plugins
from hydra.plugins.sweeper import Sweeper
from omegaconf import DictConfig, OmegaConf

from hydra_plugins.resumable_optuna import killed_trials
from hydra_plugins.resumable_optuna.search_space import grid_of, search_space
from hydra_plugins.resumable_optuna.study_storage import (
    check_sqlite_file,
    check_storage_value,
    dashboard_command,
    database_errors,
    journal_file,
    note_errors,
    open_storage,
    sqlite_file,
    storage_failure,
)
from textcore.errors import ConfigError, exit_on_user_error

log = logging.getLogger(__name__)
DIRECTIONS = ("minimize", "maximize")


def resumed_seed(seed: int, trials_in_study: int, sweep_dir: str) -> int:
    """The sampler's seed for a study that already holds trials, or that other drivers may share: another for every
    count of trials and every sweep folder (each driver has its own), the same for the same ones."""
    return (int(seed) + trials_in_study + zlib.crc32(str(sweep_dir).encode("utf-8"))) % 2**31


def directions_of(direction: Any) -> list[str]:
    """``direction`` (a name, or a list of names for several objectives) as Optuna's list of directions."""
    names = list(direction) if isinstance(direction, (list, tuple)) or OmegaConf.is_list(direction) else [direction]
    names = [str(getattr(n, "name", n)).split(".")[-1].lower() for n in names]
    bad = [n for n in names if n not in DIRECTIONS]
    if bad or not names:
        raise ConfigError(f"hydra.sweeper.direction={direction}: each direction is minimize or maximize (a list of "
                          "them for several objectives)")
    return names


def build_sampler(cfg: dict, distributions: dict, seed: int | None, parallel: bool):
    """The sampler of ``hydra.sweeper.sampler`` (its ``_target_`` and settings; null settings are Optuna's
    defaults); the grid sampler gets the grid of the search space, TPE ``constant_liar`` when trials run in parallel
    and the setting is null."""
    import optuna
    from hydra.utils import get_class

    settings = {k: v for k, v in cfg.items() if not k.startswith("_") and v is not None}
    target = str(cfg.get("_target_"))
    try:
        cls = get_class(target)
    except Exception as err:  # noqa: BLE001 - Hydra wraps the import error
        raise ConfigError(f"hydra.sweeper.sampler._target_={target}: no such sampler ({err}); use "
                          "hydra/sweeper/sampler=tpe|gp|random|grid|cmaes|nsgaii") from None
    if seed is not None:
        settings["seed"] = seed
    if "n_startup_trials" not in inspect.signature(cls).parameters:
        settings.pop("n_startup_trials", None)  # config.py's _NoStartupConf: accepted for switching, not used
    if issubclass(cls, optuna.samplers.TPESampler) and settings.get("constant_liar") is None:
        settings["constant_liar"] = parallel
    with warnings.catch_warnings():  # multivariate TPE, constant_liar, GP: "experimental" in some Optuna 4 releases
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if issubclass(cls, optuna.samplers.GridSampler):
            return cls(grid_of(distributions), **settings)
        try:
            return cls(**settings)
        except TypeError as err:
            raise ConfigError(f"hydra.sweeper.sampler: {target} does not take these settings ({err}); see "
                              f"hydra_plugins/resumable_optuna/config.py for each sampler's keys") from None


class ResumableOptunaSweeper(Sweeper):
    def __init__(self, sampler: Any, direction: Any = "minimize", storage: str | None = None,
                 study_name: str | None = None, n_trials: int = 20, n_jobs: int = 2, max_failure_rate: float = 0.0,
                 params: Any = None, custom_search_space: str | None = None, heartbeat_seconds: float = 30.0,
                 grace_seconds: float = 300.0):
        self.sampler_cfg = OmegaConf.to_container(sampler, resolve=True) if OmegaConf.is_config(sampler) \
            else dict(sampler or {})
        self.direction = direction
        self.storage = storage
        self.study_name = study_name
        self.n_trials = int(n_trials)
        self.n_jobs = int(n_jobs)
        self.max_failure_rate = float(max_failure_rate)
        self.params = params
        self.custom_search_space = custom_search_space
        self.heartbeat_seconds = float(heartbeat_seconds)
        self.grace_seconds = float(grace_seconds)

    # setup and sweep run in Hydra's own error handler, outside run.py's: the decorator gives the one-line exit
    @exit_on_user_error
    def setup(self, *, hydra_context, task_function, config: DictConfig) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.sweep_dir = Path(str(config.hydra.sweep.dir))
        if not 0 < self.heartbeat_seconds < self.grace_seconds:
            raise ConfigError(
                f"hydra.sweeper.heartbeat_seconds={self.heartbeat_seconds:g} and grace_seconds={self.grace_seconds:g}:"
                " the heartbeat must be positive and more frequent than the grace period (e.g. 30 and 300)")
        if self.n_jobs < 1 or self.n_trials < 0 or not 0.0 <= self.max_failure_rate <= 1.0:
            raise ConfigError(f"hydra.sweeper: n_jobs={self.n_jobs} (>= 1), n_trials={self.n_trials} (>= 0) and "
                              f"max_failure_rate={self.max_failure_rate:g} (0 to 1) are out of range")
        self.directions = directions_of(self.direction)
        check_storage_value(self.storage)
        path = sqlite_file(self.storage)
        if path is not None:
            check_sqlite_file(path)
        for file in (path, journal_file(self.storage)):
            if file is not None:
                file.parent.mkdir(parents=True, exist_ok=True)
        self.launcher = Plugins.instance().instantiate_launcher(config=config, hydra_context=hydra_context,
                                                                task_function=task_function)
        self.custom = None
        if self.custom_search_space:
            from hydra.utils import instantiate

            self.custom = instantiate({"_target_": self.custom_search_space, "_partial_": True})
        self.study = self._open_study()

    def _open_study(self):
        import optuna

        storage = open_storage(self.storage, self.heartbeat_seconds, self.grace_seconds,
                               killed_trials.RequeueStale(self.grace_seconds))
        try:
            study = optuna.create_study(study_name=self.study_name, storage=storage, directions=self.directions,
                                        load_if_exists=True, sampler=optuna.samplers.RandomSampler())
            self.requeued = killed_trials.requeue_killed_trials(study)
        except database_errors() as err:
            raise storage_failure(self.storage, err) from err
        return study

    def _shared_storage(self) -> bool:
        """Whether other drivers may use the study: any storage but an SQLite file in this sweep's folder."""
        path = sqlite_file(self.storage)
        if not self.storage:
            return False
        if path is None:
            return True
        return self.sweep_dir.resolve() not in path.resolve().parents

    def _complete(self) -> int:
        import optuna

        return len(self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)))

    @exit_on_user_error
    def sweep(self, arguments: list[str]) -> None:
        overrides = [f"{k}={v}" for k, v in (self.params or {}).items()] + list(arguments)
        distributions, fixed = search_space(overrides)
        study = self.study
        trials = study.get_trials(deepcopy=False)
        wanted = self.n_trials
        if "GridSampler" in str(self.sampler_cfg.get("_target_")):
            size = 1
            for values in grid_of(distributions).values():
                size *= len(values)
            wanted = min(wanted, size)
        seed = self.sampler_cfg.get("seed")
        if seed is not None and (trials or self._shared_storage()):
            seed = resumed_seed(seed, len(trials), str(self.sweep_dir.resolve()))
            log.info("sampler seeded with %d (seed %s, %d trials in the study): a resumed or shared study draws new "
                     "parameters", seed, self.sampler_cfg["seed"], len(trials))
        study.sampler = build_sampler(self.sampler_cfg, distributions, seed,
                                      parallel=self.n_jobs > 1 or self._shared_storage())
        complete = self._complete()
        budget = max(0, wanted - complete)
        if trials:
            again = self.requeued
            log.info("study %s: %d of hydra.sweeper.n_trials=%d trials complete, %d to run%s", study.study_name,
                     complete, wanted, budget, f" (trials {', '.join(map(str, again))} again: their driver was "
                     "killed)" if again else "")
        log.info("Study name: %s; storage: %s; sampler: %s; directions: %s%s", study.study_name, self.storage,
                 type(study.sampler).__name__, self.directions,
                 f"; to watch it: {dashboard_command(self.storage)}" if self.storage else "")
        while budget > 0:
            self.requeue_each_batch()
            to_go = min(budget, wanted - self._complete(), self.n_jobs)
            if to_go <= 0:
                log.info("study %s has its %d COMPLETE trials (other drivers ran some): this driver stops",
                         study.study_name, wanted)
                break
            self._run_batch(to_go, distributions, fixed)
            budget -= to_go
        self._write_results()

    def requeue_each_batch(self) -> list[int]:
        """Trials of drivers that died since this one started (another machine's, or this host's)."""
        try:
            return killed_trials.requeue_killed_trials(self.study)
        except database_errors() as err:
            raise storage_failure(self.storage, err) from err

    def _configure(self, trial, distributions: dict, fixed: dict) -> tuple[str, ...]:
        """The trial's parameters (a requeued trial keeps its own) and its job folder: ``<sweep>/<trial number>``,
        or, for Optuna's copy of a trial whose driver died, the original's folder in this sweep, where its job
        continues from its last.ckpt."""
        for name, dist in distributions.items():
            trial._suggest(name, dist)
        for name, value in fixed.items():
            trial.set_user_attr(name, value)
        if self.custom is not None:
            self.custom(self.config, trial)
        overlap = set(trial.params) & set(fixed)
        if overlap:
            raise ConfigError(f"hydra.sweeper.params: {sorted(overlap)} are both searched and fixed; keep one")
        earlier = Path(str(trial.user_attrs.get("run") or ""))
        subdir = earlier.name if trial.user_attrs.get("run") and earlier.parent.resolve() == \
            self.sweep_dir.resolve() else str(trial.number)
        trial.set_user_attr("run", str(self.sweep_dir / subdir))  # before it starts: kept if killed
        self.study._storage.set_trial_system_attr(trial._trial_id, killed_trials.DRIVER, killed_trials.driver_record())
        values = {**trial.params, **fixed}
        return (*(f"{name}={value}" for name, value in values.items()), f"hydra.sweep.subdir={subdir}")

    def _run_batch(self, size: int, distributions: dict, fixed: dict) -> None:
        import optuna

        study = self.study
        with warnings.catch_warnings():  # "heartbeat ... supposed to be used with Study.optimize": the loop is ours
            warnings.simplefilter("ignore", UserWarning)
            trials = [study.ask() for _ in range(size)]
        # the heartbeats start before the jobs are configured: a requeued trial's old heartbeat is renewed at once
        with killed_trials.beating(study._storage, [t._trial_id for t in trials]):
            overrides = [self._configure(t, distributions, fixed) for t in trials]
            returns = self.launcher.launch(overrides, initial_job_idx=trials[0].number)
            note_errors(trials, returns)
        failures = []
        for trial, ret in zip(trials, returns):
            try:
                values = self._values(ret)
                state = optuna.trial.TrialState.COMPLETE
            except Exception as err:  # noqa: BLE001 - the job's failure, recorded as the trial's
                values, state = None, optuna.trial.TrialState.FAIL
                log.warning("trial %d failed: %s", trial.number, str(err).splitlines()[0] if str(err) else err)
                failures.append(err)
            try:
                study.tell(trial, values=values, state=state)
            except optuna.exceptions.UpdateFinishedTrialError:
                log.warning("trial %d was ended by another driver meanwhile (no heartbeat for over %g s): its result "
                            "is not recorded", trial.number, self.grace_seconds)
            except RuntimeError as err:  # the grid sampler stops the study once the grid is done
                if "Study.stop" not in str(err):
                    raise
        if failures and len(failures) / len(returns) > self.max_failure_rate:
            log.error("%d of %d trials failed, over max_failure_rate=%g", len(failures), len(returns),
                      self.max_failure_rate)
            for ret in returns:
                ret.return_value  # noqa: B018 - raises the first failed job's exception, with its traceback

    def _values(self, ret) -> list[float]:
        result = ret.return_value  # raises the job's exception
        if len(self.directions) == 1:
            try:
                return [float(result)]
            except (TypeError, ValueError):
                raise ValueError(f"the job returned {result!r}, not a number (the objective)") from None
        try:
            values = [float(v) for v in result]
        except (TypeError, ValueError):
            raise ValueError(f"the job returned {result!r}, not a list of numbers (the objectives)") from None
        if len(values) != len(self.directions):
            raise ValueError(f"the job returned {len(values)} values for {len(self.directions)} directions")
        return values

    def _write_results(self) -> None:
        study = self.study
        if len(self.directions) < 2:
            try:
                best = study.best_trial
            except ValueError:
                log.warning("study %s has no COMPLETE trial: no best parameters", study.study_name)
                return
            results = {"name": "optuna", "best_params": best.params, "best_value": best.value}
            log.info("Best parameters: %s", best.params)
            log.info("Best value: %s", best.value)
        else:
            front = study.best_trials
            results = {"name": "optuna", "solutions": [{"params": t.params, "values": t.values} for t in front]}
            log.info("Number of Pareto solutions: %d", len(front))
        OmegaConf.save(OmegaConf.create(results), self.sweep_dir / "optimization_results.yaml")
